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
//  Trust: a cubin from the cache runs inside the process, and the checksum only detects accidents.
//  So the folder is created 0700, and nothing is loaded from, nor stored into, a folder that
//  another user owns or that its group or others can write (one stat per DiskCache), and no entry
//  is loaded whose file (fstat of the opened descriptor, opened without following a symlink) is
//  another user's or writable by group or others. Root-owned ones pass only with Trust::root
//  (a read-only fleet cache; ContextOptions::cache_trust_root, SAGE2_CACHE_TRUST_ROOT). A refusal
//  is a miss with one warning per folder or entry naming the path, the owner's uid and the mode.
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
//   The bundle's SHA-256 (bundle_sha256, printed by `sage2-cache export`) lets a fleet check that it
//   imports what was exported (import_bundle's expected_sha256).
#pragma once

#include <cstdint>
#include <memory>
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

// Whose cache folder and entries are used: those owned by `user` (or, with `root`, by root) that
// neither their group nor others can write.
struct Trust {
  bool root = false;                 // also root's: a read-only cache installed for a fleet
  std::optional<std::uint32_t> user;  // nullopt: this process's effective uid (tests name another)
};

class DiskCache {
 public:
  // Uses `dir` as is (created 0700 on first store). disabled=true makes every call a no-op miss.
  explicit DiskCache(std::string dir, bool disabled = false, Trust trust = {});
  // What a Context with default options uses: SAGE2_CACHE_DIR / XDG / HOME, SAGE2_DISABLE_DISK_CACHE,
  // SAGE2_CACHE_TRUST_ROOT.
  static DiskCache from_env();

  const std::string& dir() const { return dir_; }
  bool disabled() const { return disabled_; }
  const Trust& trust() const { return trust_; }
  // Why the folder is not used (owner, mode); empty when it is trusted or does not exist. The
  // folder is examined once per DiskCache (and its copies) and the answer kept.
  std::string folder_problem() const;

  // Never throw. A missing entry is a silent miss; a bad one is warned about once, removed, and
  // reported as a miss; an untrusted one (see Trust) is warned about once and left in place.
  // store() returns false (one warning per directory) when it cannot or may not write.
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
  // read; a missing directory is an empty cache. An entry load() would refuse as untrusted is
  // listed as invalid, its problem naming the owner and mode (verify's remove_bad deletes it).
  std::vector<EntryInfo> list() const;                // every entry file, verified, sorted by key
  // The invalid ones (removed if asked). *checked, when given, receives the number of entry files.
  std::vector<EntryInfo> verify(bool remove_bad, std::size_t* checked = nullptr) const;
  // Deletes least recently written/used entries until the total is <= max_bytes; returns bytes freed.
  std::uint64_t prune(std::uint64_t max_bytes) const;
  std::size_t clear() const;                          // entries removed
  std::uint64_t total_bytes() const;                  // sum of entry file sizes
  // A bundle is one file holding many entries (shipping a warmed cache to a fleet). Only valid
  // (and trusted) entries are exported; the bundle is written atomically. Throws Error(CacheError)
  // on failure, and when the folder is not trusted (a planted entry must not reach a fleet).
  std::size_t export_bundle(const std::string& path) const;  // entries written
  // Every entry in the bundle is verified before it is stored; bad ones are counted and skipped.
  // Damage to the framing (a length running past the end) rejects all entries declared after it.
  // Entries are staged as temporary files and published together at the end. Throws
  // Error(CacheError) when the file cannot be read, its header is not a valid bundle, or the
  // folder is not trusted. With expected_sha256 (64 lower-case hex digits) nothing is imported —
  // Error(CacheError) — unless the bundle's SHA-256 is that, both before its entries are read and
  // over the bytes they were read from; Error(Unsupported) when SHA-256 is unavailable (no libcrypto).
  struct ImportResult {
    std::size_t imported = 0, rejected = 0;
    std::size_t failed = 0;  // valid entries that could not be written to the cache directory
  };
  ImportResult import_bundle(const std::string& path, const std::string& expected_sha256 = "") const;
  // SHA-256 of a file (a bundle) as 64 lower-case hex digits. Throws Error(CacheError) when it
  // cannot be read, Error(Unsupported) when SHA-256 is unavailable (base/sha256.hpp).
  static std::string bundle_sha256(const std::string& path);

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
  struct FolderState;
  // folder_problem(), and whether the folder exists (false also when the path is not a folder).
  std::string folder_check(bool& exists) const;
  // True when the folder exists and is trusted; otherwise false, with one warning per process
  // when it exists and is not.
  bool folder_trusted() const;

  std::string dir_;
  bool disabled_ = false;
  Trust trust_;
  std::shared_ptr<FolderState> folder_;  // the folder's owner and mode, once known
};

}  // namespace sage2::cache
