// Tile choice of one Context: tuning database hit, else the heuristic default — at once, never
// blocking on tuning (tuning happens only in sage2-autotune or when a caller runs the tuner).
//
// Per-call cost: the database file is read once, at the first lookup (one file of a few KB); each
// problem signature (TuningKey: head dim, causal, bits, smoothing, dtype, size buckets) is
// resolved once and memoised, so a call costs a shared lock and one hash lookup (~40 ns).
// Contexts share one Planner per (database file, device, shared memory) through
// shared_planner(): every Context of a process on the same device and cache directory — and
// runtime::plan_attention(p, arch, facts) for the default cache directory — makes the same
// choice. Database updates written after the first lookup are seen by the next process.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "plan/tuning_db.hpp"
#include "plan/tuning_key.hpp"
#include "plan/attention_validate.hpp"
#include "base/config.hpp"

namespace sage2::plan {

struct TileChoice {
  kernels::TileConfig tile;
  bool tuned = false;          // from the database (else the heuristic default)
  TuningKey measured_key;      // the database entry's key when tuned (may be a neighbouring bucket)
};

class Planner {
 public:
  // `db_path` empty: no database (heuristic only). `device_name`/`arch` identify the device the
  // file must belong to; `max_smem_optin` is its opt-in shared memory per block.
  Planner(std::string db_path, std::string device_name, kernels::Arch arch, int max_smem_optin);
  // For tests: a planner over given entries (no file).
  Planner(TuningDb db, kernels::Arch arch, int max_smem_optin);

  // The tile for `attention_spec` (every field but the tile set, as plan_attention builds it)
  // solving `p`. Throws Unsupported when not even the heuristic has a tile that fits.
  TileChoice choose(const kernels::KernelSpec& attention_spec, const plan::AttentionProblem& p) const;

  // Every tile choose() can give `attention_spec`'s specialisation at some size from the database
  // (entries of the same specialisation, measured on this code, that fit the device); the
  // heuristic default not included. What a warm-up compiles besides it (plan/warmup.hpp).
  std::vector<kernels::TileConfig> tuned_tiles(const kernels::KernelSpec& attention_spec,
                                               const plan::AttentionProblem& p) const;

  const std::string& db_path() const { return db_path_; }
  std::size_t memoised() const;
  std::size_t db_entries() const;  // loads the database if not done yet

 private:
  const TuningDb& db() const;

  std::string db_path_, device_name_;
  kernels::Arch arch_;
  int max_smem_;
  mutable std::once_flag loaded_;
  mutable CodeIdentity code_;  // set with db_
  mutable TuningDb db_;
  mutable std::shared_mutex mu_;
  mutable std::unordered_map<TuningKey, TileChoice, TuningKeyHash> memo_;
};

// The process-wide Planner for these arguments (created on first use, kept for the process).
// Thread-safe.
std::shared_ptr<Planner> shared_planner(const std::string& db_path, const std::string& device_name, kernels::Arch arch,
                                        int max_smem_optin);

// The database path a Context with settings `c` uses on a device: beside its kernel cache; empty
// — no database — when its disk cache or its tuning is off.
std::string context_db_path(const base::config::ContextConfig& c, const std::string& device_name, kernels::Arch arch);

}  // namespace sage2::plan
