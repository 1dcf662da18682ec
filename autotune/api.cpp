// The public tuning calls, sage2::tune (sage2.hpp) and sage2_tune (sage2.h): conversions to the
// library's request (autotune/tune.hpp) and from its result. They live in this layer because
// tuning sits above the runtime that implements the rest of the API.
#include <cstdio>
#include <type_traits>

#include "autotune/tune.hpp"
#include "autotune/warmup.hpp"
#include "runtime/c_api_internal.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

namespace sage2 {
namespace {

// The head dims, dtypes and causal modes of TuneOptions or WarmupOptions.
plan::ShapeSelection shapes(const auto& o) { return {o.head_dims, o.dtypes, o.causal}; }

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
  static_cast<plan::ShapeSelection&>(g) = shapes(o);
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

plan::WarmupSelection selection_of(const WarmupOptions& o) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorCode::InvalidArgument, "warmup options: " + what);
  };
  check(!o.head_dims.empty() && !o.dtypes.empty() && !o.causal.empty() && !o.qk_bits.empty() &&
            !o.pv_precision.empty() && !o.return_lse.empty() && !o.masks.empty(),
        "head_dims, dtypes, causal, qk_bits, pv_precision, return_lse and masks must not be empty");
  for (int hd : o.head_dims) check(hd >= 1 && hd <= 512, "head_dims: " + std::to_string(hd) + " outside 1..512");
  for (DType t : o.dtypes) check(t == DType::F16 || t == DType::BF16, std::string("dtypes: ") + dtype_name(t));
  for (CausalMode c : o.causal)
    check(static_cast<int>(c) >= 0 && static_cast<int>(c) <= 2, "causal: " + std::to_string(static_cast<int>(c)));
  for (QkBits b : o.qk_bits)
    check(b == QkBits::Auto || b == QkBits::Int4 || b == QkBits::Int8, "qk_bits: " + std::to_string(static_cast<int>(b)));
  for (PvPrecision p : o.pv_precision)
    check(static_cast<int>(p) >= 0 && static_cast<int>(p) <= 2, "pv_precision: " + std::to_string(static_cast<int>(p)));
  for (MaskType m : o.masks)
    check(static_cast<int>(m) >= 0 && static_cast<int>(m) <= 4, "masks: " + std::to_string(static_cast<int>(m)));
  check(static_cast<int>(o.small_q_path) >= 0 && static_cast<int>(o.small_q_path) <= 2,
        "small_q_path: " + std::to_string(static_cast<int>(o.small_q_path)));
  check(o.jobs >= 0, "jobs=" + std::to_string(o.jobs) + " (>= 0; 0 = CPU count)");
  check(static_cast<int>(o.pv_accum) >= 0 && static_cast<int>(o.pv_accum) <= 3,
        "pv_accum: " + std::to_string(static_cast<int>(o.pv_accum)));
  check(static_cast<int>(o.smooth_q) >= 0 && static_cast<int>(o.smooth_q) <= 2,
        "smooth_q: " + std::to_string(static_cast<int>(o.smooth_q)));
  plan::WarmupSelection w;
  static_cast<plan::ShapeSelection&>(w) = shapes(o);
  w.qk_bits = o.qk_bits;
  w.pv = o.pv_precision;
  w.lse = o.return_lse;
  w.masks = o.masks;
  w.varlen = o.varlen;
  w.pv_accum = {o.pv_accum};
  w.smooth_q = {o.smooth_q};
  w.smooth_k = o.smooth_k;
  w.smooth_v = {o.smooth_v};
  w.small_q = {o.small_q_path};
  return w;
}

}  // namespace

TuneSummary tune(Context& ctx, const TuneOptions& options) {
  Context::Impl& impl = runtime::context_impl(ctx);
  return summary_of(autotune::tune(impl, request_of(options, impl.arch())));
}

WarmupSummary warmup(Context& ctx, const WarmupOptions& options) {
  autotune::WarmupRequest rq;
  rq.selection = selection_of(options);
  rq.jobs = options.jobs;
  const autotune::WarmupResult r = autotune::warm_up(runtime::context_impl(ctx), rq);
  if (!r.stats.errors.empty())
    throw Error(ErrorCode::CompileError, "warmup: " + std::to_string(r.stats.compile_errors) +
                                             " kernel(s) failed to compile; the first: " + r.stats.errors.front());
  WarmupSummary s;
  s.kernels = r.set.specs.size();
  s.compiled = r.stats.compiled;
  s.from_cache = r.stats.from_cache;
  s.seconds = r.stats.seconds;
  s.selection = rq.selection.describe();
  s.left_out = r.set.left_out;
  return s;
}

}  // namespace sage2

