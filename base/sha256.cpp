#include "base/sha256.hpp"

#include <dlfcn.h>

#include <vector>

#include "base/config.hpp"
#include "base/dynlib.hpp"
#include "sage2/sage2.hpp"

namespace sage2::base {
namespace {

// The EVP calls OpenSSL 1.1 and 3 both export, with their types made opaque (no OpenSSL headers
// at build time). 1.0 named the first and last EVP_MD_CTX_create/_destroy: it is not supported.
struct Evp {
  void* (*md_ctx_new)() = nullptr;
  void (*md_ctx_free)(void*) = nullptr;
  const void* (*sha256)() = nullptr;
  int (*digest_init_ex)(void* ctx, const void* md, void* engine) = nullptr;
  int (*digest_update)(void* ctx, const void* data, std::size_t n) = nullptr;
  int (*digest_final_ex)(void* ctx, unsigned char* out, unsigned int* n) = nullptr;
  std::string library;  // the file that was loaded
  std::string reason;   // why none could be used; empty when loaded
};

// One library: true with `e` filled, or false with why appended to `tried`.
bool try_load(const std::string& lib, Evp& e, std::string& tried) {
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    const std::string why = err ? err : "cannot be loaded";
    tried += (tried.empty() ? "" : "; ") + (why.rfind(lib, 0) == 0 ? why : lib + ": " + why);  // dlerror names it
    return false;
  }
  using dynlib::symbol;
  const std::string missing =
      dynlib::resolve(h, symbol("EVP_MD_CTX_new", e.md_ctx_new), symbol("EVP_MD_CTX_free", e.md_ctx_free),
                      symbol("EVP_sha256", e.sha256), symbol("EVP_DigestInit_ex", e.digest_init_ex),
                      symbol("EVP_DigestUpdate", e.digest_update), symbol("EVP_DigestFinal_ex", e.digest_final_ex));
  if (!missing.empty()) {
    tried += (tried.empty() ? "" : "; ") + lib + " lacks " + missing + " (OpenSSL 1.1 or 3 is needed)";
    ::dlclose(h);
    return false;
  }
  e.library = lib;
  return true;  // kept loaded for the life of the process
}

Evp load() {
  const std::string named = config::process_config().libcrypto;
  const std::vector<std::string> candidates =
      named.empty() ? std::vector<std::string>{"libcrypto.so.3", "libcrypto.so.1.1"} : std::vector<std::string>{named};
  std::string tried;
  for (const auto& lib : candidates) {
    Evp e;
    if (try_load(lib, e, tried)) return e;
  }
  Evp none;
  none.reason = "cannot load libcrypto: " + tried +
                (named.empty() ? " (install OpenSSL 3 or 1.1, or name the library in SAGE2_LIBCRYPTO)"
                               : " (named by SAGE2_LIBCRYPTO)");
  return none;
}

const Evp& evp() {
  static const Evp e = load();
  return e;
}

}  // namespace

Sha256::Sha256() {
  const Evp& e = evp();
  if (!e.reason.empty()) throw Error(ErrorCode::Unsupported, "SHA-256 is unavailable: " + e.reason);
  ctx_ = e.md_ctx_new();
  if (!ctx_) throw Error(ErrorCode::OutOfMemory, "EVP_MD_CTX_new of " + e.library + " failed");
  if (e.digest_init_ex(ctx_, e.sha256(), nullptr) != 1) {
    e.md_ctx_free(ctx_);
    ctx_ = nullptr;
    throw Error(ErrorCode::Internal, "EVP_DigestInit_ex(SHA-256) of " + e.library + " failed");
  }
}

Sha256::~Sha256() {
  if (ctx_) evp().md_ctx_free(ctx_);
}

void Sha256::update(const void* data, std::size_t n) {
  if (done_) throw Error(ErrorCode::Internal, "Sha256::update after hex_digest");
  if (n == 0) return;
  if (evp().digest_update(ctx_, data, n) != 1)
    throw Error(ErrorCode::Internal, "EVP_DigestUpdate of " + evp().library + " failed");
}

std::string Sha256::hex_digest() {
  if (done_) throw Error(ErrorCode::Internal, "Sha256::hex_digest called twice");
  done_ = true;
  unsigned char md[32];
  unsigned int n = 0;
  if (evp().digest_final_ex(ctx_, md, &n) != 1 || n != sizeof md)
    throw Error(ErrorCode::Internal, "EVP_DigestFinal_ex of " + evp().library + " failed");
  static const char* const kHex = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

std::string sha256_unavailable_reason() noexcept {
  try {
    return evp().reason;
  } catch (...) {
    return "cannot load libcrypto";
  }
}

std::optional<std::string> parse_sha256_hex(const std::string& text) {
  if (text.size() != 64) return std::nullopt;
  std::string out = text;
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return out;
}

}  // namespace sage2::base
