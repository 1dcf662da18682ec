#include "autotune/warmup.hpp"

#include <algorithm>
#include <thread>

#include "plan/candidates.hpp"
#include "plan/planner.hpp"

namespace sage2::autotune {
namespace {

int jobs_of(int jobs) {
  return jobs > 0 ? jobs : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

PrepareOptions prepare_options(const plan::CallSettings& s, const WarmupRequest& rq) {
  PrepareOptions o;
  o.arch = s.arch;
  o.ptx = s.ptx;
  o.max_smem_optin = s.device.max_smem_optin;
  o.quant_path = s.quant_path;
  o.jobs = jobs_of(rq.jobs);
  o.stop = rq.stop;
  o.progress = rq.progress;
  return o;
}

}  // namespace

WarmupResult warm_up_offline(const plan::CallSettings& settings, const cache::DiskCache& cache,
                             const WarmupRequest& rq) {
  WarmupResult r;
  r.set = plan::warmup_kernel_specs(rq.selection, settings);
  r.stats = rq.prepared;
  prepare_specs(r.set.specs, cache, prepare_options(settings, rq), r.stats);
  return r;
}

WarmupResult warm_up(Context::Impl& ctx, const WarmupRequest& rq) {
  plan::CallSettings settings = ctx.call_settings();
  // The database as it is on disk now (the Context's planner read it once, maybe before tuning).
  const plan::Planner planner(plan::context_db_path(ctx.config(), ctx.facts().name, ctx.arch()), ctx.facts().name,
                              ctx.arch(), ctx.facts().max_shared_per_block_optin);
  settings.planner = &planner;
  WarmupResult r;
  if (!ctx.kernels().disk().disabled()) {
    // Compiled on `jobs` threads into the disk cache; loading below then reads each from disk.
    r = warm_up_offline(settings, ctx.kernels().disk(), rq);
  } else {
    r.set = plan::warmup_kernel_specs(rq.selection, settings);
    r.stats = rq.prepared;
  }
  if (rq.stop && rq.stop->load()) return r;
  // In batches of `jobs` (KernelLoader::load_all compiles each missing kernel on a thread of its own).
  const std::size_t batch = static_cast<std::size_t>(jobs_of(rq.jobs));
  for (std::size_t i = 0; i < r.set.specs.size(); i += batch) {
    if (rq.stop && rq.stop->load()) break;
    const std::size_t end = std::min(r.set.specs.size(), i + batch);
    ctx.kernels().load_all({r.set.specs.begin() + static_cast<std::ptrdiff_t>(i),
                            r.set.specs.begin() + static_cast<std::ptrdiff_t>(end)});
    r.loaded = end;
  }
  return r;
}

}  // namespace sage2::autotune
