// Specification: exact attention (double) on small hand-computable cases — plain softmax, causal
// top-left / bottom-right alignment, GQA/MQA head mapping, LSE, layouts, NaN policy, errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

// q is all zeros → every visible key gets the same score 0, so O_i = mean of the visible v_j and
// LSE_i = log(#visible): the causal masks become directly visible in the numbers.
struct Uniform {
  HostTensor q, k, v;
  Uniform(std::int64_t nq, std::int64_t nk, int hq = 1, int hkv = 1, int d = 4)
      : q(DType::F32, 1, hq, nq, d), k(DType::F32, 1, hkv, nk, d), v(DType::F32, 1, hkv, nk, d) {
    for (int h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < nk; ++j)
        for (int c = 0; c < d; ++c) {
          k.set(0, h, j, c, static_cast<float>(j + c));
          v.set(0, h, j, c, static_cast<float>(100 * h + 10 * j + c));   // v_j,c = 100h + 10j + c
        }
  }
};

double mean_v(std::int64_t first, std::int64_t last, int c, int h = 0) {   // mean over j in [first, last]
  double s = 0;
  for (std::int64_t j = first; j <= last; ++j) s += 100.0 * h + 10.0 * j + c;
  return s / static_cast<double>(last - first + 1);
}

bool throws_invalid(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    return e.code() == ErrorCode::InvalidArgument && std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

}  // namespace

TEST_CASE("exact: two keys, hand-computed softmax, output and LSE") {
  HostTensor q(DType::F32, 1, 1, 1, 2), k(DType::F32, 1, 1, 2, 2), v(DType::F32, 1, 1, 2, 2);
  q.set(0, 0, 0, 0, 1.f);
  k.set(0, 0, 0, 0, 1.f);
  k.set(0, 0, 1, 1, 1.f);
  v.set(0, 0, 0, 0, 1.f);
  v.set(0, 0, 0, 1, 2.f);
  v.set(0, 0, 1, 0, 3.f);
  v.set(0, 0, 1, 1, 4.f);
  AttentionOptions o;
  o.sm_scale = 1.0;
  const ExactResult r = exact_attention(q.ref(), k.ref(), v.ref(), o);
  const double e = std::exp(1.0);
  const double p0 = e / (e + 1), p1 = 1 / (e + 1);
  CHECK(r.o[r.index(0, 0, 0, 0)] == doctest::Approx(p0 * 1 + p1 * 3).epsilon(1e-14));
  CHECK(r.o[r.index(0, 0, 0, 1)] == doctest::Approx(p0 * 2 + p1 * 4).epsilon(1e-14));
  CHECK(r.lse[0] == doctest::Approx(std::log(e + 1)).epsilon(1e-14));
  // default sm_scale = 1/sqrt(d): the scores are 1/sqrt(2) and 0
  const ExactResult r2 = exact_attention(q.ref(), k.ref(), v.ref());
  const double s = 1 / std::sqrt(2.0);
  CHECK(r2.lse[0] == doctest::Approx(std::log(std::exp(s) + 1)).epsilon(1e-14));
}

TEST_CASE("exact: causal top-left vs bottom-right with q_len < kv_len") {
  Uniform u(3, 5);
  AttentionOptions o;
  o.causal = CausalMode::None;
  ExactResult r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 3; ++i) CHECK(r.o[r.index(0, 0, i, 1)] == doctest::Approx(mean_v(0, 4, 1)));
  o.causal = CausalMode::TopLeft;   // query i sees keys 0..i
  r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 3; ++i) {
    CHECK(r.o[r.index(0, 0, i, 2)] == doctest::Approx(mean_v(0, i, 2)));
    CHECK(r.lse[static_cast<std::size_t>(i)] == doctest::Approx(std::log(i + 1.0)));
  }
  o.causal = CausalMode::BottomRight;   // query i sees keys 0..i+2
  r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 3; ++i) {
    CHECK(r.o[r.index(0, 0, i, 3)] == doctest::Approx(mean_v(0, i + 2, 3)));
    CHECK(r.lse[static_cast<std::size_t>(i)] == doctest::Approx(std::log(i + 3.0)));
  }
}

TEST_CASE("exact: causal with q_len > kv_len; bottom-right rows without keys give O = 0, LSE = -inf") {
  Uniform u(5, 3);
  AttentionOptions o;
  o.causal = CausalMode::TopLeft;   // row i sees keys 0..min(i, 2)
  ExactResult r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 5; ++i) CHECK(r.o[r.index(0, 0, i, 0)] == doctest::Approx(mean_v(0, std::min(i, 2), 0)));
  o.causal = CausalMode::BottomRight;   // row i sees keys 0..i-2
  r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < 4; ++c) CHECK(r.o[r.index(0, 0, i, c)] == 0.0);
    CHECK(r.lse[static_cast<std::size_t>(i)] == -std::numeric_limits<double>::infinity());
  }
  for (int i = 2; i < 5; ++i) {
    CHECK(r.o[r.index(0, 0, i, 1)] == doctest::Approx(mean_v(0, i - 2, 1)));
    CHECK(r.lse[static_cast<std::size_t>(i)] == doctest::Approx(std::log(i - 1.0)));
  }
  // key_visible states the same rule
  CHECK(key_visible(CausalMode::TopLeft, 1, 1, 5, 3));
  CHECK_FALSE(key_visible(CausalMode::TopLeft, 1, 2, 5, 3));
  CHECK(key_visible(CausalMode::BottomRight, 3, 1, 5, 3));
  CHECK_FALSE(key_visible(CausalMode::BottomRight, 3, 2, 5, 3));
  CHECK(key_visible(CausalMode::None, 0, 2, 5, 3));
}

