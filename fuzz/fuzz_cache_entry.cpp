// Fuzz target: the cache entry parser (cache::DiskCache::try_deserialize / deserialize).
// Properties checked for every input:
//  - never a crash, a sanitizer report, an uncaught exception or a leak;
//  - try_deserialize and deserialize agree: nullopt with a non-empty reason <=> Error(CacheError);
//  - an accepted entry is one serialize() could have written: non-empty key and cubin, a known
//    arch that agrees with every sm_ field of the key, and serialize → deserialize gives back
//    every field (so what is loaded is exactly what the bytes say, nothing else).
#include <string>

#include "fuzz/fuzz_common.hpp"

using sage2::cache::DiskCache;
namespace fz = sage2::fuzz;

namespace {

void check_same(const sage2::jit::CompiledKernel& a, const sage2::jit::CompiledKernel& b, bool exact_seconds) {
  SAGE2_FUZZ_CHECK(a.key == b.key, "key");
  SAGE2_FUZZ_CHECK(a.arch == b.arch, "arch");
  SAGE2_FUZZ_CHECK(a.entry == b.entry, "entry name");
  SAGE2_FUZZ_CHECK(a.cubin == b.cubin, "cubin");
  SAGE2_FUZZ_CHECK(a.facts.registers == b.facts.registers, "registers");
  SAGE2_FUZZ_CHECK(a.facts.spill_store_bytes == b.facts.spill_store_bytes, "spill_store_bytes");
  SAGE2_FUZZ_CHECK(a.facts.spill_load_bytes == b.facts.spill_load_bytes, "spill_load_bytes");
  SAGE2_FUZZ_CHECK(a.facts.stack_frame_bytes == b.facts.stack_frame_bytes, "stack_frame_bytes");
  SAGE2_FUZZ_CHECK(a.facts.static_shared_bytes == b.facts.static_shared_bytes, "static_shared_bytes");
  SAGE2_FUZZ_CHECK(a.facts.constant_bytes == b.facts.constant_bytes, "constant_bytes");
  SAGE2_FUZZ_CHECK(a.nvrtc_major == b.nvrtc_major && a.nvrtc_minor == b.nvrtc_minor, "nvrtc version");
  SAGE2_FUZZ_CHECK(a.log == b.log, "log");
  if (exact_seconds) SAGE2_FUZZ_CHECK(a.compile_seconds == b.compile_seconds, "compile_seconds");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::quiet_log();
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  fz::repair_entry(data, size, seed % 4);
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  std::string why;
  const auto k = DiskCache::try_deserialize(p, size, &why);

  bool threw = false;
  try {
    const auto k2 = DiskCache::deserialize(p, size);
    SAGE2_FUZZ_CHECK(k.has_value(), "deserialize accepted what try_deserialize refused");
    check_same(*k, k2, true);
  } catch (const sage2::Error& e) {
    threw = true;
    SAGE2_FUZZ_CHECK(e.code() == sage2::ErrorCode::CacheError, "deserialize threw another error code");
  }
  if (!k) {
    SAGE2_FUZZ_CHECK(threw, "deserialize did not throw for a refused entry");
    SAGE2_FUZZ_CHECK(!why.empty(), "a refused entry without a reason");
    return 0;
  }

  SAGE2_FUZZ_CHECK(!k->key.empty() && k->key.size() <= sage2::cache::kMaxKeyBytes, "key length");
  SAGE2_FUZZ_CHECK(!k->cubin.empty(), "empty cubin accepted");
  const std::string arch = sage2::kernels::arch_name(k->arch);
  SAGE2_FUZZ_CHECK(arch != "?", "unknown arch accepted");
  // Every '|'-separated sm_ field of the key names the header's arch.
  for (std::size_t start = 0; start <= k->key.size();) {
    std::size_t end = k->key.find('|', start);
    if (end == std::string::npos) end = k->key.size();
    const std::string field = k->key.substr(start, end - start);
    SAGE2_FUZZ_CHECK(field.rfind("sm_", 0) != 0 || field == arch, "key names another arch than the header");
    start = end + 1;
  }

  // Round trip: serialize must take the kernel back (never throw) and give the same fields.
  std::vector<char> bytes;
  try {
    bytes = DiskCache::serialize(*k);
  } catch (const sage2::Error& e) {
    SAGE2_FUZZ_CHECK(false, "serialize refused an accepted entry");
  }
  const auto back = DiskCache::try_deserialize(bytes.data(), bytes.size(), &why);
  SAGE2_FUZZ_CHECK(back.has_value(), "a re-serialized entry does not load");
  check_same(*k, *back, true);
  return 0;
}
