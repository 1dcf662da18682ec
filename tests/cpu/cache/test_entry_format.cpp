// Specification: a cache entry is a self-describing, checksummed byte string. serialize and
// deserialize round-trip every field; deserialize accepts nothing else and never crashes, for
// any byte string (it returns an Error(CacheError) naming the reason).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/hash.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

jit::CompiledKernel fmt_kernel(kernels::Arch arch = kernels::Arch::Sm90a, int head_dim = 128, std::size_t cubin_bytes = 3000) {
  kernels::KernelSpec spec;
  spec.family = kernels::KernelFamily::AttentionMma;
  spec.arch = arch;
  spec.head_dim = head_dim;
  jit::CompiledKernel k;
  k.key = spec.key();
  k.arch = arch;
  k.entry = spec.entry_name();
  k.cubin.resize(cubin_bytes);
  std::mt19937 rng(static_cast<unsigned>(head_dim * 7 + static_cast<int>(arch)));
  for (auto& c : k.cubin) c = static_cast<char>(rng());
  std::memcpy(k.cubin.data(), "\x7f" "ELF", 4);
  k.facts.registers = 168;
  k.facts.spill_store_bytes = 4;
  k.facts.spill_load_bytes = 8;
  k.facts.stack_frame_bytes = 16;
  k.facts.static_shared_bytes = 32768;
  k.facts.constant_bytes = 412;
  k.compile_seconds = 0.3125;
  k.nvrtc_major = 13;
  k.nvrtc_minor = 0;
  k.log = "ptxas info    : Used 168 registers";
  return k;
}

void check_same(const jit::CompiledKernel& a, const jit::CompiledKernel& b) {
  CHECK(a.key == b.key);
  CHECK(a.arch == b.arch);
  CHECK(a.entry == b.entry);
  CHECK(a.cubin == b.cubin);
  CHECK(a.facts.registers == b.facts.registers);
  CHECK(a.facts.spill_store_bytes == b.facts.spill_store_bytes);
  CHECK(a.facts.spill_load_bytes == b.facts.spill_load_bytes);
  CHECK(a.facts.stack_frame_bytes == b.facts.stack_frame_bytes);
  CHECK(a.facts.static_shared_bytes == b.facts.static_shared_bytes);
  CHECK(a.facts.constant_bytes == b.facts.constant_bytes);
  CHECK(a.compile_seconds == b.compile_seconds);
  CHECK(a.nvrtc_major == b.nvrtc_major);
  CHECK(a.nvrtc_minor == b.nvrtc_minor);
  CHECK(a.log == b.log);
}

std::uint32_t rd32(const std::vector<char>& b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}
std::uint64_t rd64(const std::vector<char>& b, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}
// .at(): bounds-checked, and GCC 12 then sees the size it otherwise misjudged (-Wstringop-overflow).
void wr32(std::vector<char>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(at + i) = static_cast<char>(v >> (8 * i));
}
void wr64(std::vector<char>& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.at(at + i) = static_cast<char>(v >> (8 * i));
}

// Recomputes the checksum as documented: FNV-1a 64 over header [0,56) then everything after 64.
void fix_checksum(std::vector<char>& b) {
  if (b.size() < 64) return;
  std::uint64_t h = base::fnv1a64(b.data(), 56);
  h = base::fnv1a64(b.data() + 64, b.size() - 64, h);
  wr64(b, 56, h);
}

// An entry built by hand from the documented layout, with arbitrary metadata text.
std::vector<char> craft(const std::string& key, const std::string& cubin, const std::string& meta,
                        std::uint32_t arch = 1) {
  std::vector<char> b(64, 0);
  std::memcpy(b.data(), "S2CUBIN\0", 8);
  wr32(b, 8, 1);
  wr32(b, 12, 64);
  wr32(b, 16, arch);
  wr32(b, 20, 13);
  wr32(b, 24, 0);
  wr32(b, 28, static_cast<std::uint32_t>(key.size()));
  wr32(b, 32, static_cast<std::uint32_t>(meta.size()));
  wr64(b, 40, cubin.size());
  // Appended by size + memcpy: GCC 12's -Wstringop-overread misreads vector::insert of a string range here.
  auto append = [&b](const std::string& s) {
    const std::size_t at = b.size();
    b.resize(at + s.size());
    if (!s.empty()) std::memcpy(b.data() + at, s.data(), s.size());
  };
  append(key);
  append(cubin);
  append(meta);
  fix_checksum(b);
  return b;
}

