// Warm-ups: compile (or find in the disk cache) every kernel that calls inside a selection can
// load (plan/warmup.hpp), then load them into a Context. sage2::warmup / sage2_warmup (and through
// them Python's sage2.warmup) and sage2-autotune (after tuning, and --compile-only without a GPU)
// run these, so every warm-up compiles the same set for the same selection and settings.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "autotune/prepare.hpp"
#include "plan/warmup.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::autotune {

struct WarmupRequest {
  plan::WarmupSelection selection;
  int jobs = 0;                                  // compile threads (0: the hardware's, at most 16)
  const std::atomic<bool>* stop = nullptr;       // finish the compiles in flight, start no more
  std::function<void(const PrepareProgress&)> progress;  // serialised; from worker threads
  PrepareStats prepared;  // what an earlier phase prepared (tuning's candidates): not redone, counted on
};

struct WarmupResult {
  plan::WarmupSet set;        // what the selection needs here
  PrepareStats stats;         // the compiles (kernels, compiled, from_cache, errors), request.prepared's included
  std::size_t loaded = 0;     // kernels loaded into the Context (warm_up only)
  bool failed() const { return stats.compile_errors > 0; }
};

// On a Context: its settings (arch, code form, quantize path, family; the tuning database as it
// is on disk now, so a warm-up after tuning covers the new tiles). Compiles into the disk cache
// on `jobs` threads, then loads every kernel into the Context. Throws what loading throws.
WarmupResult warm_up(Context::Impl& ctx, const WarmupRequest& request);

// Without a GPU (sage2-autotune --compile-only): settings for an arch of the table (`settings`,
// planner null: the heuristic tiles), compiled into `cache`.
WarmupResult warm_up_offline(const plan::CallSettings& settings, const cache::DiskCache& cache,
                             const WarmupRequest& request);

}  // namespace sage2::autotune
