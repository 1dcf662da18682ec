// Host tensors, validation, threading, synthetic inputs and accuracy metrics of the reference.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "reference/internal.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace detail {

void bad_arg(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& fn) {
  if (n <= 0) return;
  if (threads < 0) bad_arg("threads=" + std::to_string(threads) + " must be >= 0");
  unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) hw = 1;
  std::int64_t t = threads > 0 ? threads : static_cast<std::int64_t>(hw);
  t = std::min<std::int64_t>(t, n);
  if (t <= 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (;;) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(t - 1));
  for (std::int64_t w = 1; w < t; ++w) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

Problem check_qkv(const TensorRef& q, const TensorRef& k, const TensorRef& v) {
  validate_tensor(q, "q");
  validate_tensor(k, "k");
  validate_tensor(v, "v");
  auto s = [](std::int64_t x) { return std::to_string(x); };
  if (k.batch != q.batch || v.batch != q.batch)
    bad_arg("batch mismatch: q.batch=" + s(q.batch) + " k.batch=" + s(k.batch) + " v.batch=" + s(v.batch));
  if (k.dim != q.dim) bad_arg("head dim mismatch: q.dim=" + s(q.dim) + " k.dim=" + s(k.dim));
  if (v.heads != k.heads) bad_arg("kv heads mismatch: k.heads=" + s(k.heads) + " v.heads=" + s(v.heads));
  if (v.seq != k.seq) bad_arg("kv length mismatch: k.seq=" + s(k.seq) + " v.seq=" + s(v.seq));
  if (q.heads % k.heads != 0)
    bad_arg("q.heads=" + s(q.heads) + " is not a multiple of k.heads=" + s(k.heads) + " (GQA/MQA)");
  if (q.dim > (1 << 20) || v.dim > (1 << 20)) bad_arg("head dim=" + s(q.dim) + " is too large");
  Problem p;
  static_cast<kernels::ProblemShape&>(p) = {q.batch, q.heads, k.heads, q.seq, k.seq, static_cast<int>(q.dim)};
  p.dv = static_cast<int>(v.dim);
  return p;
}

void load_head(const TensorRef& t, std::int64_t b, std::int64_t h, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(t.seq * t.dim));
  for (std::int64_t n = 0; n < t.seq; ++n)
    for (std::int64_t c = 0; c < t.dim; ++c) out[static_cast<std::size_t>(n * t.dim + c)] = load(t, b, h, n, c);
}

void channel_stats(const std::vector<float>& x, std::int64_t n, int d, float* sum, float* mn, float* mx) {
  std::vector<double> acc(static_cast<std::size_t>(d), 0.0);
  for (int c = 0; c < d; ++c) {
    mn[c] = std::numeric_limits<float>::infinity();
    mx[c] = -std::numeric_limits<float>::infinity();
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = x.data() + i * d;
    for (int c = 0; c < d; ++c) {
      acc[static_cast<std::size_t>(c)] += row[c];
      // NaN propagates into min/max as well (NaN/Inf propagate through the stage's statistics)
      const float v = row[c];
      if (!std::isnan(mn[c]) && (std::isnan(v) || v < mn[c])) mn[c] = v;
      if (!std::isnan(mx[c]) && (std::isnan(v) || v > mx[c])) mx[c] = v;
    }
  }
  for (int c = 0; c < d; ++c) sum[c] = static_cast<float>(acc[static_cast<std::size_t>(c)]);
}

