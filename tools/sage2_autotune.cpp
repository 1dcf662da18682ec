// sage2-autotune: compile and tune the attention kernels for a GPU, record the fastest tile
// configurations in the tuning database beside the kernel cache, and print what was gained over
// the heuristic defaults. With --compile-only it fills the kernel cache for an arch without any
// GPU or driver (a build machine preparing a cache bundle for a fleet), for one arch of the table
// or several (--arch sm_80,sm_89,sm_90a,sm_120: one cache, one `sage2-cache export` bundle).
//
//   sage2-autotune [--device N] [selection] [timing options] [--json] [--progress]
//   sage2-autotune --arch ARCH[,ARCH...] --compile-only [selection] [--json]
//   sage2-autotune --help | --version
//
// Options that do nothing in the chosen mode (the "tuning (GPU)" group under --compile-only,
// --max-smem without it) are named in a warning on stderr; the exit status does not change.
//
// Exit codes (also in --help and docs/deploying.md, "Tools"):
//   0   done
//   1   failure: a kernel failed to compile, the cache or the database could not be written, a
//       problem could not be measured, or the GPU failed
//   2   usage error (one line naming the option or value), including a selection that gives no
//       specialisation on an arch (--arch sm_80 --pv fp8: nothing to compile; the reason is said)
//   3   no CUDA driver (tuning needs one; --compile-only does not)
//   4   no supported GPU at --device (older than sm_80, or no such device)
//   130 interrupted by SIGINT (143: SIGTERM): the step in progress was finished and everything
//       done so far is in the cache and the database
//
// The command line is autotune_cli.*, the console (progress, signals) autotune_progress.*, the
// reports autotune_report.*; this file holds the two modes and main.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autotune/prepare.hpp"
#include "autotune/timing.hpp"
#include "autotune/tune.hpp"
#include "autotune/warmup.hpp"
#include "autotune_cli.hpp"
#include "autotune_progress.hpp"
#include "autotune_report.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "kernels/attention_family.hpp"
#include "plan/candidates.hpp"
#include "plan/tuning_db.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/device.hpp"
#include "tool_cli.hpp"

using namespace sage2;
using namespace sage2::autotune_tool;

