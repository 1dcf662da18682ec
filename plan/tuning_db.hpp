// The tuning database: which tile configuration was measured fastest for a problem signature
// (plan/tuning_key.hpp) on one device.
//
// Where: one JSON file per device beside the cubin cache,
//   <cache dir>/tuning-v1-<device slug>-<8 hex of the exact device name>-<arch>.json
// (db_file_name()); sage2-cache's entry files are "<16 hex>.s2c", so the two never mix.
//
// Schema, version 1 (kTuningSchemaVersion; unknown fields are ignored, missing or mistyped ones
// make the whole file invalid):
//   { "schema": "sage2-tuning", "schema_version": 1,
//     "device": {"name": str, "arch": "sm_89"|"sm_90a", "sm_count": int},
//     "driver_version": int, "nvrtc_version": "13.0", "library_version": "0.1.0",
//     "updated_unix": int,                     -- the last writer's versions and time
//     "entries": [ {
//        "family": "attn_mma", "head_dim": int, "causal": bool, "qk_bits": 4|8,
//        "smooth_q": bool, "smooth_k": bool, "smooth_v": bool, "dtype": "f16"|"bf16",
//        "q_bucket": int, "kv_bucket": int, "gqa_bucket": int,          -- the TuningKey
//        "tile": {"bq": int, "bk": int, "warps": int, "stages": int},   -- the chosen tile
//        "ms": num, "tops": num,                                        -- its median time
//        "heuristic": {"tile": {...}, "ms": num, "tops": num},          -- the default's (0: not timed)
//        "problem": {"batch", "q_heads", "kv_heads", "q_len", "kv_len"},  -- what was measured
//        "candidates": {"timed": int, "rejected": int},
//        "code_version": "0.1.0+<16 hex>", "driver_version": int, "nvrtc_version": "13.0",
//        "tuned_unix": int } ... ] }
// Keys are unique in a file (a duplicate makes it invalid); entries are sorted by key.
//
// Trust: a file that cannot be parsed, is truncated, has another schema or schema version, or
// names another device or arch is reported once per process (base::log::warn_once) and ignored — the
// heuristic defaults are used, and the next write replaces it. An entry is used only when it was
// measured on the kernels this process would run (CodeIdentity: its code_version is this
// build's jit::code_version — library version and a hash of the kernels the templates and the
// source generator produce — and its nvrtc_version the loaded NVRTC's; timings of other code are
// not evidence about this code). Entries of other code stay in the file, unused, with one log
// line per process (Planner), until a new measurement of the same key replaces them. The tile of
// a used entry must still pass the static checks on the device (the planner re-checks).
//
// Writes (merge_into_db): take an exclusive flock on "<file>.lock", re-read the file, overlay the
// new entries (same key: the new one wins), write a temporary file in the same directory, fsync,
// rename over the file, fsync the directory, release the lock. Readers take no lock: they see the
// old or the new file, never a partial one. Several processes may write at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/tuning_key.hpp"
#include "kernels/kernel_spec.hpp"

namespace sage2::plan {

inline constexpr int kTuningSchemaVersion = 1;
inline constexpr const char* kTuningSchemaName = "sage2-tuning";
inline constexpr std::uint64_t kMaxDbBytes = 64ull << 20;
// A lookup uses the nearest measured size buckets of the same specialisation when their distance
// (bucket_distance: powers of two summed over q, kv, gqa) is at most this.
inline constexpr int kMaxLookupDistance = 3;

struct TuningEntry {
  TuningKey key;
  kernels::TileConfig tile;
  double ms = 0, tops = 0;
  kernels::TileConfig heuristic_tile;
  double heuristic_ms = 0, heuristic_tops = 0;
  std::int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, kv_len = 1;
  int timed = 0, rejected = 0;
  std::string code_version;
  int driver_version = 0;
  std::string nvrtc_version;
  std::int64_t tuned_unix = 0;
};

// File-level facts: the device the file belongs to, and the last writer's versions.
struct DbInfo {
  std::string device_name;
  kernels::Arch arch = kernels::Arch::Sm90a;
  int sm_count = 0;
  int driver_version = 0;
  std::string nvrtc_version;
  std::string library_version;
  std::int64_t updated_unix = 0;
};

// jit::code_version(library_version()): "0.1.0+<16 hex>".
std::string current_code_version();
std::string library_version();
std::string db_file_name(const std::string& device_name, kernels::Arch arch);
std::string db_path(const std::string& cache_dir, const std::string& device_name, kernels::Arch arch);

enum class DbStatus { Ok, Missing, Unreadable, Corrupt, WrongSchema, Foreign };
const char* db_status_name(DbStatus s) noexcept;

struct DbReadResult {
  DbStatus status = DbStatus::Missing;
  std::string problem;  // why, when not Ok / Missing
  DbInfo info;          // valid when Ok
  std::vector<TuningEntry> entries;
};

// Parses a database text for the device (`device_name`, `arch`). Never throws.
DbReadResult parse_db(const std::string& text, const std::string& device_name, kernels::Arch arch);
// Reads and parses `path`. Never throws and never logs.
DbReadResult read_db(const std::string& path, const std::string& device_name, kernels::Arch arch);
// read_db(), then one warning per process and path when the file exists but is not usable.
DbReadResult load_db(const std::string& path, const std::string& device_name, kernels::Arch arch);
// The JSON text of a database (entries sorted by key).
std::string serialize_db(const DbInfo& info, std::vector<TuningEntry> entries);

// What tuning timings are evidence about: the kernels of one code version compiled by one NVRTC.
struct CodeIdentity {
  std::string code_version;   // current_code_version() of the process that measured
  std::string nvrtc_version;  // "13.0"; empty when this process has no NVRTC: its kernels then
                              // come from the disk cache, built by any NVRTC, so any is accepted
  // This process's (jit::Toolchain::current()).
  static CodeIdentity current();
  bool matches(const TuningEntry& e) const;
};

// In-memory view for lookups.
class TuningDb {
 public:
  TuningDb() = default;
  explicit TuningDb(std::vector<TuningEntry> entries) : entries_(std::move(entries)) {}
  // The entry of the same specialisation, measured on code `code` (CodeIdentity::matches), whose
  // size buckets are nearest to `key` (at most `max_distance`); ties prefer the larger q, then
  // kv, then gqa bucket. nullptr when there is none, and when `key` lies outside the range of the
  // buckets measured for the specialisation on any axis (no extrapolation beyond the measured sizes).
  const TuningEntry* find(const TuningKey& key, const CodeIdentity& code,
                          int max_distance = kMaxLookupDistance) const;
  const std::vector<TuningEntry>& entries() const { return entries_; }

 private:
  std::vector<TuningEntry> entries_;
};

struct DbWriteResult {
  bool ok = false;
  std::string problem;           // why not, when !ok
  std::size_t entries = 0;       // entries in the file after the write
  DbStatus previous = DbStatus::Missing;  // what was there before (a bad file is replaced)
  std::string previous_problem;
};

// Merges `updates` into the file at `path` (see the protocol above); `info` becomes the file's
// header (its device must be the one of the updates). Never throws; a bad existing file is
// reported once and replaced; an unwritable directory is an error in the result.
DbWriteResult merge_into_db(const std::string& path, const DbInfo& info, const std::vector<TuningEntry>& updates);

}  // namespace sage2::plan
