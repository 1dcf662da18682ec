// Specification of the NaN / Inf policy (include/sage2/reference.hpp, project issue #4) on the
// CPU reference:
//  - quantize_stage: non-finite inputs read as 0 in every statistic (stats, means, q·k̄, scales
//    are bit-identical to those of the same inputs with the bad elements set to 0), their codes
//    are 0, and the flags q_bad / k_first_bad / v_first_bad say where they were;
//  - emulate_attention: the finite/non-finite pattern of O and LSE is the policy's rule, element
//    for element; that rule equals exact_attention's pattern except on the documented -Inf rows
//    (a visible key with ±Inf whose IEEE score is -Inf: exact gives it weight 0, sage2 NaN);
//    every finite output is bit-identical to the emulation of the zeroed inputs and close to
//    exact attention;
//  under all three causal modes, GQA, int4/int8, smoothing on and off, q_len != kv_len, with
//  today's statistics and the one-pass ones (kv_tile_statistics).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Plant {
  char t;   // 'q', 'k', 'v'
  std::int64_t b, h, n;
  int c;    // channel; -1: the whole row
  float value;
};

void apply(AttentionInputs& in, const std::vector<Plant>& plants, bool zero) {
  for (const Plant& p : plants) {
    HostTensor& t = p.t == 'q' ? in.q : p.t == 'k' ? in.k : in.v;
    if (p.b >= t.batch()) continue;   // planted in a batch entry this run does not have
    const int c0 = p.c < 0 ? 0 : p.c, c1 = p.c < 0 ? static_cast<int>(t.dim()) : p.c + 1;
    for (int c = c0; c < c1; ++c) t.set(p.b, p.h, p.n, c, zero ? 0.f : p.value);
  }
}

bool row_nonfinite(const TensorRef& t, std::int64_t b, std::int64_t h, std::int64_t n) {
  for (std::int64_t c = 0; c < t.dim; ++c)
    if (!std::isfinite(load(t, b, h, n, c))) return true;
  return false;
}

// The policy's pattern computed from the raw inputs (independently of the stage's flags), and
// the rows where exact attention legitimately differs (every visible bad key scores -Inf in IEEE
// double and some visible key is good).
struct Pattern {
  std::int64_t B = 0, H = 0, N = 0, D = 0;
  std::vector<std::uint8_t> o_nan;     // [B][H][N][D]
  std::vector<std::uint8_t> lse_nan;   // [B][H][N]
  std::vector<std::uint8_t> no_key;    // [B][H][N]  n_vis = 0: O = 0, LSE = -inf
  std::vector<std::uint8_t> divergent; // [B][H][N]
  std::vector<std::uint8_t> v_nan;     // [B][H][N][D]  the V part of the rule alone
  std::int64_t nan_rows = 0, nan_elems = 0, finite_elems = 0, divergent_rows = 0;
  std::size_t o(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>(((b * H + h) * N + i) * D + c);
  }
  std::size_t r(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>((b * H + h) * N + i);
  }
};