void quantize_grouped(const float* x, std::int64_t rows, int d, std::int64_t ld_x, int d_pad,
                      const int* group_of_row, int n_groups, int R, std::int8_t* codes, float* scales,
                      float* margins) {
  std::vector<float> amax(static_cast<std::size_t>(n_groups), 0.f);
  for (std::int64_t r = 0; r < rows; ++r) {
    float& a = amax[static_cast<std::size_t>(group_of_row[r])];
    const float* row = x + r * ld_x;
    for (int c = 0; c < d; ++c) a = nan_max(a, std::fabs(row[c]));
  }
  std::vector<float> inv(static_cast<std::size_t>(n_groups));
  for (int g = 0; g < n_groups; ++g) {
    scales[g] = group_scale(amax[static_cast<std::size_t>(g)], R);
    inv[static_cast<std::size_t>(g)] = group_inv(amax[static_cast<std::size_t>(g)], R);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float iv = inv[static_cast<std::size_t>(group_of_row[r])];
    const float* row = x + r * ld_x;
    std::int8_t* out = codes + r * d_pad;
    float* mrow = margins ? margins + r * d_pad : nullptr;
    for (int c = 0; c < d; ++c) {
      out[c] = static_cast<std::int8_t>(quantize_int(row[c], iv, R));
      if (mrow) {
        float t = row[c] * iv;
        if (std::isnan(t)) t = 0.f;
        mrow[c] = std::isnan(row[c] * iv) ? std::numeric_limits<float>::infinity() : int_margin(t, R);
      }
    }
    for (int c = d; c < d_pad; ++c) {
      out[c] = 0;
      if (mrow) mrow[c] = std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace detail

using detail::bad_arg;

// ---------------------------------------------------------------------------------------------
float load(const TensorRef& t, std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) noexcept {
  const std::int64_t off = b * t.stride_batch + h * t.stride_head + n * t.stride_seq + c;
  switch (t.dtype) {
    case DType::F16: return half_to_float(static_cast<const std::uint16_t*>(t.data)[off]);
    case DType::BF16: return bf16_to_float(static_cast<const std::uint16_t*>(t.data)[off]);
    case DType::F32: return static_cast<const float*>(t.data)[off];
  }
  return 0.f;
}

void validate_tensor(const TensorRef& t, const char* name) {
  const std::string n(name);
  auto s = [](std::int64_t x) { return std::to_string(x); };
  if (t.data == nullptr) bad_arg(n + ".data=null");
  if (t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F32)
    bad_arg(n + ".dtype=" + s(static_cast<int>(t.dtype)) + " is not f16/bf16/f32");
  if (t.batch < 1) bad_arg(n + ".batch=" + s(t.batch) + " must be >= 1");
  if (t.heads < 1) bad_arg(n + ".heads=" + s(t.heads) + " must be >= 1");
  if (t.seq < 1) bad_arg(n + ".seq=" + s(t.seq) + " must be >= 1");
  if (t.dim < 1) bad_arg(n + ".dim=" + s(t.dim) + " must be >= 1");
  if (t.stride_dim != 1) bad_arg(n + ".stride_dim=" + s(t.stride_dim) + " must be 1");
}

bool key_visible(CausalMode mode, std::int64_t i, std::int64_t j, std::int64_t q_len, std::int64_t kv_len) noexcept {
  switch (mode) {
    case CausalMode::None: return true;
    case CausalMode::TopLeft: return j <= i;
    case CausalMode::BottomRight: return j <= i + kv_len - q_len;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
HostTensor::HostTensor(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seq,
                       std::int64_t dim, bool nhd)
    : dtype_(dtype), b_(batch), h_(heads), n_(seq), d_(dim), nhd_(nhd) {
  if (batch < 1 || heads < 1 || seq < 1 || dim < 1)
    bad_arg("HostTensor sizes must be >= 1, got [" + std::to_string(batch) + "," + std::to_string(heads) +
            "," + std::to_string(seq) + "," + std::to_string(dim) + "]");
  const auto count = static_cast<std::size_t>(batch * heads * seq * dim);
  if (dtype == DType::F32)
    f32_.assign(count, 0.f);
  else if (dtype == DType::F16 || dtype == DType::BF16)
    bits_.assign(count, 0);
  else
    bad_arg("HostTensor dtype=" + std::to_string(static_cast<int>(dtype)) + " is not f16/bf16/f32");
}

TensorRef HostTensor::ref() const {
  const void* p = dtype_ == DType::F32 ? static_cast<const void*>(f32_.data()) : static_cast<const void*>(bits_.data());
  return nhd_ ? TensorRef::nhd(p, dtype_, b_, h_, n_, d_) : TensorRef::hnd(p, dtype_, b_, h_, n_, d_);
}

std::size_t HostTensor::offset(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) const {
  if (nhd_) return static_cast<std::size_t>(((b * n_ + n) * h_ + h) * d_ + c);
  return static_cast<std::size_t>(((b * h_ + h) * n_ + n) * d_ + c);
}

void HostTensor::set(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c, float value) {
  const std::size_t o = offset(b, h, n, c);
  switch (dtype_) {
    case DType::F16: bits_[o] = float_to_half(value); break;
    case DType::BF16: bits_[o] = float_to_bf16(value); break;
    case DType::F32: f32_[o] = value; break;
  }
}

float HostTensor::get(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) const {
  const std::size_t o = offset(b, h, n, c);
  switch (dtype_) {
    case DType::F16: return half_to_float(bits_[o]);
    case DType::BF16: return bf16_to_float(bits_[o]);
    case DType::F32: return f32_[o];
  }
  return 0.f;
}

// ---------------------------------------------------------------------------------------------
namespace {

// splitmix64: small, fast, identical everywhere.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double normal() {   // Box–Muller, one value per call (simple and reproducible)
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
};

// `count` distinct channels out of d (partial Fisher–Yates).
std::vector<std::size_t> distinct_channels(Rng& rng, std::int64_t d, int count) {
  std::vector<std::size_t> all(static_cast<std::size_t>(d));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const auto n = static_cast<std::size_t>(std::min<std::int64_t>(count, d));
  for (std::size_t i = 0; i < n; ++i) std::swap(all[i], all[i + static_cast<std::size_t>(rng.below(d - static_cast<std::int64_t>(i)))]);
  all.resize(n);
  return all;
}

void check_sizes(std::int64_t batch, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t q_len,
                 std::int64_t kv_len, std::int64_t head_dim) {
  if (batch < 1 || q_heads < 1 || kv_heads < 1 || q_len < 1 || kv_len < 1 || head_dim < 1)
    bad_arg("input sizes must be >= 1 (batch=" + std::to_string(batch) + " q_heads=" + std::to_string(q_heads) +
            " kv_heads=" + std::to_string(kv_heads) + " q_len=" + std::to_string(q_len) + " kv_len=" +
            std::to_string(kv_len) + " head_dim=" + std::to_string(head_dim) + ")");
  if (q_heads % kv_heads != 0)
    bad_arg("q_heads=" + std::to_string(q_heads) + " is not a multiple of kv_heads=" + std::to_string(kv_heads));
}

}  // namespace

namespace {

// Q, K and V with iid elements drawn by sample(rng), in the tensors' order (Q, K, V; b, h, n, c).
template <class Sample>
AttentionInputs make_iid(std::uint64_t seed, DType dtype, std::int64_t batch, std::int64_t q_heads,
                         std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len, std::int64_t head_dim,
                         bool nhd, Sample sample) {
  check_sizes(batch, q_heads, kv_heads, q_len, kv_len, head_dim);
  AttentionInputs in{HostTensor(dtype, batch, q_heads, q_len, head_dim, nhd),
                     HostTensor(dtype, batch, kv_heads, kv_len, head_dim, nhd),
                     HostTensor(dtype, batch, kv_heads, kv_len, head_dim, nhd)};
  Rng rng(seed);
  for (HostTensor* t : {&in.q, &in.k, &in.v})
    for (std::int64_t b = 0; b < t->batch(); ++b)
      for (std::int64_t h = 0; h < t->heads(); ++h)
        for (std::int64_t n = 0; n < t->seq(); ++n)
          for (std::int64_t c = 0; c < t->dim(); ++c) t->set(b, h, n, c, static_cast<float>(sample(rng)));
  return in;
}

}  // namespace

AttentionInputs make_gaussian(std::uint64_t seed, DType dtype, std::int64_t batch, std::int64_t q_heads,
                              std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len,
                              std::int64_t head_dim, bool nhd) {
  return make_iid(seed, dtype, batch, q_heads, kv_heads, q_len, kv_len, head_dim, nhd,
                  [](Rng& rng) { return rng.normal(); });
}

AttentionInputs make_student_t(std::uint64_t seed, DType dtype, std::int64_t batch, std::int64_t q_heads,
                               std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len,
                               std::int64_t head_dim, int dof, bool nhd) {
  if (dof < 1 || dof > 64) bad_arg("dof=" + std::to_string(dof) + " outside 1..64");
  // t = Z / sqrt(χ²_dof / dof), χ²_dof a sum of dof squared normals.
  return make_iid(seed, dtype, batch, q_heads, kv_heads, q_len, kv_len, head_dim, nhd, [dof](Rng& rng) {
    const double z = rng.normal();
    double chi2 = 0;
    for (int i = 0; i < dof; ++i) {
      const double g = rng.normal();
      chi2 += g * g;
    }
    return z / std::sqrt(chi2 / dof);
  });
}

AttentionInputs make_activation_like(std::uint64_t seed, DType dtype, std::int64_t batch,
                                     std::int64_t q_heads, std::int64_t kv_heads, std::int64_t q_len,
                                     std::int64_t kv_len, std::int64_t head_dim,
                                     const ActivationModel& m, bool nhd) {
  check_sizes(batch, q_heads, kv_heads, q_len, kv_len, head_dim);
  if (m.latent_rank < 0 || m.outlier_channels < 0 || m.v_outlier_channels < 0)
    bad_arg("ActivationModel counts must be >= 0");
  AttentionInputs in{HostTensor(dtype, batch, q_heads, q_len, head_dim, nhd),
                     HostTensor(dtype, batch, kv_heads, kv_len, head_dim, nhd),
                     HostTensor(dtype, batch, kv_heads, kv_len, head_dim, nhd)};
  Rng rng(seed);
  const auto d = head_dim;
  const int r = m.latent_rank;
  const std::int64_t max_len = std::max(q_len, kv_len);
  for (std::int64_t b = 0; b < batch; ++b) {
    // Shared per-token latent z_n (the "content" of token n, seen by Q and K alike): queries
    // attend to keys of similar tokens.
    std::vector<double> z(static_cast<std::size_t>(max_len * r));
    for (auto& x : z) x = rng.normal();
    for (std::int64_t hk = 0; hk < kv_heads; ++hk) {
      // K projection of the latent and K channel bias (with outlier channels).
      auto make_bias = [&](double scale, int outliers, double factor) {
        std::vector<double> bias(static_cast<std::size_t>(d));
        for (auto& x : bias) x = scale * rng.normal();
        for (const std::size_t c : distinct_channels(rng, d, outliers)) {
          bias[c] *= factor;
          if (std::fabs(bias[c]) < scale * factor * 0.5) bias[c] = (bias[c] < 0 ? -1 : 1) * scale * factor * 0.5;
        }
        return bias;
      };
      auto make_proj = [&]() {
        std::vector<double> a(static_cast<std::size_t>(r * d));
        for (auto& x : a) x = m.latent_scale * rng.normal() / std::sqrt(std::max(1, r));
        return a;
      };
      const std::vector<double> kbias = make_bias(m.qk_bias, m.outlier_channels, m.outlier_factor);
      const std::vector<double> kproj = make_proj();
      for (std::int64_t n = 0; n < kv_len; ++n)
        for (std::int64_t c = 0; c < d; ++c) {
          double x = kbias[static_cast<std::size_t>(c)] + m.qk_noise * rng.normal();
          for (int t = 0; t < r; ++t) x += z[static_cast<std::size_t>(n * r + t)] * kproj[static_cast<std::size_t>(t * d + c)];
          in.k.set(b, hk, n, c, static_cast<float>(x));
        }
      // V: channel bias, a few channels with a large bias of either sign, token noise.
      std::vector<double> vbias(static_cast<std::size_t>(d));
      for (auto& x : vbias) x = m.v_bias * rng.normal();
      for (const std::size_t c : distinct_channels(rng, d, m.v_outlier_channels))
        vbias[c] = (rng.uniform() < 0.5 ? -1 : 1) * m.v_outlier_bias;
      std::vector<double> vproj(static_cast<std::size_t>(r * d));
      for (auto& x : vproj) x = m.v_latent_scale * rng.normal() / std::sqrt(std::max(1, r));
      for (std::int64_t n = 0; n < kv_len; ++n)
        for (std::int64_t c = 0; c < d; ++c) {
          double x = vbias[static_cast<std::size_t>(c)] + m.v_noise * rng.normal();
          for (int t = 0; t < r; ++t) x += z[static_cast<std::size_t>(n * r + t)] * vproj[static_cast<std::size_t>(t * d + c)];
          in.v.set(b, hk, n, c, static_cast<float>(x));
        }
      // The query heads of this kv head: Q projection aligned with K's (so Q·K rewards similar
      // latents), own channel bias with outliers.
      for (std::int64_t g = 0; g < q_heads / kv_heads; ++g) {
        const std::int64_t hq = hk * (q_heads / kv_heads) + g;
        const std::vector<double> qbias = make_bias(m.qk_bias, m.outlier_channels, m.outlier_factor);
        std::vector<double> qproj = kproj;
        for (auto& x : qproj) x += 0.3 * m.latent_scale * rng.normal() / std::sqrt(std::max(1, r));
        for (std::int64_t n = 0; n < q_len; ++n)
          for (std::int64_t c = 0; c < d; ++c) {
            double x = qbias[static_cast<std::size_t>(c)] + m.qk_noise * rng.normal();
            for (int t = 0; t < r; ++t) x += z[static_cast<std::size_t>(n * r + t)] * qproj[static_cast<std::size_t>(t * d + c)];
            in.q.set(b, hq, n, c, static_cast<float>(x));
          }
      }
    }
  }
  return in;
}

// ---------------------------------------------------------------------------------------------
namespace {
template <class T>
Metrics compare_impl(const double* ref, const T* out, std::size_t n) {
  Metrics m;
  m.count = static_cast<std::int64_t>(n);
  double dot = 0, rr = 0, oo = 0, l1 = 0, l1ref = 0, se = 0, mx = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double o = static_cast<double>(out[i]);
    const double r = ref[i];
    if (!std::isfinite(o)) {
      ++m.nonfinite;
      continue;
    }
    dot += r * o;
    rr += r * r;
    oo += o * o;
    const double e = std::fabs(r - o);
    l1 += e;
    l1ref += std::fabs(r);
    se += e * e;
    mx = std::max(mx, e);
  }
  if (m.nonfinite > 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    m.cos_sim = m.rel_l1 = m.rmse = m.max_abs = nan;
    return m;
  }
  m.cos_sim = (rr > 0 && oo > 0) ? dot / std::sqrt(rr * oo) : (rr == oo ? 1.0 : 0.0);
  m.rel_l1 = l1ref > 0 ? l1 / l1ref : (l1 == 0 ? 0.0 : std::numeric_limits<double>::infinity());
  m.rmse = n ? std::sqrt(se / static_cast<double>(n)) : 0.0;
  m.max_abs = mx;
  return m;
}
}  // namespace

Metrics compare(const double* ref, const float* out, std::size_t n) { return compare_impl(ref, out, n); }
Metrics compare(const double* ref, const double* out, std::size_t n) { return compare_impl(ref, out, n); }
Metrics compare(const std::vector<double>& ref, const std::vector<float>& out) {
  if (ref.size() != out.size())
    bad_arg("compare: ref.size()=" + std::to_string(ref.size()) + " != out.size()=" + std::to_string(out.size()));
  return compare_impl(ref.data(), out.data(), ref.size());
}
Metrics compare(const std::vector<double>& ref, const std::vector<double>& out) {
  if (ref.size() != out.size())
    bad_arg("compare: ref.size()=" + std::to_string(ref.size()) + " != out.size()=" + std::to_string(out.size()));
  return compare_impl(ref.data(), out.data(), ref.size());
}

}  // namespace sage2::reference
