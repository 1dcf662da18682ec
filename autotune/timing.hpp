// Timing candidate tiles on the GPU: what one Context::attention call costs (quantize → ΔS →
// attention, the work a user's call enqueues) with a given attention spec.
//
// Method:
//  - inputs: activation-like Q/K/V (reference::make_activation_like: per-channel bias with
//    outlier channels, a shared low-rank token structure, noise) generated for one head of up to
//    1024 tokens and repeated over the whole [B, H, N, d] tensors (HND, contiguous);
//  - rotation: R copies of {Q, K, V, O, workspace}, used in turn, with R chosen so that the
//    R − 1 other copies span at least twice the L2 (facts.l2_bytes) — a timed call never finds its
//    inputs in L2. When device memory (memory_fraction of the free memory) does not allow that
//    many copies, a 2×L2 scratch buffer is written before each timed call instead;
//  - per candidate: `warmup` untimed calls (module load, clocks), then up to `max_reps` calls each
//    between two CUDA events on a dedicated stream, synchronised one by one; at least `min_reps`,
//    stopping once `budget_seconds` have been measured; a candidate whose median after 3 calls is
//    above early_stop_ratio × the best median so far is stopped early (it cannot win);
//    result = the median;
//  - sanity: after timing, one call on copy 0 and a sample of O (its first 2^20 elements) is
//    compared with the reference candidate's (the heuristic default, timed first): a non-finite
//    output or a cosine similarity below 0.998 (8-bit) / 0.98 (4-bit) rejects the candidate.
//    Different tiles quantize with different per-thread groups, so outputs differ slightly; this
//    catches a broken kernel, not rounding.
// A launch error (e.g. too many resources requested) rejects the candidate; an error that leaves
// the context unusable (a kernel fault) is rethrown — nothing can be measured after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/problem_shape.hpp"
#include "plan/candidates.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::autotune {

// The problem a candidate is timed on (its head dim: the specialisation's).
using TimingProblem = kernels::ProblemShape;

struct TimingOptions {
  int warmup = 2;
  int min_reps = 5;
  int max_reps = 20;
  double budget_seconds = 1.0;
  double early_stop_ratio = 1.25;
  double memory_fraction = 0.5;
  int max_rotation_sets = 8;
  std::uint64_t seed = 0x5A6E2A7707ull;
};

struct TimingResult {
  bool ok = false;
  std::string problem;           // why not ok
  double ms = 0, tops = 0;       // median time of one call and its throughput
  double min_ms = 0, max_ms = 0;
  int reps = 0;
  bool stopped_early = false;
  double agreement = std::numeric_limits<double>::quiet_NaN();  // cosine vs the reference output
};

// 4·B·Hq·Nq·Nk·d operations, halved when causal (the convention of bench/ and torch baselines).
double attention_ops(const TimingProblem& p, int head_dim, bool causal);

class TimingBench {
 public:
  // Allocates the rotation copies for `problem` with a workspace that fits every spec of `specs`
  // (attention specs of specialisation `s`). Throws OutOfMemory when not even one copy fits.
  TimingBench(Context::Impl& ctx, const plan::Specialisation& s, const TimingProblem& problem,
              const std::vector<kernels::KernelSpec>& specs, const TimingOptions& options);
  ~TimingBench();
  TimingBench(const TimingBench&) = delete;
  TimingBench& operator=(const TimingBench&) = delete;

  // Times one spec. `best_ms` > 0 enables the early stop. `reference`: this output becomes the
  // reference the later candidates are compared with.
  TimingResult time(const kernels::KernelSpec& spec, double best_ms, bool reference);

  int rotation_sets() const { return static_cast<int>(sets_.size()); }
  bool flushes_l2() const { return scratch_ != 0; }
  std::size_t set_bytes() const { return set_bytes_; }

 private:
  struct Set {
    CUdeviceptr base = 0;  // the one allocation of this copy
    CUdeviceptr q = 0, k = 0, v = 0, o = 0, ws = 0;
  };
  struct Layout;  // the call's quantize buffers and workspace sizes (timing.cpp)
  static Layout layout_for(const TimingProblem& p, const kernels::KernelSpec& spec);
  // One call's launches (quantize → ΔS → attention) on `set`; `layout` is computed once per
  // candidate, outside the timed region.
  void run(const kernels::KernelSpec& spec, const Layout& layout, const Set& set);
  void release() noexcept;

  Context::Impl& ctx_;
  plan::Specialisation s_;
  TimingProblem p_;
  TimingOptions o_;
  float sm_scale_ = 1;
  std::size_t q_bytes_ = 0, kv_bytes_ = 0, ws_bytes_ = 0, set_bytes_ = 0;
  std::vector<Set> sets_;
  CUdeviceptr scratch_ = 0;
  std::size_t scratch_bytes_ = 0;
  CUstream stream_ = nullptr;
  CUevent events_[2] = {nullptr, nullptr};
  std::size_t next_set_ = 0;
  std::vector<float> reference_;
};

}  // namespace sage2::autotune
