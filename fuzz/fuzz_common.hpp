// Shared by the fuzz targets: a check that aborts (so libFuzzer records the input), quiet
// logging, and "repairs" the custom mutators apply to a mutated input so that it gets past the
// checksums and length fields (otherwise almost every mutation stops at the first checksum and
// the metadata / key / arch checks behind it are never reached).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/log.hpp"
#include "base/hash.hpp"

#define SAGE2_FUZZ_CHECK(cond, what)                                                          \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "sage2 fuzz invariant failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, \
                   what, #cond);                                                              \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace sage2::fuzz {

inline void quiet_log() {
  base::log::set_sink([](base::log::Level, const std::string&) {});
}

inline std::uint32_t rd32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(p[i]) << (8 * i);
  return v;
}
inline std::uint64_t rd64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(p[i]) << (8 * i);
  return v;
}
inline void wr32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void wr64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

constexpr std::size_t kEntryHeader = cache::kEntryHeaderBytes;
constexpr std::size_t kBundleHeader = cache::kBundleHeaderBytes;

// Restores the fixed header fields (magic, version, header size, reserved words).
inline void fix_entry_fixed_fields(std::uint8_t* d, std::size_t n) {
  if (n < kEntryHeader) return;
  std::memcpy(d, "S2CUBIN\0", 8);
  wr32(d + 8, cache::kEntryFormatVersion);
  wr32(d + 12, static_cast<std::uint32_t>(kEntryHeader));
  wr32(d + 36, 0);
  wr64(d + 48, 0);
}

// Makes the declared lengths add up to n (metadata takes what key and cubin leave), when the
// declared key and cubin lengths fit at all.
inline void fix_entry_lengths(std::uint8_t* d, std::size_t n) {
  if (n < kEntryHeader) return;
  const std::uint64_t key = rd32(d + 28), cubin = rd64(d + 40), body = n - kEntryHeader;
  if (key > body || cubin > body - key) {
    // Split what is there: a third of the body for the key, the rest for the cubin.
    const std::uint64_t k = body / 3 ? body / 3 : (body ? 1 : 0);
    wr32(d + 28, static_cast<std::uint32_t>(k));
    wr64(d + 40, body - k);
    wr32(d + 32, 0);
    return;
  }
  wr32(d + 32, static_cast<std::uint32_t>(std::min<std::uint64_t>(body - key - cubin, 0xffffffffu)));
}

inline void fix_entry_checksum(std::uint8_t* d, std::size_t n) {
  if (n < kEntryHeader) return;
  std::uint64_t h = base::fnv1a64(d, 56);
  h = base::fnv1a64(d + kEntryHeader, n - kEntryHeader, h);
  wr64(d + 56, h);
}

// mode 0: leave the mutation as it is; 1: checksum; 2: lengths + checksum;
// 3: fixed fields + lengths + checksum.
inline void repair_entry(std::uint8_t* d, std::size_t n, unsigned mode) {
  if (mode >= 3) fix_entry_fixed_fields(d, n);
  if (mode >= 2) fix_entry_lengths(d, n);
  if (mode >= 1) fix_entry_checksum(d, n);
}

// Bundle: the header checksum, and (mode >= 2) the entry count and every framed entry's checksum
// (mode 3: also its fixed fields and lengths).
inline void repair_bundle(std::uint8_t* d, std::size_t n, unsigned mode) {
  if (n < kBundleHeader || mode == 0) return;
  if (mode >= 2) {
    std::memcpy(d, "S2BUNDLE", 8);
    wr32(d + 8, cache::kBundleFormatVersion);
    std::uint64_t count = 0, off = kBundleHeader;
    while (off + 8 <= n) {
      const std::uint64_t len = rd64(d + off);
      if (len > n - off - 8) break;
      repair_entry(d + off + 8, static_cast<std::size_t>(len), mode);
      off += 8 + len;
      ++count;
    }
    wr64(d + 16, count);
  }
  wr64(d + 24, base::fnv1a64(d, 24));
}

}  // namespace sage2::fuzz