Pattern predict(const TensorRef& q, const TensorRef& k, const TensorRef& v, CausalMode mode, double sm) {
  Pattern P;
  P.B = q.batch;
  P.H = q.heads;
  P.N = q.seq;
  P.D = v.dim;
  const std::int64_t nk = k.seq, group = q.heads / k.heads;
  P.o_nan.assign(static_cast<std::size_t>(P.B * P.H * P.N * P.D), 0);
  P.v_nan = P.o_nan;
  P.lse_nan.assign(static_cast<std::size_t>(P.B * P.H * P.N), 0);
  P.no_key = P.divergent = P.lse_nan;
  for (std::int64_t b = 0; b < P.B; ++b)
    for (std::int64_t h = 0; h < P.H; ++h) {
      const std::int64_t hk = h / group;
      std::vector<std::uint8_t> kbad(static_cast<std::size_t>(nk));
      for (std::int64_t j = 0; j < nk; ++j) kbad[static_cast<std::size_t>(j)] = row_nonfinite(k, b, hk, j);
      for (std::int64_t i = 0; i < P.N; ++i) {
        std::int64_t n_vis = 0;
        while (n_vis < nk && key_visible(mode, i, n_vis, P.N, nk)) ++n_vis;   // visible keys: a prefix
        if (n_vis == 0) {
          P.no_key[P.r(b, h, i)] = 1;
          continue;
        }
        const bool qbad = row_nonfinite(q, b, h, i);
        bool any_bad = false, all_minus_inf = true, any_good = false;
        for (std::int64_t j = 0; j < n_vis; ++j) {
          if (!kbad[static_cast<std::size_t>(j)]) {
            any_good = true;
            continue;
          }
          any_bad = true;
          double s = 0;
          for (std::int64_t c = 0; c < q.dim; ++c) s += double(load(q, b, h, i, c)) * double(load(k, b, hk, j, c));
          s *= sm;
          if (!(std::isinf(s) && s < 0)) all_minus_inf = false;
        }
        for (std::int64_t c = 0; c < P.D; ++c)
          for (std::int64_t j = 0; j < n_vis; ++j)
            if (!std::isfinite(load(v, b, hk, j, c))) {
              P.v_nan[P.o(b, h, i, c)] = 1;
              break;
            }
        const bool row_bad = qbad || any_bad;
        if (row_bad) {
          P.lse_nan[P.r(b, h, i)] = 1;
          ++P.nan_rows;
        }
        if (!qbad && any_bad && all_minus_inf && any_good) {
          P.divergent[P.r(b, h, i)] = 1;
          ++P.divergent_rows;
        }
        for (std::int64_t c = 0; c < P.D; ++c) {
          const bool bad = row_bad || P.v_nan[P.o(b, h, i, c)];
          P.o_nan[P.o(b, h, i, c)] = bad;
          (bad ? P.nan_elems : P.finite_elems) += 1;
        }
      }
    }
  return P;
}

KernelConfig make_spec(int bits, int d, int bq, int bk, int warps, bool sq, bool sk, bool sv, CausalMode causal,
                       DType dt) {
  KernelConfig s;
  s.family = AttentionFamily::Mma;
  s.arch = "sm_90a";
  s.qk_bits = bits;
  s.head_dim = d;
  s.tile = {bq, bk, warps, 1};
  s.smooth_q = sq;
  s.smooth_k = sk;
  s.smooth_v = sv;
  s.causal = causal;
  s.in_dtype = s.out_dtype = dt;
  return s;
}

struct Case {
  const char* name;
  int bits, d;
  bool sq, sk, sv;
  DType dt;
  std::int64_t hq, hkv, nq, nk;
  std::vector<Plant> plants;
};

// Planted cases (b, h index the tensor's own heads: kv heads for K/V). Keys are planted in the
// middle of the sequence so that causal masking hides them from the early rows.
std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"q NaN, q +Inf, q -Inf rows", 8, 64, false, true, false, DType::F16, 8, 2, 100, 100,
               {{'q', 0, 1, 5, 3, kNaN}, {'q', 0, 6, 70, 0, kInf}, {'q', 1, 3, 99, 63, -kInf}}});
  v.push_back({"k NaN (row 37 of kv head 1)", 8, 64, false, true, false, DType::BF16, 8, 2, 100, 100,
               {{'k', 0, 1, 37, 10, kNaN}}});
  v.push_back({"k +Inf / -Inf elements", 8, 32, false, true, true, DType::F16, 4, 1, 90, 130,
               {{'k', 0, 0, 64, 2, kInf}, {'k', 1, 0, 100, 7, -kInf}}});
  v.push_back({"k whole row +Inf", 4, 64, true, true, false, DType::F16, 4, 1, 120, 120,
               {{'k', 0, 0, 50, -1, kInf}}});
  v.push_back({"v NaN / +Inf / -Inf elements", 8, 40, false, true, false, DType::BF16, 8, 2, 75, 75,
               {{'v', 0, 0, 20, 5, kNaN}, {'v', 0, 1, 60, 39, kInf}, {'v', 1, 1, 0, 0, -kInf}}});
  v.push_back({"q, k and v at once, smooth q/k/v, int4", 4, 64, true, true, true, DType::F16, 8, 2, 130, 97,
               {{'q', 0, 2, 10, 1, kNaN},
                {'k', 0, 0, 90, 33, kNaN},
                {'k', 1, 1, 5, 0, -kInf},
                {'v', 0, 1, 40, 12, kInf},
                {'v', 1, 0, 96, 63, kNaN}}});
  v.push_back({"q_len > kv_len (bottom-right rows without keys), q bad there", 8, 32, false, true, false,
               DType::F16, 4, 1, 150, 40,
               {{'q', 0, 0, 3, 0, kNaN}, {'q', 0, 2, 120, 31, kInf}, {'k', 0, 0, 20, 4, kNaN},
                {'v', 0, 0, 30, 9, kNaN}}});
  v.push_back({"every key bad (all K NaN in one head)", 8, 32, false, false, false, DType::F16, 4, 2, 50, 50,
               {}});
  for (std::int64_t j = 0; j < 50; ++j) v.back().plants.push_back({'k', 0, 1, j, static_cast<int>(j % 32), kNaN});
  return v;
}

}  // namespace