namespace {

autotune::PrepareOptions prepare_options(const Options& o, kernels::Arch arch, int smem, Progress& progress,
                                         bool ptx = false) {
  autotune::PrepareOptions po;
  po.arch = arch;
  po.ptx = ptx;
  po.max_smem_optin = smem;
  po.jobs = o.jobs;
  po.tiles = o.tiles;
  po.stop = &g_stop;
  po.progress = [&progress](const autotune::PrepareProgress& p) {
    note_interrupt_once();
    std::string label = p.label;  // "<family>|<arch>|d64|..." without the arch (one per run)
    if (const auto a = label.find('|'); a != std::string::npos)
      if (const auto b = label.find('|', a + 1); b != std::string::npos) label.erase(a, b - a);
    progress.update(p.done, p.total, static_cast<double>(p.done), static_cast<double>(p.total), label);
  };
  return po;
}

// ---- --compile-only --------------------------------------------------------------------------
int compile_only_arch(const Options& o, kernels::Arch arch, Progress& progress, json* report);

// One arch: its report as before; several: one report {"mode", "archs", "reports": [one per
// arch], "exit_code"} and the tables one after the other. The exit code is the worst.
int run_compile_only(const Options& o, Progress& progress) {
  if (o.archs.size() <= 1) return compile_only_arch(o, *o.arch, progress, nullptr);
  Options one = o;  // --json / --report: one report for all archs, written here
  one.report.clear();
  const bool collect = o.json || !o.report.empty();
  json all = {{"mode", "compile-only"}, {"archs", json::array()}, {"reports", json::array()}};
  int rc = kExitOk;
  for (kernels::Arch arch : o.archs) {
    json r;
    const int arc = compile_only_arch(one, arch, progress, collect ? &r : nullptr);
    all["archs"].push_back(kernels::arch_name(arch));
    all["reports"].push_back(r);
    if (arc != kExitOk && (rc == kExitOk || arc > rc)) rc = arc;
    if (g_stop.load()) break;
  }
  all["exit_code"] = rc;
  if ((o.json || !o.report.empty()) && !emit_report(o, all) && rc == kExitOk) rc = kExitFailed;
  return rc;
}

// `report`: where to put the JSON report instead of emitting it (several archs).
int compile_only_arch(const Options& o, kernels::Arch arch, Progress& progress, json* report) {
  const int smem = o.max_smem ? o.max_smem : plan::default_max_smem_optin(arch);
  const base::config::CacheConfig config = base::config::cache_config();
  const std::string dir = o.cache_dir.empty() ? config.cache_dir : o.cache_dir;
  if (jit::nvrtc_version().first == 0) {
    std::fprintf(stderr, "sage2-autotune: NVRTC cannot be loaded; nothing can be compiled (set SAGE2_LIBNVRTC)\n");
    return kExitFailed;
  }
  // The tool fills the directory it is given (its trust rules are the library's).
  const cache::DiskCache cache(dir, /*disabled=*/false, cache::Trust{config.trust_root, std::nullopt});
  const auto specs = specialisations(o, arch);
  progress.phase("compile");
  autotune::PrepareStats stats;
  autotune::PrepareOptions po = prepare_options(o, arch, smem, progress);
  const auto plans = autotune::prepare_kernels(specs, cache, po, stats);
  // Then everything a call inside the selection can load, with the settings a Context on such a
  // device will have (SAGE2_QUANT_PATH, SAGE2_ATTENTION_FAMILY): the fleet's warm-up.
  const plan::WarmupSelection selection = warmup_selection(o);
  plan::CallSettings settings;
  settings.arch = arch;
  settings.device.max_smem_optin = smem;
  const base::config::ContextConfig defaults = base::config::context_config();
  settings.quant_path = defaults.quant_path;
  if (defaults.family != AttentionFamily::Auto)
    settings.family = kernels::parse_attention_family(attention_family_name(defaults.family));
  autotune::WarmupRequest wr;
  wr.selection = selection;
  wr.jobs = o.jobs;
  wr.stop = &g_stop;
  wr.progress = po.progress;
  wr.prepared = stats;
  progress.phase("warm-up");
  autotune::WarmupResult warm;
  if (!g_stop.load()) {
    warm = autotune::warm_up_offline(settings, cache, wr);
    stats = warm.stats;
  }
  note_interrupt_once();
  progress.end();
  const bool interrupted = g_stop.load();
  int rc = kExitOk;
  if (stats.compile_errors || stats.store_failed) rc = kExitFailed;
  if (interrupted) rc = interrupted_exit_code();
  if (o.json || !o.report.empty() || report) {
    json j = {{"mode", "compile-only"},
              {"arch", kernels::arch_name(arch)},
              {"max_smem_optin", smem},
              {"cache_dir", dir},
              {"versions", {{"library", plan::library_version()}, {"nvrtc", nvrtc_string()},
                            {"code", plan::current_code_version()}}},
              {"specialisations", json::array()},
              {"kernels", stats_json(stats)},
              {"warmup", warmup_json(selection, warm, arch)},
              {"interrupted", interrupted},
              {"exit_code", rc}};
    for (const auto& p : plans) j["specialisations"].push_back(plan_json(p));
    if (report)
      *report = std::move(j);
    else if (!emit_report(o, j) && rc == kExitOk)
      rc = kExitFailed;
  }
  if (!o.json) {
    std::printf("sage2-autotune: compile-only for %s (opt-in shared memory %d bytes) into %s\n", kernels::arch_name(arch),
                smem, dir.c_str());
    print_plans(plans, o.verbose);
    print_stats(stats);
    print_warmup(selection, warm, arch);
    if (interrupted) std::printf("interrupted: the kernels compiled so far are in the cache\n");
  }
  return rc;
}

// ---- tuning on a GPU --------------------------------------------------------------------------
// The device checks with the tool's exit codes; nullopt when tuning can go on.
std::optional<int> check_device(const Options& o, runtime::DeviceFacts& facts) {
  if (!base::driver::available()) {
    std::fprintf(stderr, "sage2-autotune: %s\n(--arch ARCH --compile-only fills the cache without a GPU)\n",
                 base::driver::unavailable_reason().c_str());
    return kExitNoDriver;
  }
  const int count = runtime::device_count();
  if (o.device >= count) {
    std::fprintf(stderr, "sage2-autotune: --device %d but %d CUDA device(s) are visible\n", o.device, count);
    return kExitNoGpu;
  }
  facts = runtime::device_facts(o.device);
  if (!facts.arch) {
    std::fprintf(stderr, "sage2-autotune: device %d (%s, %s) is not supported: %s\n", o.device, facts.name.c_str(),
                 facts.cc_string().c_str(), facts.target_note.c_str());
    return kExitNoGpu;
  }
  return std::nullopt;
}

// --arch against the arch the Context generates code for: the device's, or SAGE2_TARGET_ARCH's
// (PTX the driver compiles); nullopt when they agree.
std::optional<int> check_arch(const Options& o, int device, kernels::Arch arch, const runtime::DeviceFacts& facts) {
  if (!o.arch || *o.arch == arch) return std::nullopt;
  const bool target = arch != *facts.arch;
  std::fprintf(stderr, "sage2-autotune: --arch %s but device %d %s %s (use --compile-only to compile for another arch)\n",
               kernels::arch_name(*o.arch), device, target ? "runs SAGE2_TARGET_ARCH's" : "is", kernels::arch_name(arch));
  return kExitUsage;
}

autotune::TuneRequest tune_request(const Options& o, kernels::Arch arch, Progress& progress) {
  autotune::TuneRequest rq;
  rq.specialisations = specialisations(o, arch);
  rq.seq_lens = o.seq_lens;
  rq.batch = o.batch;
  rq.heads = o.heads;
  rq.kv_heads = o.kv_heads;
  rq.tiles = o.tiles;
  rq.timing.warmup = o.warmup;
  rq.timing.max_reps = std::max(o.reps, 1);
  rq.timing.min_reps = std::min(5, rq.timing.max_reps);
  rq.timing.budget_seconds = o.budget;
  rq.min_gain = o.min_gain;
  rq.write_db = !o.no_db;
  rq.jobs = o.jobs;
  rq.stop = &g_stop;
  // The compile phase reports through the same printer as --compile-only.
  rq.prepare_progress = prepare_options(o, arch, 0, progress).progress;
  rq.progress = [&progress, timing = false](const autotune::TuneProgress& t) mutable {
    if (!timing) {  // the first report of the timing phase ends the compile phase's bar
      progress.end();
      progress.phase("tune");
      timing = true;
    }
    note_interrupt_once();
    progress.update(t.done, t.total, t.done_ops, t.total_ops, t.label);
  };
  return rq;
}

int run_tune(const Options& o, Progress& progress) {
  runtime::DeviceFacts facts;
  if (const auto rc = check_device(o, facts)) return *rc;
  ContextOptions copt;
  copt.cache_dir = o.cache_dir;
  Context ctx(o.device, copt);
  // The arch whose kernels the Context builds and runs — the device's, or SAGE2_TARGET_ARCH's
  // through PTX — decides the table, the defaults (--pv auto) and the report, as for its calls.
  const kernels::Arch arch = runtime::context_impl(ctx).arch();
  if (const auto rc = check_arch(o, o.device, arch, facts)) return *rc;
  if (const auto why = why_selection_is_empty(o, arch))  // the arch is known only now
    return tools::usage_error("sage2-autotune", "device " + std::to_string(o.device) +
                                                    (arch == *facts.arch ? " is " : " runs SAGE2_TARGET_ARCH's ") +
                                                    kernels::arch_name(arch) + ": the selection tunes nothing: " + *why);
  if (ctx.cache_dir().empty())
    progress.message("sage2-autotune: the disk cache is disabled (SAGE2_DISABLE_DISK_CACHE): kernels stay in memory "
                     "and no tuning database is written");
  const VersionInfo versions = version_info();
  const autotune::TuneRequest rq = tune_request(o, arch, progress);
  progress.phase("compile");
  autotune::TuneResult res = autotune::tune(runtime::context_impl(ctx), rq);
  // Then everything a call inside the selection can load (the tiles just tuned included).
  const plan::WarmupSelection selection = warmup_selection(o);
  autotune::WarmupResult warm;
  if (!res.interrupted && !res.gpu_failed) {
    progress.end();
    progress.phase("warm-up");
    autotune::WarmupRequest wr;
    wr.selection = selection;
    wr.jobs = o.jobs;
    wr.stop = &g_stop;
    wr.progress = rq.prepare_progress;
    wr.prepared = res.stats;
    warm = autotune::warm_up(runtime::context_impl(ctx), wr);
    res.stats = warm.stats;
    res.interrupted = g_stop.load();
  }
  note_interrupt_once();
  progress.end();
  const auto& plans = res.plans;
  const auto& stats = res.stats;
  const auto& info = res.info;
  const bool interrupted = res.interrupted;
  const bool write_db = res.write_db, disk = res.disk;
  const std::string& dir = res.cache_dir;
  const std::string& db_file = res.db_file;
  int rc = res.failed() ? kExitFailed : kExitOk;
  if (interrupted) rc = interrupted_exit_code();

  if (o.json || !o.report.empty()) {
    json j = {{"mode", "tune"},
              {"arch", kernels::arch_name(arch)},
              {"device", {{"ordinal", o.device}, {"name", facts.name}, {"cc", facts.cc_string()},
                          {"sm_count", facts.sm_count}, {"max_smem_optin", facts.max_shared_per_block_optin},
                          {"l2_bytes", facts.l2_bytes}}},
              {"versions", {{"library", plan::library_version()}, {"nvrtc", info.nvrtc_version},
                            {"driver", versions.driver_version}, {"code", plan::current_code_version()}}},
              {"cache_dir", disk ? json(dir) : json(nullptr)},
              {"database", {{"path", write_db ? json(db_file) : json(nullptr)}, {"written", res.written},
                            {"errors", res.db_errors}}},
              {"timing", {{"warmup", rq.timing.warmup}, {"min_reps", rq.timing.min_reps}, {"max_reps", rq.timing.max_reps},
                          {"budget_seconds", rq.timing.budget_seconds}, {"min_gain", rq.min_gain}}},
              {"specialisations", json::array()},
              {"kernels", stats_json(stats)},
              {"warmup", warmup_json(selection, warm, arch)},
              {"results", json::array()},
              {"interrupted", interrupted},
              {"exit_code", rc}};
    if (res.gpu_failed) j["gpu_error"] = res.gpu_error;
    for (const auto& p : plans) j["specialisations"].push_back(plan_json(p));
    for (const auto& out : res.outcomes) {
      if (!out.reached()) continue;
      json r = {{"specialisation", plans[out.plan].spec.str()},
                {"key", out.key.str()},
                {"batch", out.problem.batch},
                {"heads", out.problem.q_heads},
                {"kv_heads", out.problem.kv_heads},
                {"seq_len", out.problem.q_len},
                {"complete", out.complete},
                {"written", out.written},
                {"timings", json::array()}};
      for (const auto& t : out.timed) r["timings"].push_back(timing_json(t));
      if (out.best) r["best"] = timing_json(out.timed[*out.best]);
      if (out.heuristic) r["heuristic"] = timing_json(out.timed[*out.heuristic]);
      if (auto g = out.gain()) r["gain"] = *g;
      if (!out.problem_text.empty()) r["problem"] = out.problem_text;
      j["results"].push_back(r);
    }
    if (!emit_report(o, j) && rc == kExitOk) rc = kExitFailed;
    if (o.json) return rc;
  }

  std::printf("sage2-autotune: %s (%s, %d SMs), driver %d.%d, NVRTC %s, sage2 %s\n", facts.name.c_str(),
              kernels::arch_name(arch), facts.sm_count, versions.driver_version / 1000, versions.driver_version % 1000 / 10,
              info.nvrtc_version.c_str(), info.library_version.c_str());
  if (o.verbose) print_plans(plans, true);
  print_stats(stats);
  print_warmup(selection, warm, arch);
  std::printf("\n%-28s %6s %8s  %-16s %7s  %-16s %7s %7s %6s\n", "specialisation", "N", "BxH", "best tile", "TOPS",
              "heuristic", "TOPS", "gain", "timed");
  for (const auto& out : res.outcomes) {
    if (!out.reached()) continue;
    char bxh[32];
    std::snprintf(bxh, sizeof bxh, "%lldx%lld", static_cast<long long>(out.problem.batch),
                  static_cast<long long>(out.problem.q_heads));
    std::string best = "-", best_tops = "-", heur = "-", heur_tops = "-", gain = "-";
    char b[32];
    if (out.best) {
      best = plan::tile_str(out.timed[*out.best].c.tile);
      std::snprintf(b, sizeof b, "%.1f", out.timed[*out.best].r.tops);
      best_tops = b;
    }
    if (out.heuristic) {
      heur = plan::tile_str(out.timed[*out.heuristic].c.tile);
      std::snprintf(b, sizeof b, "%.1f", out.timed[*out.heuristic].r.tops);
      heur_tops = b;
    } else if (plans[out.plan].has_heuristic) {
      heur = plan::tile_str(plans[out.plan].heuristic);
    }
    if (auto g = out.gain()) {
      std::snprintf(b, sizeof b, "%+.1f%%", *g * 100);
      gain = b;
    }
    std::printf("%-28s %6lld %8s  %-16s %7s  %-16s %7s %7s %6zu%s\n", plans[out.plan].spec.str().c_str(),
                static_cast<long long>(out.problem.q_len), bxh, best.c_str(), best_tops.c_str(), heur.c_str(),
                heur_tops.c_str(), gain.c_str(), out.timed.size(),
                out.problem_text.empty() ? "" : ("  " + out.problem_text).c_str());
  }
  if (write_db) std::printf("\ndatabase: %s (%zu entries written)\n", db_file.c_str(), res.written);
  else std::printf("\ndatabase: not written%s\n", o.no_db ? " (--no-db)" : "");
  for (const auto& e : res.db_errors) std::printf("database error: %s\n", e.c_str());
  if (res.gpu_failed) std::printf("GPU error: %s\n", res.gpu_error.c_str());
  if (interrupted) std::printf("interrupted: the results above are saved; the problem in progress was not recorded\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  add_options(cl);
  if (const auto rc = tools::parse(cl.app, "sage2-autotune", argc, argv)) return *rc;
  Options o;
  try {
    o = options_from(cl);
    if (o.compile_only)  // every arch before compiling anything
      for (kernels::Arch arch : o.archs)
        if (const auto why = why_selection_is_empty(o, arch))
          throw UsageError{std::string("--arch ") + kernels::arch_name(arch) + ": the selection compiles nothing: " + *why};
  } catch (const UsageError& e) {
    return tools::usage_error("sage2-autotune", e.message);
  }
  for (const std::string& name : idle_options(cl, o.compile_only))
    std::fprintf(stderr, "sage2-autotune: warning: %s does nothing %s; ignored\n", name.c_str(),
                 o.compile_only ? "with --compile-only (it is for tuning on a GPU)" : "without --compile-only");
  install_signal_handlers();
  g_verbose = o.verbose;
  Progress progress(progress_mode(o));
  g_progress = &progress;
  base::log::set_sink(&log_sink);
  int rc;
  try {
    rc = o.compile_only ? run_compile_only(o, progress) : run_tune(o, progress);
  } catch (const Error& e) {
    progress.end();
    std::fprintf(stderr, "sage2-autotune: %s\n", e.what());
    rc = e.code() == ErrorCode::NoDriver ? kExitNoDriver : kExitFailed;
    if (g_stop.load()) rc = interrupted_exit_code();
  } catch (const std::exception& e) {
    progress.end();
    std::fprintf(stderr, "sage2-autotune: %s\n", e.what());
    rc = kExitFailed;
  }
  base::log::set_sink(nullptr);
  g_progress = nullptr;
  return rc;
}
