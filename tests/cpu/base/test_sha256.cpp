// Specification: base::Sha256 is the system libcrypto's SHA-256, loaded at run time (never
// linked): the FIPS 180-2 test vectors come out, hex digits are read in either case, and a missing
// libcrypto is a reason to show, not a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "base/sha256.hpp"
#include "sage2/sage2.hpp"

using namespace sage2;

namespace {

std::string sha256(const std::string& text, std::size_t chunk) {
  base::Sha256 h;
  for (std::size_t i = 0; i < text.size(); i += chunk) h.update(text.data() + i, std::min(chunk, text.size() - i));
  return h.hex_digest();
}

}  // namespace

TEST_CASE("sha256: the FIPS 180-2 vectors, fed whole or in pieces") {
  if (const std::string why = base::sha256_unavailable_reason(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  CHECK(sha256("", 1) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  for (std::size_t chunk : {std::size_t(1), std::size_t(7), std::size_t(64), two_blocks.size()})
    CHECK(sha256(two_blocks, chunk) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256(million, 4096) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  base::Sha256 done;
  (void)done.hex_digest();
  CHECK_THROWS_AS(done.update("x", 1), Error);  // a finished digest takes no more bytes
}

TEST_CASE("sha256: hex digests are read in either case; anything but 64 hex digits is refused") {
  const std::string lower = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  std::string upper = lower;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(base::parse_sha256_hex(lower) == lower);
  CHECK(base::parse_sha256_hex(upper) == lower);
  CHECK(base::parse_sha256_hex("BA7816bf" + lower.substr(8)) == lower);
  for (const std::string bad : {std::string(), lower.substr(1), lower + "0", "g" + lower.substr(1),
                                " " + lower.substr(1), lower.substr(0, 63) + "\n", std::string(64, 'x')}) {
    CAPTURE(bad);
    CHECK_FALSE(base::parse_sha256_hex(bad).has_value());
  }
}