TEST_CASE("exact: GQA and MQA map query head h to kv head h / (Hq / Hkv)") {
  for (int hkv : {1, 2, 4}) {
    Uniform u(2, 3, 4, hkv);
    const ExactResult r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref());
    for (int h = 0; h < 4; ++h) {
      const int kvh = h / (4 / hkv);
      CAPTURE(hkv);
      CAPTURE(h);
      CHECK(r.o[r.index(0, h, 1, 2)] == doctest::Approx(mean_v(0, 2, 2, kvh)));
    }
  }
}

TEST_CASE("exact: LSE is log Σ exp(s) on a random case, and NHD equals HND") {
  auto hnd = make_gaussian(7, DType::F16, 2, 2, 1, 9, 11, 24, false);
  auto nhd = make_gaussian(7, DType::F16, 2, 2, 1, 9, 11, 24, true);
  const ExactResult a = exact_attention(hnd.q.ref(), hnd.k.ref(), hnd.v.ref());
  const ExactResult b = exact_attention(nhd.q.ref(), nhd.k.ref(), nhd.v.ref());
  CHECK(a.o == b.o);
  CHECK(a.lse == b.lse);
  // direct evaluation for one row
  const int bb = 1, h = 1, i = 4;
  double s[11], m = -1e300;
  for (int j = 0; j < 11; ++j) {
    double dot = 0;
    for (int c = 0; c < 24; ++c) dot += double(hnd.q.get(bb, h, i, c)) * hnd.k.get(bb, 0, j, c);
    s[j] = dot / std::sqrt(24.0);
    m = std::max(m, s[j]);
  }
  double l = 0, o0 = 0;
  for (int j = 0; j < 11; ++j) {
    l += std::exp(s[j] - m);
    o0 += std::exp(s[j] - m) * hnd.v.get(bb, 0, j, 0);
  }
  CHECK(a.lse[static_cast<std::size_t>((bb * 2 + h) * 9 + i)] == doctest::Approx(m + std::log(l)).epsilon(1e-13));
  CHECK(a.o[a.index(bb, h, i, 0)] == doctest::Approx(o0 / l).epsilon(1e-13));
}

TEST_CASE("exact: NaN policy — masked keys are never read, visible poison gives NaN rows") {
  Uniform u(4, 4);
  u.v.set(0, 0, 3, 1, std::numeric_limits<float>::quiet_NaN());   // key 3: visible only to row 3 (top-left)
  AttentionOptions o;
  o.causal = CausalMode::TopLeft;
  ExactResult r = exact_attention(u.q.ref(), u.k.ref(), u.v.ref(), o);
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 4; ++c) CHECK(std::isfinite(r.o[r.index(0, 0, i, c)]));
  CHECK(std::isnan(r.o[r.index(0, 0, 3, 1)]));
  CHECK(std::isfinite(r.o[r.index(0, 0, 3, 0)]));   // NaN in v only poisons its channel
  Uniform w(4, 4);
  w.q.set(0, 0, 2, 0, std::numeric_limits<float>::quiet_NaN());   // poisons row 2 only
  r = exact_attention(w.q.ref(), w.k.ref(), w.v.ref());
  for (int i = 0; i < 4; ++i) CHECK(std::isnan(r.o[r.index(0, 0, i, 0)]) == (i == 2));
  CHECK(std::isnan(r.lse[2]));
  Uniform z(4, 4);
  z.k.set(0, 0, 1, 0, std::numeric_limits<float>::infinity());    // q = 0: 0·Inf = NaN score
  r = exact_attention(z.q.ref(), z.k.ref(), z.v.ref(), o);
  CHECK(std::isfinite(r.o[r.index(0, 0, 0, 0)]));
  for (int i = 1; i < 4; ++i) CHECK(std::isnan(r.o[r.index(0, 0, i, 0)]));
}

TEST_CASE("exact: invalid input is rejected with the argument named") {
  auto in = make_gaussian(1, DType::F16, 1, 4, 2, 8, 8, 16);
  TensorRef q = in.q.ref(), k = in.k.ref(), v = in.v.ref();
  TensorRef bad = q;
  bad.data = nullptr;
  CHECK(throws_invalid([&] { exact_attention(bad, k, v); }, "q.data"));
  bad = k;
  bad.stride_dim = 2;
  CHECK(throws_invalid([&] { exact_attention(q, bad, v); }, "k.stride_dim=2"));
  bad = q;
  bad.heads = 3;
  CHECK(throws_invalid([&] { exact_attention(bad, k, v); }, "q.heads=3"));
  bad = v;
  bad.seq = 7;
  CHECK(throws_invalid([&] { exact_attention(q, k, bad); }, "v.seq=7"));
  bad = k;
  bad.dim = 15;
  CHECK(throws_invalid([&] { exact_attention(q, bad, v); }, "k.dim=15"));
  AttentionOptions o;
  o.sm_scale = std::numeric_limits<double>::infinity();
  CHECK(throws_invalid([&] { exact_attention(q, k, v, o); }, "sm_scale"));
  o = {};
  o.causal = static_cast<CausalMode>(9);
  CHECK(throws_invalid([&] { exact_attention(q, k, v, o); }, "causal=9"));
}