namespace {
using sage2::runtime::c_abi::guarded;
using sage2::runtime::c_abi::require;

// to = from, converted where the C struct holds an integer for a C++ enum or bool.
constexpr auto convert = [](auto& to, const auto& from) { to = static_cast<std::remove_cvref_t<decltype(to)>>(from); };

// The scalar fields sage2_tune_options and sage2::TuneOptions share, by name: one list for both
// directions (to_cpp reads them, sage2_tune_options_init writes TuneOptions' defaults). f(c, cpp).
template <typename C, typename Cpp, typename F>
void shared_tune_fields(C& c, Cpp& cpp, F f) {
  f(c.qk_bits, cpp.qk_bits), f(c.pv_precision, cpp.pv_precision), f(c.batch, cpp.batch), f(c.heads, cpp.heads);
  f(c.kv_heads, cpp.kv_heads), f(c.reps, cpp.reps), f(c.warmup, cpp.warmup), f(c.jobs, cpp.jobs);
  f(c.budget_seconds, cpp.budget_seconds), f(c.min_gain, cpp.min_gain), f(c.write_db, cpp.write_db);
}

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
  shared_tune_fields(*o, r, [](const auto& c, auto& cpp) { convert(cpp, c); });
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
  shared_tune_fields(*o, d, [](auto& c, const auto& cpp) { convert(c, cpp); });
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

void sage2_warmup_options_init(sage2_warmup_options* o) {
  if (!o) return;
  const sage2::WarmupOptions d;
  *o = sage2_warmup_options{};
  o->dtype = -1;
  o->causal = -1;
  o->return_lse = 0;
  o->masks = 1u << SAGE2_MASK_NONE;
  o->smooth_k = d.smooth_k ? 1 : 0;
  o->smooth_v = d.smooth_v ? 1 : 0;
}

sage2_status sage2_warmup(sage2_context* ctx, const sage2_warmup_options* options, sage2_warmup_summary* summary) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    sage2::WarmupOptions o;
    if (options) {
      require(options->n_head_dims >= 0, "warmup options: n_head_dims must be >= 0");
      if (options->head_dims && options->n_head_dims > 0)
        o.head_dims.assign(options->head_dims, options->head_dims + options->n_head_dims);
      require(options->dtype >= -1 && options->dtype <= 1, "warmup options: dtype (-1 both, 0 f16, 1 bf16)");
      if (options->dtype >= 0) o.dtypes = {static_cast<sage2::DType>(options->dtype)};
      require(options->causal >= -1 && options->causal <= 2, "warmup options: causal (-1 none and top-left, else a sage2_causal)");
      if (options->causal >= 0) o.causal = {static_cast<sage2::CausalMode>(options->causal)};
      require(options->qk_bits == 0 || options->qk_bits == 4 || options->qk_bits == 8, "warmup options: qk_bits (0, 4 or 8)");
      o.qk_bits = {static_cast<sage2::QkBits>(options->qk_bits)};
      require(options->pv_precision >= 0 && options->pv_precision <= 2, "warmup options: pv_precision (a sage2_pv_precision)");
      o.pv_precision = {static_cast<sage2::PvPrecision>(options->pv_precision)};
      require(options->return_lse >= -1 && options->return_lse <= 1, "warmup options: return_lse (-1 both, 0, 1)");
      o.return_lse = options->return_lse < 0 ? std::vector<bool>{false, true} : std::vector<bool>{options->return_lse == 1};
      require((options->masks >> 5) == 0, "warmup options: masks has bits above sage2_mask_type's values");
      o.masks.clear();
      for (int t = 0; t <= 4; ++t)
        if (options->masks & (1u << t)) o.masks.push_back(static_cast<sage2::MaskType>(t));
      if (o.masks.empty()) o.masks = {sage2::MaskType::None};
      o.varlen = options->varlen != 0;
      require(options->pv_accum >= 0 && options->pv_accum <= 3, "warmup options: pv_accum (a sage2_pv_accum)");
      o.pv_accum = static_cast<sage2::PvAccum>(options->pv_accum);
      require(options->smooth_q >= 0 && options->smooth_q <= 2, "warmup options: smooth_q (0 auto, 1 on, 2 off)");
      o.smooth_q = static_cast<sage2::Toggle>(options->smooth_q);
      o.smooth_k = options->smooth_k != 0;
      o.smooth_v = options->smooth_v != 0;
      require(options->small_q_path >= 0 && options->small_q_path <= 2, "warmup options: small_q_path (a sage2_small_q_path)");
      o.small_q_path = static_cast<sage2::SmallQPath>(options->small_q_path);
      o.jobs = options->jobs;
    }
    const sage2::WarmupSummary s = sage2::warmup(ctx->cpp, o);
    if (summary) {
      summary->kernels = static_cast<int64_t>(s.kernels);
      summary->compiled = static_cast<int64_t>(s.compiled);
      summary->from_cache = static_cast<int64_t>(s.from_cache);
      summary->seconds = s.seconds;
    }
  });
}

}  // extern "C"
