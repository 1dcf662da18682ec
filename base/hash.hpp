// Small hashing helpers shared by every layer (cache keys, entry checksums, temp-file names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sage2::base {

// FNV-1a 64 over n bytes, continuing from `seed` (the FNV offset basis by default).
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t seed = 1469598103934665603ull);
std::string hex16(std::uint64_t v);  // 16 lowercase hex digits

}  // namespace sage2::base
