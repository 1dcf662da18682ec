// The public tuning calls, sage2::tune (sage2.hpp) and sage2_tune (sage2.h): conversions to the
// library's request (autotune/tune.hpp) and from its result. They live in this layer because
// tuning sits above the runtime that implements the rest of the API.
#include <cstdio>

#include "autotune/tune.hpp"
#include "runtime/c_api_internal.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

namespace sage2 {
namespace {

autotune::TuneRequest request_of(const TuneOptions& o, kernels::Arch arch) {
  auto positive = [](bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorCode::InvalidArgument, "tune options: " + what);
  };
  positive(!o.head_dims.empty() && !o.dtypes.empty() && !o.causal.empty() && !o.seq_lens.empty(),
           "head_dims, dtypes, causal and seq_lens must not be empty");
  for (int hd : o.head_dims) positive(hd >= 1 && hd <= 512, "head_dims: " + std::to_string(hd) + " outside 1..512");
  for (std::int64_t n : o.seq_lens) positive(n >= 1, "seq_lens: " + std::to_string(n) + " < 1");
  for (DType t : o.dtypes) positive(t == DType::F16 || t == DType::BF16, std::string("dtypes: ") + dtype_name(t));
  positive(o.qk_bits == 0 || o.qk_bits == 4 || o.qk_bits == 8, "qk_bits=" + std::to_string(o.qk_bits) + " (0, 4 or 8)");
  positive(o.heads >= 1 && o.kv_heads >= 0 && o.batch >= 0 && (o.kv_heads == 0 || o.heads % o.kv_heads == 0),
           "heads=" + std::to_string(o.heads) + " kv_heads=" + std::to_string(o.kv_heads) + " batch=" +
               std::to_string(o.batch) + " (heads >= 1, a multiple of kv_heads; 0 = default)");
  positive(o.reps >= 1 && o.warmup >= 0 && o.budget_seconds > 0 && o.min_gain >= 0 && o.jobs >= 0,
           "reps >= 1, warmup >= 0, budget_seconds > 0, min_gain >= 0 and jobs >= 0");
  autotune::SpecialisationGrid g;
  g.head_dims = o.head_dims;
  g.dtypes = o.dtypes;
  g.causal = o.causal;
  g.bits = {o.qk_bits};
  g.pv = {o.pv_precision};
  autotune::TuneRequest rq;
  rq.specialisations = autotune::specialisations(g, arch);
  rq.seq_lens = o.seq_lens;
  rq.batch = o.batch;
  rq.heads = o.heads;
  rq.kv_heads = o.kv_heads;
  rq.timing.warmup = o.warmup;
  rq.timing.max_reps = o.reps;
  rq.timing.min_reps = std::min(5, o.reps);
  rq.timing.budget_seconds = o.budget_seconds;
  rq.min_gain = o.min_gain;
  rq.write_db = o.write_db;
  rq.jobs = o.jobs;
  return rq;
}

TuneSummary summary_of(const autotune::TuneResult& r) {
  TuneSummary s;
  for (const autotune::TuneOutcome& out : r.outcomes) {
    if (!out.reached()) continue;
    ++s.problems;
    const auto gain = out.gain();
    if (gain && *gain > 0 && out.best != out.heuristic) {
      ++s.improved;
      s.best_gain = std::max(s.best_gain, *gain);
    }
    char line[256];
    auto tile = [&](const std::optional<std::size_t>& i) { return i ? plan::tile_str(out.timed[*i].c.tile) : "-"; };
    auto tops = [&](const std::optional<std::size_t>& i) { return i ? out.timed[*i].r.tops : 0.0; };
    std::snprintf(line, sizeof line, "%s N=%lld best %s %.1f TOPS, heuristic %s %.1f TOPS%s%s",
                  r.plans[out.plan].spec.str().c_str(), static_cast<long long>(out.problem.q_len),
                  tile(out.best).c_str(), tops(out.best), tile(out.heuristic).c_str(), tops(out.heuristic),
                  out.problem_text.empty() ? "" : ": ", out.problem_text.c_str());
    s.lines.push_back(line);
  }
  s.written = static_cast<int>(r.written);
  s.failures = static_cast<int>(r.failures);
  s.kernels_compiled = r.stats.compiled;
  s.kernels_from_cache = r.stats.from_cache;
  s.compile_errors = r.stats.compile_errors;
  if (r.written) s.database = r.db_file;
  if (r.gpu_failed) throw Error(ErrorCode::DriverError, "tuning stopped: " + r.gpu_error);
  return s;
}

}  // namespace

