#include "autotune/tune.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "jit/kernel_build.hpp"
#include "kernels/attention_family.hpp"

namespace sage2::autotune {

std::vector<plan::Specialisation> specialisations(const SpecialisationGrid& g, kernels::Arch arch,
                                                  std::vector<std::string>* left_out) {
  std::vector<plan::Specialisation> v;
  for (int hd : g.head_dims)
    for (CausalMode c : g.causal)
      for (DType dt : g.dtypes)
        for (int bits : g.bits)
          for (PvPrecision pv : g.pv)
            for (const auto& fam : g.families) {
              plan::Specialisation s = plan::Specialisation::defaults(arch, hd, c, dt);
              if (bits) s.qk_bits = bits;
              if (pv != PvPrecision::Auto) s.pv_fp16 = pv == PvPrecision::Fp16;
              s.pv_acc16 = kernels::default_pv_acc16(arch, s.pv_fp16);  // the accumulation a call gets
              s.smooth_q = g.smooth_q.value_or(s.qk_bits == 4);
              s.smooth_v = g.smooth_v;
              s.family = fam.value_or(kernels::default_attention_family(arch, s.qk_bits, hd, s.pv_fp16));
              // Nothing runs it: a forced family without the kernel (wgmma: 8-bit FP8, sm_90a,
              // hd <= 256), INT4 on Blackwell, FP8 P̃V on Ampere.
              if (auto why = kernels::family_runs_why_not(kernels::attention_family(*s.family), arch, s.qk_bits, hd,
                                                          s.pv_fp16)) {
                if (left_out && std::find(left_out->begin(), left_out->end(), *why) == left_out->end())
                  left_out->push_back(*why);
                continue;
              }
              if (std::find(v.begin(), v.end(), s) != v.end()) continue;  // auto may equal an explicit family
              v.push_back(s);
              if (g.with_lse) {
                s.return_lse = true;
                v.push_back(s);
              }
            }
  return v;
}

std::int64_t default_batch(std::int64_t n) { return std::clamp<std::int64_t>(16384 / std::max<std::int64_t>(n, 1), 1, 4); }

std::optional<double> TuneOutcome::gain() const {
  if (!best || !heuristic) return std::nullopt;
  return timed[*best].r.tops / timed[*heuristic].r.tops - 1;
}

namespace {

bool stopped(const TuneRequest& r) { return r.stop && r.stop->load(); }

// The problems to time: each specialisation without LSE at each length (LSE changes only the
// epilogue; its kernels are compiled, not timed). Counts the timing steps and their weight.
std::vector<TuneOutcome> outcomes_for(const TuneRequest& rq, const TuneResult& res, std::size_t& steps, double& ops) {
  std::vector<TuneOutcome> v;
  const std::int64_t kv_heads = rq.kv_heads ? rq.kv_heads : rq.heads;
  for (std::size_t i = 0; i < res.plans.size(); ++i) {
    const SpecialisationPlan& p = res.plans[i];
    if (p.spec.return_lse) continue;
    std::size_t n = 0;
    for (const auto& c : p.candidates) n += c.compiled && (c.state == CandidateState::Ok || c.heuristic);
    for (std::int64_t len : rq.seq_lens) {
      TuneOutcome out;
      out.plan = i;
      out.problem = TimingProblem{rq.batch ? rq.batch : default_batch(len), rq.heads, kv_heads, len, len, p.spec.head_dim};
      out.key = p.spec.key(res.arch, len, len, rq.heads, kv_heads);
      steps += n;
      ops += static_cast<double>(n) * attention_ops(out.problem, p.spec.head_dim, false);
      v.push_back(out);
    }
  }
  return v;
}

// The candidates a problem times: the heuristic default first (the reference output and the
// baseline of the hysteresis), then every other candidate that passed preparation.
std::vector<const Candidate*> timing_list(const SpecialisationPlan& p) {
  std::vector<const Candidate*> list;
  if (const auto* h = p.heuristic_candidate(); h && h->compiled) list.push_back(h);
  for (const auto& c : p.candidates)
    if (c.compiled && c.state == CandidateState::Ok && !c.heuristic) list.push_back(&c);
  return list;
}

// The winner: the fastest eligible candidate, unless the heuristic default is within min_gain.
void choose(TuneOutcome& out, double min_gain) {
  for (std::size_t i = 0; i < out.timed.size(); ++i) {
    const Timed& t = out.timed[i];
    if (t.c.heuristic && t.r.ok) out.heuristic = i;
    if (!t.r.ok || t.c.state != CandidateState::Ok) continue;
    if (!out.best || t.r.ms < out.timed[*out.best].r.ms) out.best = i;
  }
  if (out.best && out.heuristic && out.timed[*out.heuristic].c.state == CandidateState::Ok &&
      out.timed[*out.best].r.ms * (1 + min_gain) > out.timed[*out.heuristic].r.ms)
    out.best = out.heuristic;
}

plan::TuningEntry entry_for(const TuneOutcome& out, const SpecialisationPlan& p, std::size_t timed_list,
                            const plan::DbInfo& info) {
  plan::TuningEntry e;
  const Timed& b = out.timed[*out.best];
  e.key = out.key;
  e.tile = b.c.tile;
  e.ms = b.r.ms;
  e.tops = b.r.tops;
  e.heuristic_tile = p.has_heuristic ? p.heuristic : b.c.tile;
  if (out.heuristic) {
    e.heuristic_ms = out.timed[*out.heuristic].r.ms;
    e.heuristic_tops = out.timed[*out.heuristic].r.tops;
  }
  e.batch = out.problem.batch;
  e.q_heads = out.problem.q_heads;
  e.kv_heads = out.problem.kv_heads;
  e.q_len = out.problem.q_len;
  e.kv_len = out.problem.kv_len;
  e.timed = static_cast<int>(out.timed.size());
  e.rejected = static_cast<int>(p.candidates.size()) - static_cast<int>(timed_list);
  e.code_version = plan::current_code_version();
  e.driver_version = info.driver_version;
  e.nvrtc_version = info.nvrtc_version;
  e.tuned_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return e;
}

class Tuner {
 public:
  Tuner(Context::Impl& ctx, const TuneRequest& rq, TuneResult& res) : ctx_(ctx), rq_(rq), res_(res) {}

