#include "autotune/timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/quant_buffers.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/quantize_stage.hpp"
#include "sage2/reference.hpp"

namespace sage2::autotune {
namespace {

constexpr std::size_t kSampleElems = std::size_t(1) << 20;
constexpr std::int64_t kPatternTokens = 1024;

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

// Writes `pattern` repeated over `elems` 2-byte elements at `dst`: one upload, then device copies
// doubling the filled prefix.
void fill_periodic(CUdeviceptr dst, std::size_t elems, const std::vector<std::uint16_t>& pattern) {
  const auto& a = base::driver::api();
  const std::size_t first = std::min(elems, pattern.size());
  base::driver::check(a.cuMemcpyHtoD_v2(dst, pattern.data(), first * 2), "cuMemcpyHtoD (tuning inputs)");
  std::size_t filled = first;
  while (filled < elems) {
    const std::size_t n = std::min(filled, elems - filled);
    base::driver::check(a.cuMemcpyDtoD_v2(dst + filled * 2, dst, n * 2), "cuMemcpyDtoD (tuning inputs)");
    filled += n;
  }
}

float to_float(std::uint16_t bits, DType t) {
  return t == DType::BF16 ? reference::bf16_to_float(bits) : reference::half_to_float(bits);
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

}  // namespace

struct TimingBench::Layout {
  kernels::QuantBuffers b;
  std::size_t quant_bytes = 0, delta_s_bytes = 0;
};

TimingBench::Layout TimingBench::layout_for(const TimingProblem& p, const kernels::KernelSpec& spec) {
  kernels::QuantProblem qp;
  static_cast<kernels::ProblemShape&>(qp) = p;
  qp.head_dim = spec.head_dim;
  Layout w;
  w.b = kernels::quant_buffers(qp, spec);
  w.quant_bytes = align256(w.b.offsets().total);
  w.delta_s_bytes = align256(runtime::delta_s_workspace_bytes(w.b));
  return w;
}

double attention_ops(const TimingProblem& p, int head_dim, bool causal) {
  const double ops = 4.0 * static_cast<double>(p.batch) * static_cast<double>(p.q_heads) *
                     static_cast<double>(p.q_len) * static_cast<double>(p.kv_len) * head_dim;
  return causal ? ops / 2 : ops;
}

TimingBench::TimingBench(Context::Impl& ctx, const plan::Specialisation& s, const TimingProblem& problem,
                         const std::vector<kernels::KernelSpec>& specs, const TimingOptions& options)
    : ctx_(ctx), s_(s), p_(problem), o_(options) {
  if (p_.batch < 1 || p_.q_heads < 1 || p_.kv_heads < 1 || p_.q_len < 1 || p_.kv_len < 1 ||
      p_.q_heads % p_.kv_heads != 0)
    throw Error(ErrorCode::InvalidArgument, "tuning problem: sizes must be positive and q_heads a multiple of kv_heads");
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(ctx_.cu_context());
  sm_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s_.head_dim)));
  const std::size_t d = static_cast<std::size_t>(s_.head_dim);
  q_bytes_ = static_cast<std::size_t>(p_.batch * p_.q_heads * p_.q_len) * d * 2;
  kv_bytes_ = static_cast<std::size_t>(p_.batch * p_.kv_heads * p_.kv_len) * d * 2;
  for (const auto& spec : specs) {
    const Layout w = layout_for(p_, spec);
    ws_bytes_ = std::max(ws_bytes_, w.quant_bytes + w.delta_s_bytes);
  }
  set_bytes_ = 2 * align256(q_bytes_) + 2 * align256(kv_bytes_) + align256(ws_bytes_);

  try {
    base::driver::check(a.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    for (auto& e : events_) base::driver::check(a.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");

    std::size_t free_bytes = 0, total_bytes = 0;
    base::driver::check(a.cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo");
    const auto budget = static_cast<std::size_t>(o_.memory_fraction * static_cast<double>(free_bytes));
    const std::size_t l2 = static_cast<std::size_t>(std::max(0, ctx_.facts().l2_bytes));
    const std::size_t want = std::min<std::size_t>(std::max(1, o_.max_rotation_sets),
                                                   1 + (2 * l2 + set_bytes_ - 1) / set_bytes_);
    const std::size_t afford = budget / set_bytes_;
    if (afford < 1)
      throw Error(ErrorCode::OutOfMemory, "tuning problem B=" + std::to_string(p_.batch) + " Hq=" +
                                              std::to_string(p_.q_heads) + " N=" + std::to_string(p_.q_len) +
                                              " needs " + std::to_string(set_bytes_ >> 20) + " MiB; " +
                                              std::to_string(budget >> 20) + " MiB of device memory may be used");
    const std::size_t count = std::min(want, afford);
    if ((count - 1) * set_bytes_ < 2 * l2 && l2 > 0) {
      scratch_bytes_ = 2 * l2;
      if (budget >= count * set_bytes_ + scratch_bytes_)
        base::driver::check(a.cuMemAlloc_v2(&scratch_, scratch_bytes_), "cuMemAlloc (L2 flush buffer)");
      else
        scratch_bytes_ = 0;  // no room: copies alone (the largest problems exceed the L2 many times anyway)
    }
    for (std::size_t i = 0; i < count; ++i) {
      Set set;
      base::driver::check(a.cuMemAlloc_v2(&set.base, set_bytes_), "cuMemAlloc (tuning inputs)");
      sets_.push_back(set);
      Set& st = sets_.back();
      st.q = st.base;
      st.k = st.q + align256(q_bytes_);
      st.v = st.k + align256(kv_bytes_);
      st.o = st.v + align256(kv_bytes_);
      st.ws = st.o + align256(q_bytes_);
    }

    // Activation-like inputs for one head, repeated over every head and batch of copy 0.
    const std::int64_t tokens = std::min<std::int64_t>(std::max(p_.q_len, p_.kv_len), kPatternTokens);
    reference::AttentionInputs in =
        reference::make_activation_like(o_.seed, s_.dtype, 1, 1, 1, tokens, tokens, s_.head_dim);
    const Set& s0 = sets_[0];
    fill_periodic(s0.q, q_bytes_ / 2, in.q.bits());
    fill_periodic(s0.k, kv_bytes_ / 2, in.k.bits());
    fill_periodic(s0.v, kv_bytes_ / 2, in.v.bits());
    base::driver::check(a.cuMemsetD8_v2(s0.o, 0, q_bytes_), "cuMemsetD8 (tuning output)");
    for (std::size_t i = 1; i < sets_.size(); ++i) {
      // The same values at other addresses: L2 holds lines by address.
      base::driver::check(a.cuMemcpyDtoD_v2(sets_[i].base, s0.base, 2 * align256(q_bytes_) + 2 * align256(kv_bytes_)),
                    "cuMemcpyDtoD (tuning inputs)");
    }
    base::driver::check(a.cuCtxSynchronize(), "cuCtxSynchronize (tuning inputs)");
  } catch (...) {
    release();
    throw;
  }
}

TimingBench::~TimingBench() { release(); }

void TimingBench::release() noexcept {
  if (!base::driver::available()) return;
  try {
    const auto& a = base::driver::api();
    base::driver::ScopedContext scope(ctx_.cu_context());
    if (stream_) a.cuStreamSynchronize(stream_);
    for (auto& s : sets_)
      if (s.base) a.cuMemFree_v2(s.base);
    sets_.clear();
    if (scratch_) a.cuMemFree_v2(scratch_);
    scratch_ = 0;
    for (auto& e : events_)
      if (e) a.cuEventDestroy_v2(e);
    events_[0] = events_[1] = nullptr;
    if (stream_) a.cuStreamDestroy_v2(stream_);
    stream_ = nullptr;
  } catch (...) {
  }
}

void TimingBench::run(const kernels::KernelSpec& spec, const Layout& w, const Set& set) {
  auto ref = [&](CUdeviceptr ptr, std::int64_t heads, std::int64_t len) {
    return TensorRef::hnd(reinterpret_cast<void*>(ptr), s_.dtype, p_.batch, heads, len, s_.head_dim);
  };
  const TensorRef q = ref(set.q, p_.q_heads, p_.q_len), k = ref(set.k, p_.kv_heads, p_.kv_len),
                  v = ref(set.v, p_.kv_heads, p_.kv_len), o = ref(set.o, p_.q_heads, p_.q_len);
  void* ws = reinterpret_cast<void*>(set.ws);
  runtime::launch_quantize_stage(ctx_, spec, w.b, q, k, v, ws, stream_);
  runtime::launch_attention_stage(ctx_, spec, w.b, k, ws, o, nullptr, sm_scale_,
                                  reinterpret_cast<void*>(set.ws + w.quant_bytes), w.delta_s_bytes, stream_, &q);
}

TimingResult TimingBench::time(const kernels::KernelSpec& spec_in, double best_ms, bool reference) {
  kernels::KernelSpec spec = spec_in;
  spec.arch = ctx_.arch();
  spec.return_lse = false;  // timing passes no LSE buffer; LSE costs one store per row
  TimingResult r;
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(ctx_.cu_context());
  const bool causal = spec.causal != CausalMode::None;
  try {
    const Layout layout = layout_for(p_, spec);  // once: the timed region holds launches only
    auto run = [&](const kernels::KernelSpec& sp, const Set& set) { this->run(sp, layout, set); };
    auto next = [&]() -> const Set& { return sets_[next_set_++ % sets_.size()]; };
    int min_reps = std::max(1, o_.min_reps);
    for (int i = 0; i < o_.warmup; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run(spec, next());
      base::driver::check(a.cuStreamSynchronize(stream_), "cuStreamSynchronize (warm-up)");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0 && s > o_.budget_seconds) {  // a very slow call: measure it a few times only
        min_reps = std::min(min_reps, 3);
        break;
      }
    }
    std::vector<float> times;
    double sum_ms = 0;
    for (int i = 0; i < std::max(o_.max_reps, min_reps); ++i) {
      const Set& set = next();
      if (scratch_)
        base::driver::check(a.cuMemsetD8Async(scratch_, static_cast<unsigned char>(i & 0xff), scratch_bytes_, stream_),
                      "cuMemsetD8Async (L2 flush)");
      base::driver::check(a.cuEventRecord(events_[0], stream_), "cuEventRecord");
      run(spec, set);
      base::driver::check(a.cuEventRecord(events_[1], stream_), "cuEventRecord");
      base::driver::check(a.cuEventSynchronize(events_[1]), "cuEventSynchronize");
      float ms = 0;
      base::driver::check(a.cuEventElapsedTime(&ms, events_[0], events_[1]), "cuEventElapsedTime");
      times.push_back(ms);
      sum_ms += ms;
      const int n = static_cast<int>(times.size());
      if (n >= 3 && best_ms > 0 && median(times) > o_.early_stop_ratio * best_ms) {
        r.stopped_early = true;
        break;
      }
      if (n >= min_reps && sum_ms >= o_.budget_seconds * 1e3) break;
    }
    r.reps = static_cast<int>(times.size());
    r.ms = median(times);
    r.min_ms = *std::min_element(times.begin(), times.end());
    r.max_ms = *std::max_element(times.begin(), times.end());
    r.tops = attention_ops(p_, s_.head_dim, causal) / (r.ms * 1e-3) / 1e12;

    // Sanity check of the output (copy 0).
    run(spec, sets_[0]);
    base::driver::check(a.cuStreamSynchronize(stream_), "cuStreamSynchronize (output check)");
    const std::size_t n = std::min(kSampleElems, q_bytes_ / 2);
    std::vector<std::uint16_t> bits(n);
    base::driver::check(a.cuMemcpyDtoH_v2(bits.data(), sets_[0].o, n * 2), "cuMemcpyDtoH (output check)");
    std::vector<float> out(n);
    std::size_t nonfinite = 0;
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = to_float(bits[i], s_.dtype);
      nonfinite += std::isfinite(out[i]) ? 0 : 1;
    }
    if (nonfinite) {
      r.problem = std::to_string(nonfinite) + " non-finite values in the output sample";
      if (reference) reference_.clear();
      return r;
    }
    if (reference) {
      reference_ = std::move(out);
      r.agreement = 1.0;
    } else if (!reference_.empty()) {
      double dot = 0, na = 0, nb = 0;
      for (std::size_t i = 0; i < n; ++i) {
        dot += static_cast<double>(out[i]) * reference_[i];
        na += static_cast<double>(out[i]) * out[i];
        nb += static_cast<double>(reference_[i]) * reference_[i];
      }
      r.agreement = (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
      const double need = spec.qk_bits == 4 ? 0.98 : 0.998;
      if (!(r.agreement >= need)) {
        r.problem = "output disagrees with the heuristic default's (cosine " + std::to_string(r.agreement) +
                    " < " + std::to_string(need) + ")";
        return r;
      }
    }
    r.ok = true;
    return r;
  } catch (const Error& e) {
    // A launch the driver refused leaves the context usable: reject this candidate only. A fault
    // inside a kernel makes the context unusable: nothing more can be measured.
    const CUresult st = a.cuCtxSynchronize();
    if (st != CUDA_SUCCESS)
      throw Error(ErrorCode::DriverError, "the CUDA context is unusable after running " + spec.key() + ": " +
                                              base::driver::error_text(st) + " (first error: " + e.what() + ")");
    r.ok = false;
    r.problem = e.what();
    return r;
  }
}

}  // namespace sage2::autotune
