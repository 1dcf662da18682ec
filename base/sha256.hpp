// SHA-256 from the system's OpenSSL libcrypto (3 or 1.1), loaded with dlopen at first use and
// never linked: libsage2 and the tools ship in a manylinux wheel, which may not require it, and a
// digest others check a bundle against should come from a well-kept implementation, not ours.
// Without a loadable libcrypto everything else works; only a digest is unavailable, with the
// reason ($SAGE2_LIBCRYPTO names the library to load instead of libcrypto.so.3, libcrypto.so.1.1).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace sage2::base {

class Sha256 {
 public:
  // Throws Error(Unsupported) when libcrypto cannot be used, naming each library tried and why.
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t n);  // throws Error(Internal) if libcrypto fails
  std::string hex_digest();                      // 64 lower-case hex digits; ends the digest

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX*
  bool done_ = false;
};

// Why Sha256() would throw; empty when libcrypto is usable. Never throws.
std::string sha256_unavailable_reason() noexcept;

// A digest as a user types it (either case) → 64 lower-case hex digits; nullopt unless it is
// exactly 64 hex digits.
std::optional<std::string> parse_sha256_hex(const std::string& text);

}  // namespace sage2::base
