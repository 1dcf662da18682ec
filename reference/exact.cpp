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
  const double sm = opt.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(p.d)));
  if (!std::isfinite(sm) || sm == 0.0) detail::bad_arg("sm_scale=" + std::to_string(sm) + " must be finite and non-zero");
  if (opt.causal != CausalMode::None && opt.causal != CausalMode::TopLeft && opt.causal != CausalMode::BottomRight)
    detail::bad_arg("causal=" + std::to_string(static_cast<int>(opt.causal)) + " is not a CausalMode");

  ExactResult r;
  r.batch = p.batch;
  r.heads = p.q_heads;
  r.q_len = p.q_len;
  r.dim = p.dv;
  r.o.assign(static_cast<std::size_t>(p.batch * p.q_heads * p.q_len * p.dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(p.batch * p.q_heads * p.q_len), 0.0);

  // K and V of every (batch, kv head) in double, loaded once.
  const std::int64_t nk = p.kv_len;
  std::vector<double> kd(static_cast<std::size_t>(p.batch * p.kv_heads * nk * p.d));
  std::vector<double> vd(static_cast<std::size_t>(p.batch * p.kv_heads * nk * p.dv));
  detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
    double* kp = kd.data() + bh * nk * p.d;
    double* vp = vd.data() + bh * nk * p.dv;
    for (std::int64_t n = 0; n < nk; ++n) {
      for (int c = 0; c < p.d; ++c) kp[n * p.d + c] = load(k, b, h, n, c);
      for (int c = 0; c < p.dv; ++c) vp[n * p.dv + c] = load(v, b, h, n, c);
    }
  });

  constexpr std::int64_t kRows = 16;
  const std::int64_t chunks = (p.q_len + kRows - 1) / kRows;
  detail::parallel_for(p.batch * p.q_heads * chunks, opt.threads, [&](std::int64_t item) {
    const std::int64_t chunk = item % chunks;
    const std::int64_t bh = item / chunks;
    const std::int64_t b = bh / p.q_heads, h = bh % p.q_heads;
    const std::int64_t hk = h / p.group;
    const double* kp = kd.data() + (b * p.kv_heads + hk) * nk * p.d;
    const double* vp = vd.data() + (b * p.kv_heads + hk) * nk * p.dv;
    std::vector<double> qrow(static_cast<std::size_t>(p.d)), s(static_cast<std::size_t>(nk)),
        acc(static_cast<std::size_t>(p.dv));
    const std::int64_t i_end = std::min(p.q_len, (chunk + 1) * kRows);
    for (std::int64_t i = chunk * kRows; i < i_end; ++i) {
      // visible keys are a prefix [0, j_end)
      std::int64_t j_end = nk;
      if (opt.causal == CausalMode::TopLeft) j_end = std::min(nk, i + 1);
      if (opt.causal == CausalMode::BottomRight) j_end = std::min(nk, i + nk - p.q_len + 1);
      double* o = r.o.data() + r.index(b, h, i, 0);
      double& lse = r.lse[static_cast<std::size_t>((b * p.q_heads + h) * p.q_len + i)];
      if (j_end <= 0) {
        lse = -std::numeric_limits<double>::infinity();
        continue;   // O stays 0
      }
      for (int c = 0; c < p.d; ++c) qrow[static_cast<std::size_t>(c)] = load(q, b, h, i, c);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < j_end; ++j) {
        s[static_cast<std::size_t>(j)] = sm * dot4(qrow.data(), kp + j * p.d, p.d);
        if (s[static_cast<std::size_t>(j)] > m) m = s[static_cast<std::size_t>(j)];
      }
      // All scores NaN (m stayed -inf) or +Inf: IEEE arithmetic below yields NaN — by design.
      if (m == -std::numeric_limits<double>::infinity()) m = std::numeric_limits<double>::quiet_NaN();
      std::fill(acc.begin(), acc.end(), 0.0);
      double l = 0;
      for (std::int64_t j = 0; j < j_end; ++j) {
        const double e = std::exp(s[static_cast<std::size_t>(j)] - m);
        l += e;
        const double* vr = vp + j * p.dv;
        for (int c = 0; c < p.dv; ++c) acc[static_cast<std::size_t>(c)] += e * vr[c];
      }
      for (int c = 0; c < p.dv; ++c) o[c] = acc[static_cast<std::size_t>(c)] / l;
      lse = m + std::log(l);
    }
  });
  return r;
}

}  // namespace sage2::reference