TEST_CASE("nonfinite: quantize_stage keeps bad inputs out of statistics, zeroes their codes, flags them") {
  for (const Case& cs : cases()) {
    CAPTURE(cs.name);
    for (std::int64_t batch : {1, 2}) {
      AttentionInputs bad = make_activation_like(11, cs.dt, batch, cs.hq, cs.hkv, cs.nq, cs.nk, cs.d);
      AttentionInputs zero = bad;
      apply(bad, cs.plants, false);
      apply(zero, cs.plants, true);
      const auto spec = make_spec(cs.bits, cs.d, 64, 32, 4, cs.sq, cs.sk, cs.sv, CausalMode::None, cs.dt);
      QuantizeOptions qo;
      qo.margins = true;
      const QuantizedHost a = quantize_stage(bad.q.ref(), bad.k.ref(), bad.v.ref(), spec, qo);
      const QuantizedHost z = quantize_stage(zero.q.ref(), zero.k.ref(), zero.v.ref(), spec, qo);
      const StageLayout& L = a.layout;
      REQUIRE(a.q_bad.size() == static_cast<std::size_t>(batch * cs.hq * L.q_len_pad));
      REQUIRE(a.k_first_bad.size() == static_cast<std::size_t>(batch * cs.hkv));
      REQUIRE(a.v_first_bad.size() == static_cast<std::size_t>(batch * cs.hkv * L.d_v));
      // statistics, means, q·k̄ and scales: those of the zeroed inputs, bit for bit
      CHECK(a.k_stats == z.k_stats);
      CHECK(a.v_stats == z.v_stats);
      CHECK(a.k_mean == z.k_mean);
      CHECK(a.v_mean == z.v_mean);
      CHECK(a.q_mean == z.q_mean);
      CHECK(a.q_kbias == z.q_kbias);
      CHECK(a.q_scale == z.q_scale);
      CHECK(a.k_scale == z.k_scale);
      CHECK(a.v_scale == z.v_scale);
      for (float x : a.k_stats) CHECK(std::isfinite(x));
      for (float x : a.q_scale) CHECK(std::isfinite(x));
      for (float x : a.k_scale) CHECK(std::isfinite(x));
      for (float x : a.v_scale) CHECK(std::isfinite(x));
      // zeroed inputs: no flags
      for (auto f : z.q_bad) CHECK(f == 0);
      for (auto f : z.k_first_bad) CHECK(f == 0x7fffffff);
      for (auto f : z.v_first_bad) CHECK(f == 0x7fffffff);
      // flags and codes, from the raw inputs
      std::int64_t flagged = 0;
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t h = 0; h < cs.hq; ++h)
          for (std::int64_t i = 0; i < L.q_len_pad; ++i) {
            const bool want = i < cs.nq && row_nonfinite(bad.q.ref(), b, h, i);
            CHECK(a.q_bad[static_cast<std::size_t>((b * cs.hq + h) * L.q_len_pad + i)] == (want ? 1 : 0));
            flagged += want;
            for (int c = 0; c < cs.d && i < cs.nq; ++c) {
              if (std::isfinite(bad.q.get(b, h, i, c))) {
                CHECK(a.q_code(b, h, i, c) == z.q_code(b, h, i, c));
              } else {
                CHECK(a.q_code(b, h, i, c) == 0);
              }
            }
          }
        for (std::int64_t h = 0; h < cs.hkv; ++h) {
          std::int32_t kfb = 0x7fffffff;
          for (std::int64_t j = cs.nk - 1; j >= 0; --j)
            if (row_nonfinite(bad.k.ref(), b, h, j)) kfb = static_cast<std::int32_t>(j);
          CHECK(a.k_first_bad[static_cast<std::size_t>(b * cs.hkv + h)] == kfb);
          flagged += kfb != 0x7fffffff;
          for (int c = 0; c < L.d_v; ++c) {
            std::int32_t vfb = 0x7fffffff;
            for (std::int64_t j = cs.nk - 1; j >= 0 && c < cs.d; --j)
              if (!std::isfinite(bad.v.get(b, h, j, c))) vfb = static_cast<std::int32_t>(j);
            CHECK(a.v_first_bad[static_cast<std::size_t>((b * cs.hkv + h) * L.d_v + c)] == vfb);
            flagged += vfb != 0x7fffffff;
          }
          for (std::int64_t j = 0; j < cs.nk; ++j)
            for (int c = 0; c < cs.d; ++c) {
              const bool kb = !std::isfinite(bad.k.get(b, h, j, c)), vb = !std::isfinite(bad.v.get(b, h, j, c));
              CHECK(a.k_code(b, h, j, c) == (kb ? 0 : z.k_code(b, h, j, c)));
              CHECK(a.v_code(b, h, j, c) == (vb ? 0 : z.v_code(b, h, j, c)));
            }
        }
      }
      CHECK(flagged > 0);
    }
  }
}

