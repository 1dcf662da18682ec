// On-disk cubin cache.
//  Directory: base::config::cache_config().cache_dir ($SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2, else ~/.cache/sage2).
//  Entry file: header (magic, format version, full key, arch, NVRTC version, payload checksum)
//              + cubin + metadata JSON (ptxas facts, compile time, entry name, created time).
//  Key: jit::KernelBuild::key (jit/kernel_build.hpp) — the spec, a hash of the source, templates,
//  options and library version, and the NVRTC version — so an entry is found only by a process
//  that would compile exactly the same thing with the same NVRTC.
//  Writes are atomic (temp file in the same directory + fsync + rename). A load verifies magic,
//  version, key, arch and checksum; a bad entry gives one warning, is deleted, and load returns
//  nullopt (the caller recompiles and stores a fresh one) — never loaded, never a crash.
//  An unusable directory (read-only, missing and not creatable, full) degrades to "no disk
//  cache" with one warning; store() then returns false.
//
// Entry file format, version 1 (all integers little-endian, fixed 64-byte header):
//   off size field
//     0    8 magic "S2CUBIN\0"
//     8    4 format version (kEntryFormatVersion)
//    12    4 header size in bytes (64)
//    16    4 arch (kernels::Arch value; arch_name() must know it and agree with the key's sm_ field)
//    20    4 NVRTC major (int32)          24  4 NVRTC minor (int32)   (a key field "nvrtc:M.m"
//                                                                          must name the same)
//    28    4 key length K (1..kMaxKeyBytes)
//    32    4 metadata length M (0..kMaxMetaBytes)
//    36    4 reserved, 0
//    40    8 cubin length C (1..kMaxCubinBytes)
//    48    8 reserved, 0
//    56    8 checksum: FNV-1a 64 (base::fnv1a64) over header bytes [0,56), then key, cubin, metadata
//    64    K key bytes | C cubin bytes | M metadata bytes (UTF-8 JSON object)
//   The file size must equal 64 + K + C + M exactly.
//   Metadata: {"entry": str, "compile_seconds": num, "facts": {"registers": int, ...},
//              "log": str, "created_unix": int, "sage2_version": str}; unknown fields are ignored.
// File name: 16 lower-case hex digits of fnv1a64(key) + ".s2c". Temp files are
//   ".tmp-<pid>-<n>-<rand>.s2c-partial" in the same directory; stale ones (older than
//   kStaleTempSeconds) are swept by prune/clear/verify(remove_bad=true).
// Bundle format, version 1 (one file, many entries):
//     0 8 magic "S2BUNDLE" | 8 4 version | 12 4 reserved 0 | 16 8 entry count N
//    24 8 FNV-1a 64 of bytes [0,24)
//    32 N × { u64 length L, L bytes of one entry file }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/compiler.hpp"

namespace sage2::cache {

inline constexpr std::uint32_t kEntryFormatVersion = 1;
inline constexpr std::uint32_t kBundleFormatVersion = 1;
inline constexpr std::size_t kEntryHeaderBytes = 64;
inline constexpr std::size_t kBundleHeaderBytes = 32;
inline constexpr std::uint64_t kMaxKeyBytes = 64u << 10;     // 64 KiB
inline constexpr std::uint64_t kMaxMetaBytes = 16u << 20;    // 16 MiB
inline constexpr std::uint64_t kMaxCubinBytes = 1ull << 30;  // 1 GiB
inline constexpr std::uint64_t kMaxEntryBytes =
    kEntryHeaderBytes + kMaxKeyBytes + kMaxMetaBytes + kMaxCubinBytes;
inline constexpr double kStaleTempSeconds = 600;

struct EntryInfo {
  std::string file;        // path of the entry file
  std::string key;         // empty when the header could not be read
  std::string arch;        // "sm_89" / "sm_90a"
  std::uint64_t size_bytes = 0;
  double age_seconds = 0;  // since last write or successful load (load refreshes the mtime)
  bool valid = false;      // header + checksum verified, and the file name matches the key
  std::string problem;     // why invalid (empty when valid)
  bool removed = false;    // verify(remove_bad=true) deleted it
};

class DiskCache {
 public:
  // Uses `dir` as is (created on first store). disabled=true makes every call a no-op miss.
  explicit DiskCache(std::string dir, bool disabled = false);
  // What a Context with default options uses: SAGE2_CACHE_DIR / XDG / HOME, SAGE2_DISABLE_DISK_CACHE.
  static DiskCache from_env();