  // Times every candidate of `out` (false: stopped in the middle; the problem is not recorded).
  bool time(TuneOutcome& out) {
    const SpecialisationPlan& p = res_.plans[out.plan];
    const std::vector<const Candidate*> list = timing_list(p);
    if (list.empty() || !list.front()->heuristic) {
      out.problem_text = list.empty() ? "no candidate could be prepared" : "the heuristic default could not be prepared";
      if (list.empty()) {
        ++res_.failures;
        out.complete = true;
        return true;
      }
    }
    std::vector<kernels::KernelSpec> specs;
    for (const auto* c : list) specs.push_back(c->spec);
    const double w = attention_ops(out.problem, p.spec.head_dim, false);
    try {
      TimingBench bench(ctx_, p.spec, out.problem, specs, rq_.timing);
      double best_ms = 0;
      for (const auto* c : list) {
        if (stopped(rq_)) break;
        report(p.spec.str() + " N=" + std::to_string(out.problem.q_len) + " " + plan::tile_str(c->tile));
        Timed t{*c, bench.time(c->spec, best_ms, c->heuristic)};
        ++progress_.done;
        progress_.done_ops += w;
        if (t.r.ok && c->state == CandidateState::Ok && (best_ms <= 0 || t.r.ms < best_ms)) best_ms = t.r.ms;
        out.timed.push_back(t);
      }
      out.complete = out.timed.size() == list.size();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::DriverError) {
        res_.gpu_failed = true;
        res_.gpu_error = e.what();
      }
      out.problem_text = e.what();
      out.complete = true;
      ++res_.failures;
      return true;
    }
    if (!out.complete) return false;
    choose(out, rq_.min_gain);
    if (!out.best) {
      out.problem_text = "no candidate passed (see the candidate list)";
      ++res_.failures;
      return true;
    }
    if (res_.write_db) write(out, p, list.size());
    return true;
  }

  void start(std::size_t steps, double ops) {
    progress_.total = steps;
    progress_.total_ops = ops;
  }
  void finish() {
    progress_.done = progress_.total;
    progress_.done_ops = progress_.total_ops;
    report("done");
  }

 private:
  void report(const std::string& label) {
    if (!rq_.progress) return;
    progress_.label = label;
    rq_.progress(progress_);
  }

  void write(TuneOutcome& out, const SpecialisationPlan& p, std::size_t timed_list) {
    const plan::TuningEntry e = entry_for(out, p, timed_list, res_.info);
    res_.info.updated_unix = e.tuned_unix;
    const plan::DbWriteResult wr = plan::merge_into_db(res_.db_file, res_.info, {e});
    if (wr.ok) {
      out.written = true;
      ++res_.written;
    } else {
      res_.db_errors.push_back(wr.problem);
      ++res_.failures;
    }
  }

  Context::Impl& ctx_;
  const TuneRequest& rq_;
  TuneResult& res_;
  TuneProgress progress_;
};

}  // namespace

TuneResult tune(Context::Impl& ctx, const TuneRequest& rq) {
  TuneResult res;
  res.arch = ctx.arch();
  res.cache_dir = ctx.config().cache_dir;
  res.disk = !ctx.kernels().disk().disabled();
  res.write_db = res.disk && rq.write_db;
  res.db_file = plan::db_path(res.cache_dir, ctx.facts().name, res.arch);
  res.info.device_name = ctx.facts().name;
  res.info.arch = res.arch;
  res.info.sm_count = ctx.facts().sm_count;
  res.info.driver_version = version_info().driver_version;
  res.info.nvrtc_version = jit::Toolchain::current().nvrtc_str();
  res.info.library_version = plan::library_version();

  // 1. compile (parallel, no GPU): the kernels go to the disk cache, where the Context finds them.
  const cache::DiskCache cache(res.cache_dir, !res.disk, ctx.kernels().disk().trust());
  PrepareOptions po;
  po.arch = res.arch;
  po.ptx = ctx.ptx();
  po.max_smem_optin = ctx.facts().max_shared_per_block_optin;
  po.quant_path = ctx.config().quant_path;  // time the kernels calls of this Context run
  po.jobs = rq.jobs ? rq.jobs : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  po.tiles = rq.tiles;
  po.stop = rq.stop;
  po.progress = rq.prepare_progress;
  res.plans = prepare_kernels(rq.specialisations, cache, po, res.stats);

  // 2. time, choose and record, per specialisation and sequence length.
  std::size_t steps = 0;
  double ops = 0;
  res.outcomes = outcomes_for(rq, res, steps, ops);
  Tuner tuner(ctx, rq, res);
  tuner.start(steps, ops);
  for (TuneOutcome& out : res.outcomes) {
    if (stopped(rq) || res.gpu_failed) break;
    if (!tuner.time(out)) break;  // interrupted in the middle: this problem is not recorded
  }
  res.interrupted = stopped(rq);
  if (!res.interrupted && !res.gpu_failed) tuner.finish();
  return res;
}

}  // namespace sage2::autotune