TEST_CASE("nonfinite: emulation pattern == policy == exact_attention pattern; finite outputs unaffected") {
  const CausalMode modes[] = {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight};
  std::int64_t total_nan = 0, total_finite = 0, total_divergent = 0;
  for (const Case& cs : cases()) {
    for (CausalMode mode : modes)
    for (bool tile_stats : {false, true}) {   // today's statistics and the one-pass ones
      const std::string name = std::string(cs.name) + " / " + causal_mode_name(mode) + (tile_stats ? " / one-pass" : "");
      CAPTURE(name);
      const std::int64_t batch = 2;
      AttentionInputs bad = make_activation_like(29, cs.dt, batch, cs.hq, cs.hkv, cs.nq, cs.nk, cs.d);
      AttentionInputs zero = bad;
      apply(bad, cs.plants, false);
      apply(zero, cs.plants, true);
      const auto spec = make_spec(cs.bits, cs.d, 64, 32, 4, cs.sq, cs.sk, cs.sv, mode, cs.dt);
      const double sm = 1.0 / std::sqrt(double(cs.d));
      EmulationOptions eo;
      eo.round_output = true;
      eo.kv_tile_statistics = tile_stats;
      const EmulationResult e = emulate_attention(bad.q.ref(), bad.k.ref(), bad.v.ref(), spec, eo);
      const EmulationResult ez = emulate_attention(zero.q.ref(), zero.k.ref(), zero.v.ref(), spec, eo);
      AttentionOptions xo;
      xo.causal = mode;
      const ExactResult x = exact_attention(bad.q.ref(), bad.k.ref(), bad.v.ref(), xo);
      const Pattern P = predict(bad.q.ref(), bad.k.ref(), bad.v.ref(), mode, sm);

      std::int64_t pat_bad = 0, exact_bad = 0, same_bad = 0, div_bad = 0;
      std::vector<double> ref_fin;
      std::vector<float> got_fin;
      for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t h = 0; h < cs.hq; ++h)
        for (std::int64_t i = 0; i < cs.nq; ++i) {
          const std::size_t r = P.r(b, h, i);
          const float lse = e.lse[r];
          const double xl = x.lse[r];
          if (P.no_key[r]) {
            if (!(lse == -kInf && xl == -INFINITY)) ++pat_bad;
          } else {
            if (bool(std::isnan(lse)) != bool(P.lse_nan[r]) || (!P.lse_nan[r] && !std::isfinite(lse))) ++pat_bad;
            if (P.divergent[r]) {
              if (!std::isfinite(xl)) ++div_bad;   // exact: the -Inf key has weight 0, row finite
            } else if (bool(std::isfinite(xl)) == bool(P.lse_nan[r])) {
              ++exact_bad;
            }
          }
          for (std::int64_t c = 0; c < cs.d; ++c) {
            const std::size_t o = P.o(b, h, i, c);
            const float g = e.o[o];
            const double xv = x.o[o];
            if (P.no_key[r]) {
              if (!(g == 0.f && xv == 0.0)) ++pat_bad;
              continue;
            }
            if (bool(std::isnan(g)) != bool(P.o_nan[o]) || (!P.o_nan[o] && !std::isfinite(g))) {
              if (pat_bad < 3) MESSAGE("row " << i << " head " << h << " ch " << c << ": emul " << g);
              ++pat_bad;
            }
            if (P.divergent[r]) {
              if (bool(std::isfinite(xv)) == bool(P.v_nan[o])) ++div_bad;
            } else if (bool(std::isfinite(xv)) == bool(P.o_nan[o])) {
              if (exact_bad < 3) MESSAGE("row " << i << " head " << h << " ch " << c << ": exact " << xv);
              ++exact_bad;
            }
            if (!P.o_nan[o]) {
              // finite outputs: bit-identical to the zeroed inputs' emulation, close to exact
              if (!(g == ez.o[o])) ++same_bad;
              if (std::isfinite(xv)) {
                ref_fin.push_back(xv);
                got_fin.push_back(g);
              }
            }
          }
        }
      CHECK(pat_bad == 0);
      CHECK(exact_bad == 0);
      CHECK(div_bad == 0);
      CHECK(same_bad == 0);
      for (std::size_t r = 0; r < e.lse.size(); ++r)
        if (!P.lse_nan[r] && !P.no_key[r]) CHECK(e.lse[r] == ez.lse[r]);
      const Metrics m = compare(ref_fin, got_fin);
      std::printf("nonfinite %-72s nan %5lld finite %6lld divergent rows %3lld | finite vs exact cos %.6f relL1 %.4f\n",
                  name.c_str(), (long long)P.nan_elems, (long long)P.finite_elems, (long long)P.divergent_rows,
                  m.cos_sim, m.rel_l1);
      CHECK(m.nonfinite == 0);
      CHECK(m.cos_sim >= (cs.bits == 8 ? 0.999 : 0.99));
      CHECK(m.rel_l1 <= (cs.bits == 8 ? 0.05 : 0.15));
      total_nan += P.nan_elems;
      total_finite += P.finite_elems;
      total_divergent += P.divergent_rows;
    }
  }
  // The cases exercise both sides of every rule (including exact's -Inf rows).
  CHECK(total_nan > 0);
  CHECK(total_finite > 0);
  CHECK(total_divergent > 0);
}

