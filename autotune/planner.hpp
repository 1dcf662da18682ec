// Tile choice of one Context: tuning database hit, else the heuristic default — at once, never
// blocking on tuning (tuning happens only in sage2-autotune or when a caller runs the tuner).
//
// Per-call cost: the database file is read once, at the first lookup of the Context (one file of
// a few KB); each problem signature (TuningKey: head dim, causal, bits, smoothing, dtype, size
// buckets) is resolved once and memoised, so a call costs a shared lock and one hash lookup.
// A Context does not see database updates written after its first lookup (make a new Context).
#pragma once

#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "autotune/tuning_db.hpp"
#include "autotune/tuning_key.hpp"
#include "runtime/attention_validate.hpp"

namespace sage2::autotune {

struct TileChoice {
  jit::TileConfig tile;
  bool tuned = false;          // from the database (else the heuristic default)
  TuningKey measured_key;      // the database entry's key when tuned (may be a neighbouring bucket)
};

class Planner {
 public:
  // `db_path` empty: no database (heuristic only). `device_name`/`arch` identify the device the
  // file must belong to; `max_smem_optin` is its opt-in shared memory per block.
  Planner(std::string db_path, std::string device_name, jit::Arch arch, int max_smem_optin);
  // For tests: a planner over given entries (no file).
  Planner(TuningDb db, jit::Arch arch, int max_smem_optin);

  // The tile for `attention_spec` (every field but the tile set, as plan_attention builds it)
  // solving `p`. Throws Unsupported when not even the heuristic has a tile that fits.
  TileChoice choose(const jit::KernelSpec& attention_spec, const runtime::AttentionProblem& p) const;

  const std::string& db_path() const { return db_path_; }
  std::size_t memoised() const;
  std::size_t db_entries() const;  // loads the database if not done yet

 private:
  const TuningDb& db() const;

  std::string db_path_, device_name_;
  jit::Arch arch_;
  int max_smem_;
  std::string code_version_;
  mutable std::once_flag loaded_;
  mutable TuningDb db_;
  mutable std::shared_mutex mu_;
  mutable std::unordered_map<TuningKey, TileChoice, TuningKeyHash> memo_;
};

}  // namespace sage2::autotune