  const std::string& dir() const { return dir_; }
  bool disabled() const { return disabled_; }

  // Never throw. A missing entry is a silent miss; a bad one is warned about once, removed, and
  // reported as a miss. store() returns false (one warning per directory) when it cannot write.
  // A successful load refreshes the entry's mtime, so prune() evicts the least recently used.
  // *rejected, when given, receives why an entry that was there could not be used (unreadable,
  // bad: the warning's reason); left empty by a plain miss.
  std::optional<jit::CompiledKernel> load(const std::string& key, std::string* rejected = nullptr) const;
  // The entry of a build: load(b.key). When b's toolchain has no NVRTC (none could be loaded, so
  // nothing can be recompiled), the entry of the same code (b.stem) built by any NVRTC — the
  // newest when there are several. Never throws.
  std::optional<jit::CompiledKernel> load_build(const jit::KernelBuild& b, std::string* rejected = nullptr) const;
  bool store(const jit::CompiledKernel& k) const;
  std::string entry_path(const std::string& key) const;  // dir() + "/" + entry_file_name(key)

  // The maintenance calls below throw Error(CacheError) when the directory exists but cannot be
  // read; a missing directory is an empty cache.
  std::vector<EntryInfo> list() const;                // every entry file, verified, sorted by key
  // The invalid ones (removed if asked). *checked, when given, receives the number of entry files.
  std::vector<EntryInfo> verify(bool remove_bad, std::size_t* checked = nullptr) const;
  // Deletes least recently written/used entries until the total is <= max_bytes; returns bytes freed.
  std::uint64_t prune(std::uint64_t max_bytes) const;
  std::size_t clear() const;                          // entries removed
  std::uint64_t total_bytes() const;                  // sum of entry file sizes
  // A bundle is one file holding many entries (shipping a warmed cache to a fleet). Only valid
  // entries are exported; the bundle is written atomically. Throws Error(CacheError) on failure.
  std::size_t export_bundle(const std::string& path) const;  // entries written
  // Every entry in the bundle is verified before it is stored; bad ones are counted and skipped.
  // Damage to the framing (a length running past the end) rejects all entries declared after it.
  // Throws Error(CacheError) when the file cannot be read or its header is not a valid bundle.
  struct ImportResult {
    std::size_t imported = 0, rejected = 0;
    std::size_t failed = 0;  // valid entries that could not be written to the cache directory
  };
  ImportResult import_bundle(const std::string& path) const;

  // The file name an entry of `key` lives in (hash of the key; the key itself is in the header).
  static std::string entry_file_name(const std::string& key);
  // Serialisation used by entry files and bundles (exposed for tests and fuzzing).
  // serialize throws Error(CacheError) when `k` cannot be represented (empty key or cubin,
  // unknown arch, key naming another arch, sizes over the limits).
  static std::vector<char> serialize(const jit::CompiledKernel& k);
  // Throws Error(CacheError) with the reason when the bytes are not a valid entry.
  static jit::CompiledKernel deserialize(const std::vector<char>& bytes);
  static jit::CompiledKernel deserialize(const char* data, std::size_t size);
  // Same checks, never throws: nullopt with the reason in *problem (fuzzing entry point).
  static std::optional<jit::CompiledKernel> try_deserialize(const char* data, std::size_t size,
                                                            std::string* problem = nullptr) noexcept;

 private:
  std::string dir_;
  bool disabled_ = false;
};

}  // namespace sage2::cache