TEST_CASE("nonfinite: a poisoned key masked for early rows leaves them untouched (all causal modes)") {
  // Key 40 is NaN; top-left rows 0..39 never see it. Before the policy one NaN in K made k̄ NaN
  // and every row NaN.
  AttentionInputs in = make_gaussian(5, DType::F16, 1, 4, 1, 64, 64, 32);
  in.k.set(0, 0, 40, 7, kNaN);
  for (CausalMode mode : {CausalMode::TopLeft, CausalMode::BottomRight}) {
    const auto spec = make_spec(8, 32, 64, 32, 4, false, true, false, mode, DType::F16);
    const EmulationResult e = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t i = 0; i < 64; ++i) {
        CAPTURE(i);
        CHECK(std::isnan(e.lse[static_cast<std::size_t>(h * 64 + i)]) == (i >= 40));
        for (int c = 0; c < 32; ++c) CHECK(std::isnan(e.o[e.index(0, h, i, c)]) == (i >= 40));
      }
  }
  // Non-causal: every row sees key 40.
  const auto spec = make_spec(8, 32, 64, 32, 4, false, true, false, CausalMode::None, DType::F16);
  const EmulationResult e = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec);
  for (float x : e.o) CHECK(std::isnan(x));
  for (float x : e.lse) CHECK(std::isnan(x));
}
