// Tuning as a library call: for a Context's device, prepare the candidates of each
// specialisation (autotune/prepare.hpp), time them at each problem size (autotune/timing.hpp),
// choose the tile (the heuristic default unless a candidate is clearly faster) and merge the
// choices into the tuning database beside the kernel cache (plan/tuning_db.hpp). sage2-autotune,
// sage2::tune() and sage2_tune() (include/sage2/sage2.hpp, sage2.h) all run this.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autotune/prepare.hpp"
#include "autotune/timing.hpp"
#include "plan/candidates.hpp"
#include "plan/tuning_db.hpp"
#include "plan/tuning_key.hpp"
#include "plan/warmup.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::autotune {

// The specialisations to tune: every combination of the lists, each with the defaults of
// plan::Specialisation::defaults for the rest. Combinations no family runs (a forced family
// without the kernel, INT4 on Blackwell, FP8 P̃V on Ampere) are left out, duplicates too.
struct SpecialisationGrid : plan::ShapeSelection {
  std::vector<int> bits = {0};                                   // 0: the arch's default
  std::vector<PvPrecision> pv = {PvPrecision::Auto};
  std::vector<std::optional<kernels::KernelFamily>> families = {std::nullopt};  // nullopt: the default
  std::optional<bool> smooth_q;                                  // nullopt: on with 4-bit
  bool smooth_v = false;
  bool with_lse = false;                                         // each also with LSE (compiled, not timed)
};
// `left_out`, when given, receives why each combination left out was (kernels::family_runs_why_not),
// each reason once: what to tell a user whose selection gives nothing on `arch`.
std::vector<plan::Specialisation> specialisations(const SpecialisationGrid& grid, kernels::Arch arch,
                                                  std::vector<std::string>* left_out = nullptr);

// The batch a sequence length is timed with unless one is given: 16K tokens, 1 to 4 sequences.
std::int64_t default_batch(std::int64_t seq_len);

struct TuneProgress {
  std::size_t done = 0, total = 0;  // timed candidates
  double done_ops = 0, total_ops = 0;  // the same weighed by their operations (for an ETA)
  std::string label;                // "<specialisation> N=<len> <tile>" of the candidate just started
};

struct TuneRequest {
  std::vector<plan::Specialisation> specialisations;
  std::vector<std::int64_t> seq_lens = {1024, 4096, 16384};  // square problems, q_len = kv_len
  std::int64_t batch = 0;                                    // 0: default_batch(seq_len)
  std::int64_t heads = 32, kv_heads = 0;                     // kv_heads 0: heads
  std::vector<kernels::TileConfig> tiles;                    // empty: the families' candidates
  TimingOptions timing;
  double min_gain = 0.02;   // a candidate replaces the heuristic default only when this much faster
  bool write_db = true;     // merge the choices into the database (never without a disk cache)
  int jobs = 0;             // compile threads (0: the hardware's)
  const std::atomic<bool>* stop = nullptr;  // when it becomes true: finish the step in progress, stop
  std::function<void(const PrepareProgress&)> prepare_progress;  // compile phase (worker threads)
  std::function<void(const TuneProgress&)> progress;             // timing phase
};

// One timed candidate.
struct Timed {
  Candidate c;
  TimingResult r;
};

// One problem: a specialisation at one size.
struct TuneOutcome {
  std::size_t plan = 0;                          // index into TuneResult::plans
  TimingProblem problem;
  plan::TuningKey key;
  std::vector<Timed> timed;
  std::optional<std::size_t> best, heuristic;    // indices into timed
  bool complete = false, written = false;
  std::string problem_text;                      // why there is no result
  bool reached() const { return !timed.empty() || !problem_text.empty(); }
  std::optional<double> gain() const;            // best over heuristic TOPS − 1
};

struct TuneResult {
  kernels::Arch arch = kernels::Arch::Sm90a;
  bool disk = false;                 // the Context has a disk cache (else nothing is written)
  std::string cache_dir, db_file;    // db_file: where the database is (written only if write_db)
  bool write_db = false;
  plan::DbInfo info;                 // device and versions, as recorded in the database
  PrepareStats stats;
  std::vector<SpecialisationPlan> plans;
  std::vector<TuneOutcome> outcomes;
  std::size_t written = 0, failures = 0;
  std::vector<std::string> db_errors;
  bool gpu_failed = false;           // a driver error: nothing more could be measured
  std::string gpu_error;
  bool interrupted = false;
  // A failure anywhere: a problem not measured, a compile error, the GPU, the cache or database.
  bool failed() const { return failures || stats.compile_errors || gpu_failed || (disk && stats.store_failed); }
};

// Tunes on the Context's device. Throws what creating the timing buffers throws only for errors
// that leave nothing to report; a candidate's or a problem's failure is recorded in the result.
TuneResult tune(Context::Impl& ctx, const TuneRequest& request);

}  // namespace sage2::autotune
