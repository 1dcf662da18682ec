// On-disk cubin cache.
//  Directory: env::cache_dir() ($SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2, else ~/.cache/sage2).
//  Entry file: header (magic, format version, full key, arch, NVRTC version, payload checksum)
//              + cubin + metadata JSON (ptxas facts, compile time, entry name, created time).
//  Writes are atomic (temp file in the same directory + rename). A load verifies magic, version,
//  key, arch and checksum; a bad entry gives one warning, is deleted, and load returns nullopt
//  (the caller recompiles and stores a fresh one) — never loaded, never a crash.
//  An unusable directory (read-only, missing and not creatable, full) degrades to "no disk
//  cache" with one warning; store() then returns false.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/compiler.hpp"

namespace sage2::cache {

inline constexpr std::uint32_t kEntryFormatVersion = 1;

struct EntryInfo {
  std::string file;        // path of the entry file
  std::string key;
  std::string arch;        // "sm_89" / "sm_90a"
  std::uint64_t size_bytes = 0;
  double age_seconds = 0;  // since last write
  bool valid = false;      // header + checksum verified
  std::string problem;     // why invalid (empty when valid)
};

class DiskCache {
 public:
  // Uses `dir` as is (created on first store). disabled=true makes every call a no-op miss.
  explicit DiskCache(std::string dir, bool disabled = false);
  // From the environment: SAGE2_CACHE_DIR / XDG / HOME, SAGE2_DISABLE_DISK_CACHE.
  static DiskCache from_env();

  const std::string& dir() const { return dir_; }
  bool disabled() const { return disabled_; }

  std::optional<jit::CompiledKernel> load(const std::string& key) const;
  bool store(const jit::CompiledKernel& k) const;

  std::vector<EntryInfo> list() const;                // every entry file, verified
  std::vector<EntryInfo> verify(bool remove_bad) const;  // the invalid ones (removed if asked)
  // Deletes least recently written entries until the total is <= max_bytes; returns bytes freed.
  std::uint64_t prune(std::uint64_t max_bytes) const;
  std::size_t clear() const;                          // entries removed
  // A bundle is one file holding many entries (shipping a warmed cache to a fleet).
  std::size_t export_bundle(const std::string& path) const;  // entries written
  // Every entry in the bundle is verified before it is stored; bad ones are counted and skipped.
  struct ImportResult { std::size_t imported = 0, rejected = 0; };
  ImportResult import_bundle(const std::string& path) const;

  // The file name an entry of `key` lives in (hash of the key; the key itself is in the header).
  static std::string entry_file_name(const std::string& key);
  // Serialisation used by entry files and bundles (exposed for tests and fuzzing).
  static std::vector<char> serialize(const jit::CompiledKernel& k);
  // Throws Error(CacheError) with the reason when the bytes are not a valid entry.
  static jit::CompiledKernel deserialize(const std::vector<char>& bytes);

 private:
  std::string dir_;
  bool disabled_ = false;
};

}  // namespace sage2::cache
