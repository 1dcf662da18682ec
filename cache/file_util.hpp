// Small file-system and byte-order helpers shared by the disk cache, its entry format and the
// tuning database (one definition of each).
#pragma once

#include <cstdint>
#include <string>

namespace sage2::cache::fs {

std::string join(const std::string& dir, const std::string& name);
std::string parent_dir(const std::string& path);  // "." for a bare name, "/" for the root
int make_dirs(const std::string& dir);             // mkdir -p; 0 or an errno value

// Little-endian fixed-width fields of the on-disk formats.
void put_u32(char* p, std::uint32_t v);
void put_u64(char* p, std::uint64_t v);
std::uint32_t get_u32(const char* p);
std::uint64_t get_u64(const char* p);

}  // namespace sage2::cache::fs