const char* kGoodMeta =
    R"({"entry":"e","compile_seconds":1.5,"facts":{"registers":1,"spill_store_bytes":0,)"
    R"("spill_load_bytes":0,"stack_frame_bytes":0,"static_shared_bytes":0,"constant_bytes":0}})";

std::string reason_of(const std::vector<char>& b) {
  std::string why;
  auto k = DiskCache::try_deserialize(b.data(), b.size(), &why);
  return k ? std::string() : why;
}

}  // namespace

TEST_CASE("cache format: serialize/deserialize round-trips every field") {
  for (auto arch : {kernels::Arch::Sm89, kernels::Arch::Sm90a}) {
    const auto k = fmt_kernel(arch, 96);
    const auto bytes = DiskCache::serialize(k);
    check_same(DiskCache::deserialize(bytes), k);
  }
  // Odd values survive too: no log, negative register count, a 1-byte cubin, non-ASCII log.
  auto k = fmt_kernel();
  k.log.clear();
  k.facts.registers = -1;
  k.cubin = {'x'};
  k.nvrtc_major = 12;
  k.nvrtc_minor = 8;
  check_same(DiskCache::deserialize(DiskCache::serialize(k)), k);
  k.log = "caf\xc3\xa9 \xe2\x9c\x93";
  check_same(DiskCache::deserialize(DiskCache::serialize(k)), k);
}

TEST_CASE("cache format: the header layout is the documented little-endian one") {
  const auto k = fmt_kernel(kernels::Arch::Sm89);
  const auto b = DiskCache::serialize(k);
  REQUIRE(b.size() > 64);
  CHECK(std::memcmp(b.data(), "S2CUBIN\0", 8) == 0);
  CHECK(rd32(b, 8) == cache::kEntryFormatVersion);
  CHECK(rd32(b, 12) == 64);
  CHECK(rd32(b, 16) == static_cast<std::uint32_t>(kernels::Arch::Sm89));
  CHECK(rd32(b, 20) == 13);
  CHECK(rd32(b, 28) == k.key.size());
  CHECK(rd64(b, 40) == k.cubin.size());
  CHECK(std::string(b.data() + 64, k.key.size()) == k.key);
  CHECK(std::memcmp(b.data() + 64 + k.key.size(), k.cubin.data(), k.cubin.size()) == 0);
  CHECK(b.size() == 64 + k.key.size() + k.cubin.size() + rd32(b, 32));
  auto copy = b;
  fix_checksum(copy);
  CHECK(copy == b);  // the checksum is exactly what the header comment documents
  // A hand-built entry following the documentation is accepted.
  CHECK(reason_of(craft("hand|sm_90a|x", "CUBIN", kGoodMeta)) == "");
}

TEST_CASE("cache format: entry file names are 16 hex digits of the key hash") {
  const std::string name = DiskCache::entry_file_name("some key");
  CHECK(name.size() == 20);
  CHECK(name.substr(16) == ".s2c");
  CHECK(name.find_first_not_of("0123456789abcdef") == 16);
  CHECK(DiskCache::entry_file_name("some key") == name);
  CHECK(DiskCache::entry_file_name("some kez") != name);
}

TEST_CASE("cache format: serialize refuses kernels it could not read back") {
  auto k = fmt_kernel();
  auto bad_key = k; bad_key.key.clear();
  auto bad_cubin = k; bad_cubin.cubin.clear();
  auto bad_arch = k; bad_arch.arch = static_cast<kernels::Arch>(7);
  auto wrong_arch = k; wrong_arch.arch = kernels::Arch::Sm89;  // key says sm_90a
  for (const auto* x : {&bad_key, &bad_cubin, &bad_arch, &wrong_arch}) {
    try {
      (void)DiskCache::serialize(*x);
      FAIL("serialize accepted an invalid kernel");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::CacheError);
    }
  }
}

TEST_CASE("cache format: the header arch must agree with the key (sm_89 cubin never passes as sm_90a)") {
  const auto k89 = fmt_kernel(kernels::Arch::Sm89);
  auto b = DiskCache::serialize(k89);
  wr32(b, 16, static_cast<std::uint32_t>(kernels::Arch::Sm90a));
  CHECK(reason_of(b).find("checksum") != std::string::npos);
  fix_checksum(b);  // even a consistent checksum does not make the lie acceptable
  CHECK(reason_of(b).find("arch") != std::string::npos);
  wr32(b, 16, 99);
  fix_checksum(b);
  CHECK(reason_of(b).find("arch") != std::string::npos);
}