TuneSummary tune(Context& ctx, const TuneOptions& options) {
  Context::Impl& impl = runtime::context_impl(ctx);
  return summary_of(autotune::tune(impl, request_of(options, impl.arch())));
}

}  // namespace sage2

namespace {
using sage2::runtime::c_abi::guarded;
using sage2::runtime::c_abi::require;

sage2::TuneOptions to_cpp(const sage2_tune_options* o) {
  sage2::TuneOptions r;
  if (!o) return r;
  require(o->n_head_dims >= 0 && o->n_seq_lens >= 0, "tune options: n_head_dims and n_seq_lens must be >= 0");
  if (o->head_dims && o->n_head_dims > 0) r.head_dims.assign(o->head_dims, o->head_dims + o->n_head_dims);
  if (o->seq_lens && o->n_seq_lens > 0) r.seq_lens.assign(o->seq_lens, o->seq_lens + o->n_seq_lens);
  require(o->dtype >= -1 && o->dtype <= 1, "tune options: dtype (-1 both, 0 f16, 1 bf16)");
  if (o->dtype >= 0) r.dtypes = {static_cast<sage2::DType>(o->dtype)};
  require(o->causal >= -1 && o->causal <= 2, "tune options: causal (-1 none and top-left, else a sage2_causal)");
  if (o->causal >= 0) r.causal = {static_cast<sage2::CausalMode>(o->causal)};
  require(o->pv_precision >= 0 && o->pv_precision <= 2, "tune options: pv_precision (a sage2_pv_precision)");
  r.qk_bits = o->qk_bits;
  r.pv_precision = static_cast<sage2::PvPrecision>(o->pv_precision);
  r.batch = o->batch;
  r.heads = o->heads;
  r.kv_heads = o->kv_heads;
  r.reps = o->reps;
  r.warmup = o->warmup;
  r.budget_seconds = o->budget_seconds;
  r.min_gain = o->min_gain;
  r.write_db = o->write_db != 0;
  r.jobs = o->jobs;
  return r;
}
}  // namespace

extern "C" {

void sage2_tune_options_init(sage2_tune_options* o) {
  if (!o) return;
  const sage2::TuneOptions d;
  *o = sage2_tune_options{};
  o->dtype = -1;
  o->causal = -1;
  o->qk_bits = d.qk_bits;
  o->pv_precision = static_cast<int32_t>(d.pv_precision);
  o->batch = d.batch;
  o->heads = d.heads;
  o->kv_heads = d.kv_heads;
  o->reps = d.reps;
  o->warmup = d.warmup;
  o->budget_seconds = d.budget_seconds;
  o->min_gain = d.min_gain;
  o->write_db = d.write_db ? 1 : 0;
  o->jobs = d.jobs;
}

sage2_status sage2_tune(sage2_context* ctx, const sage2_tune_options* options, sage2_tune_summary* summary,
                        char* database, size_t database_size) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    const sage2::TuneSummary s = sage2::tune(ctx->cpp, to_cpp(options));
    if (summary) {
      summary->problems = s.problems;
      summary->written = s.written;
      summary->failures = s.failures;
      summary->improved = s.improved;
      summary->best_gain = s.best_gain;
      summary->kernels_compiled = static_cast<int64_t>(s.kernels_compiled);
      summary->kernels_from_cache = static_cast<int64_t>(s.kernels_from_cache);
      summary->compile_errors = static_cast<int64_t>(s.compile_errors);
    }
    sage2::runtime::c_abi::copy_out(s.database, database, database_size);
  });
}

}  // extern "C"
