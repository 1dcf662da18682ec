// Exact attention in double precision: the ground truth of every accuracy measurement.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/internal.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace {

double dot4(const double* a, const double* b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int c = 0;
  for (; c + 4 <= n; c += 4) {
    s0 += a[c] * b[c];
    s1 += a[c + 1] * b[c + 1];
    s2 += a[c + 2] * b[c + 2];
    s3 += a[c + 3] * b[c + 3];
  }
  for (; c < n; ++c) s0 += a[c] * b[c];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

ExactResult exact_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                            const AttentionOptions& opt) {
  const detail::Problem p = detail::check_qkv(q, k, v);
  const double sm = opt.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  if (!std::isfinite(sm) || sm == 0.0) detail::bad_arg("sm_scale=" + std::to_string(sm) + " must be finite and non-zero");
  if (opt.causal != CausalMode::None && opt.causal != CausalMode::TopLeft && opt.causal != CausalMode::BottomRight)
    detail::bad_arg("causal=" + std::to_string(static_cast<int>(opt.causal)) + " is not a CausalMode");

  ExactResult r_out;
  r_out.batch = p.batch;
  r_out.heads = p.q_heads;
  r_out.q_len = p.q_len;
  r_out.dim = p.dv;
  r_out.o.assign(static_cast<std::size_t>(p.batch * p.q_heads * p.q_len * p.dv), 0.0);
  r_out.lse.assign(static_cast<std::size_t>(p.batch * p.q_heads * p.q_len), 0.0);

  // K and V of every (batch, kv head) in double, loaded once.
  const std::int64_t nk = p.kv_len;
  std::vector<double> kd(static_cast<std::size_t>(p.batch * p.kv_heads * nk * p.head_dim));
  std::vector<double> vd(static_cast<std::size_t>(p.batch * p.kv_heads * nk * p.dv));
  detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
    double* kp = kd.data() + bh * nk * p.head_dim;
    double* vp = vd.data() + bh * nk * p.dv;
    for (std::int64_t n = 0; n < nk; ++n) {
      for (int c = 0; c < p.head_dim; ++c) kp[n * p.head_dim + c] = load(k, b, h, n, c);
      for (int c = 0; c < p.dv; ++c) vp[n * p.dv + c] = load(v, b, h, n, c);
    }
  });

  constexpr std::int64_t kRows = 16;
  const std::int64_t chunks = (p.q_len + kRows - 1) / kRows;
  detail::parallel_for(p.batch * p.q_heads * chunks, opt.threads, [&](std::int64_t item) {
    const std::int64_t chunk = item % chunks;
    const std::int64_t bh = item / chunks;
    const std::int64_t b = bh / p.q_heads, h = bh % p.q_heads;
    const std::int64_t hk = h / p.group();
    const double* kp = kd.data() + (b * p.kv_heads + hk) * nk * p.head_dim;
    const double* vp = vd.data() + (b * p.kv_heads + hk) * nk * p.dv;
    // kRows query rows at a time, keys in the outer loop: each K/V row is read once per chunk.
    const std::int64_t i0 = chunk * kRows;
    const auto rows = static_cast<int>(std::min(p.q_len, i0 + kRows) - i0);
    auto S = [](std::int64_t x) { return static_cast<std::size_t>(x); };
    std::vector<double> qrows(S(rows * p.head_dim)), s(S(rows * nk)), acc(S(rows * p.dv), 0.0);
    std::vector<std::int64_t> j_end(S(rows));
    std::int64_t j_max = 0;
    for (int r = 0; r < rows; ++r) {
      const std::int64_t i = i0 + r;
      std::int64_t e = nk;   // visible keys are a prefix [0, e)
      if (opt.causal == CausalMode::TopLeft) e = std::min(nk, i + 1);
      if (opt.causal == CausalMode::BottomRight) e = std::min(nk, i + nk - p.q_len + 1);
      j_end[S(r)] = e;
      j_max = std::max(j_max, e);
      for (int c = 0; c < p.head_dim; ++c) qrows[S(r * p.head_dim + c)] = load(q, b, h, i, c);
    }
    for (std::int64_t j = 0; j < j_max; ++j)
      for (int r = 0; r < rows; ++r)
        if (j < j_end[S(r)]) s[S(r * nk + j)] = sm * dot4(qrows.data() + r * p.head_dim, kp + j * p.head_dim, p.head_dim);
    std::vector<double> l(S(rows), 0.0), m(S(rows));
    for (int r = 0; r < rows; ++r) {
      double mr = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < j_end[S(r)]; ++j) mr = std::max(mr, s[S(r * nk + j)]);   // NaN is skipped
      // All scores NaN (mr stayed -inf) or some +Inf: IEEE arithmetic below yields NaN — by design.
      if (mr == -std::numeric_limits<double>::infinity()) mr = std::numeric_limits<double>::quiet_NaN();
      m[S(r)] = mr;
      double lr = 0;
      for (std::int64_t j = 0; j < j_end[S(r)]; ++j) {
        double& x = s[S(r * nk + j)];
        x = std::exp(x - mr);
        lr += x;
      }
      l[S(r)] = lr;
    }
    for (std::int64_t j = 0; j < j_max; ++j) {
      const double* vr = vp + j * p.dv;
      for (int r = 0; r < rows; ++r) {
        if (j >= j_end[S(r)]) continue;
        const double e = s[S(r * nk + j)];
        double* ar = acc.data() + r * p.dv;
        for (int c = 0; c < p.dv; ++c) ar[c] += e * vr[c];
      }
    }
    for (int r = 0; r < rows; ++r) {
      const std::int64_t i = i0 + r;
      double* o = r_out.o.data() + r_out.index(b, h, i, 0);
      double& lse = r_out.lse[S((b * p.q_heads + h) * p.q_len + i)];
      if (j_end[S(r)] <= 0) {
        lse = -std::numeric_limits<double>::infinity();
        continue;   // O stays 0
      }
      for (int c = 0; c < p.dv; ++c) o[c] = acc[S(r * p.dv + c)] / l[S(r)];
      lse = m[S(r)] + std::log(l[S(r)]);
    }
  });
  return r_out;
}

}  // namespace sage2::reference