TEST_CASE("cache format: metadata is validated field by field") {
  const std::string key = "k|sm_90a|x";
  CHECK(reason_of(craft(key, "C", kGoodMeta)) == "");
  CHECK(reason_of(craft(key, "C", "")).find("JSON") != std::string::npos);
  CHECK(reason_of(craft(key, "C", "{\"entry\":")).find("JSON") != std::string::npos);
  CHECK(reason_of(craft(key, "C", "[1,2]")).find("object") != std::string::npos);
  CHECK(!reason_of(craft(key, "C", "{}")).empty());
  CHECK(!reason_of(craft(key, "C", R"({"entry":"e","compile_seconds":1,"facts":{"registers":"many"}})")).empty());
  CHECK(!reason_of(craft(key, "C", R"({"entry":"e","compile_seconds":1,"facts":{"registers":1e30}})")).empty());
  std::string big = kGoodMeta;
  big.replace(big.find("\"registers\":1"), 13, "\"registers\":18446744073709551615");
  CHECK(reason_of(craft(key, "C", big)).find("range") != std::string::npos);
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  CHECK(reason_of(craft(key, "C", deep)).find("deep") != std::string::npos);
  CHECK(!reason_of(craft(key, "C", std::string("{\"entry\":\"\xff\xfe\"}"))).empty());
  CHECK(!reason_of(craft(key, "", kGoodMeta)).empty());   // empty cubin
  CHECK(!reason_of(craft("", "C", kGoodMeta)).empty());   // empty key
  std::string extra = kGoodMeta;
  extra.insert(1, "\"future_field\":{\"a\":[1,2,3]},");
  CHECK(reason_of(craft(key, "C", extra)) == "");          // unknown fields are ignored
}

TEST_CASE("cache format: declared lengths are checked against the bytes present") {
  const auto good = DiskCache::serialize(fmt_kernel());
  auto b = good;
  wr32(b, 28, 0xffffffffu);  // key length beyond the limit
  fix_checksum(b);
  CHECK(reason_of(b).find("key length") != std::string::npos);
  b = good;
  wr64(b, 40, ~0ull);  // cubin length that would overflow a naive sum
  fix_checksum(b);
  CHECK(reason_of(b).find("cubin length") != std::string::npos);
  b = good;
  wr64(b, 40, rd64(good, 40) + 1);
  fix_checksum(b);
  CHECK(reason_of(b).find("truncated") != std::string::npos);
  b = good;
  b.push_back('!');
  CHECK(reason_of(b).find("unexpected bytes") != std::string::npos);
  b = good;
  wr32(b, 8, 2);
  CHECK(reason_of(b).find("version") != std::string::npos);
  CHECK(reason_of({}).find("truncated") != std::string::npos);
  CHECK(!DiskCache::try_deserialize(nullptr, 0).has_value());
}

TEST_CASE("cache format: deserialize survives random and mutated byte strings (mini fuzz)") {
  std::mt19937_64 rng(12345);
  const auto good = DiskCache::serialize(fmt_kernel(kernels::Arch::Sm90a, 64, 200));
  int accepted = 0;
  auto attempt = [&](const std::vector<char>& b) {
    std::string why;
    auto k = DiskCache::try_deserialize(b.data(), b.size(), &why);
    if (k) {
      ++accepted;
    } else {
      CHECK_FALSE(why.empty());
      try {
        (void)DiskCache::deserialize(b);
        FAIL("deserialize accepted what try_deserialize rejected");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::CacheError);
      }
    }
  };
  for (int i = 0; i < 1500; ++i) {  // pure garbage, sometimes with a valid magic and version
    std::vector<char> b(rng() % 400);
    for (auto& c : b) c = static_cast<char>(rng());
    if (b.size() >= 64 && (i & 1)) {
      std::memcpy(b.data(), "S2CUBIN\0", 8);
      wr32(b, 8, 1);
      wr32(b, 12, 64);
      if (i & 2) fix_checksum(b);
    }
    attempt(b);
  }
  for (int i = 0; i < 3000; ++i) {  // mutations of a valid entry, half with the checksum repaired
    auto b = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0: b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255); break;
        case 1: b.resize(rng() % b.size()); break;
        case 2: b.insert(b.begin() + static_cast<long>(rng() % b.size()), static_cast<char>(rng())); break;
        case 3:  // structural JSON characters in the metadata region
          if (b.size() > 64) b[64 + rng() % (b.size() - 64)] = "{}[]\",:"[rng() % 7];
          break;
      }
      if (b.empty()) break;
    }
    if (i & 1) fix_checksum(b);
    attempt(b);
  }
  MESSAGE("mini fuzz: " << accepted << " of 4500 mutated/garbage inputs happened to be valid entries");
}
