// Specification: reference::quantize_stage produces exactly the buffers of kernels/quant_buffers.hpp
// (sizes, layout, padding) with the float ops written in that header; quantize→dequantize error is
// at most δ/2 per element; margins tell how close each unrounded value is to a rounding boundary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

KernelConfig attn_spec(AttentionFamily fam, int bits, int d, int bq, int bk, int warps, bool sq, bool sk, bool sv) {
  KernelConfig s;
  s.family = fam;
  s.arch = "sm_90a";
  s.qk_bits = bits;
  s.head_dim = d;
  s.tile = {bq, bk, warps, 1};
  s.smooth_q = sq;
  s.smooth_k = sk;
  s.smooth_v = sv;
  return s;
}

struct Cfg {
  AttentionFamily fam;
  int bits, d, bq, bk, warps;
  bool sq, sk, sv;
  std::int64_t hq, hkv, nq, nk;
};

const Cfg kCfgs[] = {
    {AttentionFamily::Mma, 4, 72, 128, 64, 4, true, true, false, 2, 1, 150, 100},
    {AttentionFamily::Mma, 8, 40, 64, 32, 2, false, true, true, 2, 2, 64, 33},
    {AttentionFamily::Mma, 4, 64, 32, 16, 1, false, false, true, 1, 1, 17, 20},
    {AttentionFamily::Wgmma, 8, 128, 128, 64, 4, true, true, true, 4, 2, 200, 129},
    {AttentionFamily::Wgmma, 8, 24, 256, 128, 8, false, true, false, 1, 1, 257, 300},
};

// The channel-sum order of kernels/quant_buffers.hpp, written out for one channel: chunks of T
// tokens, P slot sums per chunk (slot s: tokens c0+s, c0+s+P, ...), slots then chunks left to
// right.
template <class Get>
float stage_sum(Get get, std::int64_t n, int T, int P) {
  float total = 0.f;
  for (std::int64_t c0 = 0; c0 < n; c0 += T) {
    float chunk = 0.f;
    for (int s = 0; s < P; ++s) {
      float part = 0.f;
      for (std::int64_t i = c0 + s; i < std::min<std::int64_t>(n, c0 + T); i += P) part += get(i);
      chunk = s == 0 ? part : chunk + part;
    }
    total = c0 == 0 ? chunk : total + chunk;
  }
  return total;
}

}  // namespace

TEST_CASE("quantize stage: buffer sizes are QuantBuffers' counts and padded entries are zero") {
  for (const Cfg& c : kCfgs) {
    const auto spec = attn_spec(c.fam, c.bits, c.d, c.bq, c.bk, c.warps, c.sq, c.sk, c.sv);
    auto in = make_activation_like(3, DType::F16, 2, c.hq, c.hkv, c.nq, c.nk, c.d);
    const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    kernels::QuantProblem p;
    p.batch = 2;
    p.q_heads = c.hq;
    p.kv_heads = c.hkv;
    p.q_len = c.nq;
    p.kv_len = c.nk;
    p.head_dim = c.d;
    const kernels::QuantBuffers L = kernels::quant_buffers(p, kernel_spec(spec));
    CAPTURE(c.d);
    CAPTURE(c.bits);
    // The public layout is the kernels' layout: sizes, padding, groups, V order.
    const StageLayout& G = qs.layout;
    KernelConfig resolved = spec;  // the layout's config has the P̃V precision and accumulation resolved
    resolved.pv_precision = PvPrecision::Fp8;
    resolved.pv_accum = PvAccum::Fp32;
    CHECK(G.config == resolved);
    CHECK(G.q_blocks == L.q_blocks);
    CHECK(G.k_blocks == L.k_blocks);
    CHECK(G.q_len_pad == L.q_len_pad);
    CHECK(G.kv_len_pad == L.kv_len_pad);
    CHECK(G.d_qk == L.d_qk);
    CHECK(G.row_bytes == L.row_bytes);
    CHECK(G.d_v == L.d_v);
    CHECK(G.stats_chunks == L.stats_chunks);
    CHECK(G.q_groups_per_block == L.layout.q_groups_per_block());
    CHECK(G.k_groups_per_block == L.layout.k_groups_per_block());
    for (int r = 0; r < c.bq; ++r) CHECK(G.q_group(r) == L.layout.q_group(r));
    for (int j = 0; j < c.bk; ++j) CHECK(G.k_group(j) == L.layout.k_group(j));
    for (int key = 0; key < 48; ++key) CHECK(G.v_slot(key) == L.layout.v_slot(key));
    CHECK(reference::quant_buffers(G).offsets().total == L.offsets().total);
    CHECK(qs.q_codes.size() == static_cast<std::size_t>(L.q_codes()));
    CHECK(qs.q_scale.size() == static_cast<std::size_t>(L.q_scale()));
    CHECK(qs.q_mean.size() == static_cast<std::size_t>(L.q_mean()));
    CHECK(qs.q_kbias.size() == static_cast<std::size_t>(L.q_kbias()));
    CHECK(qs.k_codes.size() == static_cast<std::size_t>(L.k_codes()));
    CHECK(qs.k_scale.size() == static_cast<std::size_t>(L.k_scale()));
    CHECK(qs.k_mean.size() == static_cast<std::size_t>(L.k_mean()));
    CHECK(qs.k_stats.size() == static_cast<std::size_t>(L.k_stats()));
    CHECK(qs.v_codes.size() == static_cast<std::size_t>(L.v_codes()));
    CHECK(qs.v_scale.size() == static_cast<std::size_t>(L.v_scale()));
    CHECK(qs.v_mean.size() == static_cast<std::size_t>(L.v_mean()));
    CHECK(qs.v_stats.size() == static_cast<std::size_t>(L.v_stats()));
    bool pad_ok = true;
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t h = 0; h < c.hq; ++h) {
        for (std::int64_t n = 0; n < L.q_len_pad; ++n)
          for (int ch = 0; ch < L.d_qk; ++ch)
            if ((n >= c.nq || ch >= c.d) && qs.q_code(b, h, n, ch) != 0) pad_ok = false;
        if (c.sk)
          for (std::int64_t n = c.nq; n < L.q_len_pad; ++n)
            if (qs.q_kbias[static_cast<std::size_t>((b * c.hq + h) * L.q_len_pad + n)] != 0.f) pad_ok = false;
        if (c.sq)
          for (std::int64_t blk = 0; blk < L.q_blocks; ++blk)
            for (int ch = c.d; ch < L.d_qk; ++ch)
              if (qs.q_mean[static_cast<std::size_t>(((b * c.hq + h) * L.q_blocks + blk) * L.d_qk + ch)] != 0.f) pad_ok = false;
        // groups of the last block that hold no valid row have scale 0
        const std::int64_t last = L.q_blocks - 1;
        for (int r = 0; r < c.bq; ++r) {
          const int g = qs.layout.q_group(r);
          bool any_valid = false;
          for (int r2 = 0; r2 < c.bq; ++r2)
            if (qs.layout.q_group(r2) == g && last * c.bq + r2 < c.nq) any_valid = true;
          const float sc = qs.q_scale[static_cast<std::size_t>(((b * c.hq + h) * L.q_blocks + last) * qs.layout.q_groups_per_block + g)];
          if (!any_valid && sc != 0.f) pad_ok = false;
          if (any_valid && !(sc > 0.f)) pad_ok = false;
        }
      }
      for (std::int64_t h = 0; h < c.hkv; ++h) {
        for (std::int64_t n = 0; n < L.kv_len_pad; ++n)
          for (int ch = 0; ch < L.d_qk; ++ch)
            if ((n >= c.nk || ch >= c.d) && qs.k_code(b, h, n, ch) != 0) pad_ok = false;
        for (std::int64_t n = 0; n < L.kv_len_pad; ++n)
          for (int ch = 0; ch < L.d_v; ++ch)
            if ((n >= c.nk || ch >= c.d) && qs.v_code(b, h, n, ch) != 0) pad_ok = false;
        for (int ch = c.d; ch < L.d_v; ++ch) {
          const auto bh = static_cast<std::size_t>(b * c.hkv + h);
          if (qs.v_scale[bh * L.d_v + ch] != 0.f || qs.v_mean[bh * L.d_v + ch] != 0.f) pad_ok = false;
          for (int s = 0; s < 3; ++s)
            if (qs.v_stats[(bh * 3 + s) * L.d_v + ch] != 0.f) pad_ok = false;
        }
        for (int ch = c.d; ch < L.d_qk; ++ch) {
          const auto bh = static_cast<std::size_t>(b * c.hkv + h);
          if (qs.k_mean[bh * L.d_qk + ch] != 0.f) pad_ok = false;
          for (int s = 0; s < 3; ++s)
            if (qs.k_stats[(bh * 3 + s) * L.d_qk + ch] != 0.f) pad_ok = false;
        }
        if (!c.sk)
          for (int ch = 0; ch < L.d_qk; ++ch)
            if (qs.k_mean[static_cast<std::size_t>((b * c.hkv + h) * L.d_qk + ch)] != 0.f) pad_ok = false;
        if (!c.sv)
          for (int ch = 0; ch < L.d_v; ++ch)
            if (qs.v_mean[static_cast<std::size_t>((b * c.hkv + h) * L.d_v + ch)] != 0.f) pad_ok = false;
      }
    }
    CHECK(pad_ok);
  }
}

TEST_CASE("quantize stage: the float ops of kernels/quant_buffers.hpp, recomputed independently") {
  const Cfg c = kCfgs[0];   // int4, smooth Q+K, GQA, partial blocks, padded head dim
  for (bool sv : {false, true}) {
    const auto spec = attn_spec(c.fam, c.bits, c.d, c.bq, c.bk, c.warps, c.sq, c.sk, sv);
    auto in = make_activation_like(11, DType::BF16, 1, c.hq, c.hkv, c.nq, c.nk, c.d);
    // The default (split) order and, below, the fused stage's.
    QuantizeOptions fo;
    fo.fused_stats_order = true;
    const QuantizedHost qf = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec, fo);
    const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    const auto& L = qs.layout;
    const int R = 7;
    // k̄ and the stats: sums in the stage's fixed fp32 order (T, P: one chunk walked by the split
    // stats kernel; the fused kernel's chunks), which stays within float rounding of the exact sum
    const int T = static_cast<int>(c.nk), P = kernels::quantize_split_stats_rows_per_pass(kernel_spec(spec));
    const int TF = kernels::quantize_stats_chunk(kernel_spec(spec)), PF = kernels::quantize_stats_rows_per_pass(kernel_spec(spec));
    for (int ch = 0; ch < c.d; ++ch) {
      const float fsum = stage_sum([&](std::int64_t n) { return in.k.get(0, 0, n, ch); }, c.nk, TF, PF);
      CHECK(qf.k_stats[static_cast<std::size_t>(ch)] == fsum);
      CHECK(qf.k_mean[static_cast<std::size_t>(ch)] == fsum / static_cast<float>(c.nk));
    }
    for (int ch = 0; ch < c.d; ++ch) {
      double s = 0;
      float mn = 1e30f, mx = -1e30f;
      for (std::int64_t n = 0; n < c.nk; ++n) {
        const float x = in.k.get(0, 0, n, ch);
        s += x;
        mn = std::min(mn, x);
        mx = std::max(mx, x);
      }
      const float sum = stage_sum([&](std::int64_t n) { return in.k.get(0, 0, n, ch); }, c.nk, T, P);
      CHECK(qs.k_stats[static_cast<std::size_t>(ch)] == sum);
      CHECK(std::fabs(sum - s) <= 1e-5 * std::fabs(s) + 1e-4);
      CHECK(qs.k_stats[static_cast<std::size_t>(L.d_qk + ch)] == mn);
      CHECK(qs.k_stats[static_cast<std::size_t>(2 * L.d_qk + ch)] == mx);
      CHECK(qs.k_mean[static_cast<std::size_t>(ch)] == sum / static_cast<float>(c.nk));
    }
    // K codes: x = K - k̄, per-thread group scales
    for (std::int64_t n = 0; n < c.nk; ++n) {
      const std::int64_t blk = n / c.bk;
      const int g = L.k_group(static_cast<int>(n % c.bk));
      float amax = 0;
      for (std::int64_t n2 = blk * c.bk; n2 < std::min<std::int64_t>(c.nk, (blk + 1) * c.bk); ++n2)
        if (L.k_group(static_cast<int>(n2 % c.bk)) == g)
          for (int ch = 0; ch < c.d; ++ch) amax = std::max(amax, std::fabs(in.k.get(0, 0, n2, ch) - qs.k_mean[static_cast<std::size_t>(ch)]));
      REQUIRE(qs.k_scale[static_cast<std::size_t>(blk * 4 + g)] == amax / 7.f);
      const float inv = 7.f / amax;
      for (int ch = 0; ch < c.d; ++ch) {
        const float t = (in.k.get(0, 0, n, ch) - qs.k_mean[static_cast<std::size_t>(ch)]) * inv;
        REQUIRE(qs.k_code(0, 0, n, ch) == static_cast<int>(std::nearbyint(std::clamp(t, -7.f, 7.f))));
      }
    }
    // Q: q̄ per block, codes, q·k̄ (GQA: q head 1 reads kv head 0)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t blk = 0; blk < L.q_blocks; ++blk) {
        const std::int64_t i0 = blk * c.bq, i1 = std::min<std::int64_t>(c.nq, i0 + c.bq);
        std::vector<float> mean(static_cast<std::size_t>(c.d));
        for (int ch = 0; ch < c.d; ++ch) {
          double s = 0;
          for (std::int64_t i = i0; i < i1; ++i) s += in.q.get(0, h, i, ch);
          mean[static_cast<std::size_t>(ch)] = static_cast<float>(s) / static_cast<float>(i1 - i0);
          CHECK(qs.q_mean[static_cast<std::size_t>((h * L.q_blocks + blk) * L.d_qk + ch)] == mean[static_cast<std::size_t>(ch)]);
        }
        for (std::int64_t i = i0; i < i1; ++i) {
          const int g = L.q_group(static_cast<int>(i - i0));
          float amax = 0;
          for (std::int64_t i2 = i0; i2 < i1; ++i2)
            if (L.q_group(static_cast<int>(i2 - i0)) == g)
              for (int ch = 0; ch < c.d; ++ch) amax = std::max(amax, std::fabs(in.q.get(0, h, i2, ch) - mean[static_cast<std::size_t>(ch)]));
          REQUIRE(qs.q_scale[static_cast<std::size_t>((h * L.q_blocks + blk) * L.q_groups_per_block + g)] == amax / R);
          for (int ch = 0; ch < c.d; ++ch) {
            const float t = (in.q.get(0, h, i, ch) - mean[static_cast<std::size_t>(ch)]) * (7.f / amax);
            REQUIRE(qs.q_code(0, h, i, ch) == static_cast<int>(std::nearbyint(std::clamp(t, -7.f, 7.f))));
          }
          double kb = 0;
          for (int ch = 0; ch < c.d; ++ch) kb += double(in.q.get(0, h, i, ch)) * qs.k_mean[static_cast<std::size_t>(ch)];
          CHECK(qs.q_kbias[static_cast<std::size_t>(h * L.q_len_pad + i)] == static_cast<float>(kb));
        }
      }
    // V: μ, amax rule, e4m3 codes, transposed layout
    for (int ch = 0; ch < c.d; ++ch) {
      double s = 0;
      float mn = 1e30f, mx = -1e30f;
      for (std::int64_t n = 0; n < c.nk; ++n) {
        const float x = in.v.get(0, 0, n, ch);
        s += x;
        mn = std::min(mn, x);
        mx = std::max(mx, x);
      }
      const float sum = stage_sum([&](std::int64_t n) { return in.v.get(0, 0, n, ch); }, c.nk, T, P);
      CHECK(std::fabs(sum - s) <= 1e-5 * std::fabs(s) + 1e-4);
      const float mu = sv ? sum / static_cast<float>(c.nk) : 0.f;
      CHECK(qs.v_mean[static_cast<std::size_t>(ch)] == mu);
      const float amax = sv ? std::max(mx - mu, mu - mn) : std::max(std::fabs(mx), std::fabs(mn));
      CHECK(qs.v_scale[static_cast<std::size_t>(ch)] == amax / 448.f);
      for (std::int64_t n = 0; n < c.nk; ++n) {
        // stored in the consumer family's column order (QuantLayout::v_slot)
        const std::uint8_t code = qs.v_codes[static_cast<std::size_t>(ch * L.kv_len_pad + L.v_slot(n))];
        REQUIRE(code == float_to_fp8((in.v.get(0, 0, n, ch) - mu) * (448.f / amax), Fp8Format::E4M3));
        REQUIRE(qs.v_code(0, 0, n, ch) == code);
      }
    }
  }
}

TEST_CASE("quantize stage: INT4/INT8 quantize→dequantize error is at most δ/2 per element") {
  for (const Cfg& c : kCfgs) {
    const auto spec = attn_spec(c.fam, c.bits, c.d, c.bq, c.bk, c.warps, c.sq, c.sk, c.sv);
    auto in = make_activation_like(5, DType::F32, 1, c.hq, c.hkv, c.nq, c.nk, c.d);
    const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    const auto& L = qs.layout;
    double worst = 0;   // error / (δ/2), must stay <= 1
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.nq; ++i) {
        const std::int64_t blk = i / c.bq;
        const float delta = qs.q_scale[static_cast<std::size_t>((h * L.q_blocks + blk) * L.q_groups_per_block +
                                                                L.q_group(static_cast<int>(i % c.bq)))];
        for (int ch = 0; ch < c.d; ++ch) {
          const float mean = c.sq ? qs.q_mean[static_cast<std::size_t>((h * L.q_blocks + blk) * L.d_qk + ch)] : 0.f;
          const double x = double(in.q.get(0, h, i, ch)) - mean;
          worst = std::max(worst, std::fabs(qs.q_code(0, h, i, ch) * double(delta) - x) / (0.5 * delta));
        }
      }
    for (std::int64_t h = 0; h < c.hkv; ++h)
      for (std::int64_t n = 0; n < c.nk; ++n) {
        const float delta = qs.k_scale[static_cast<std::size_t>((h * L.k_blocks + n / c.bk) * L.k_groups_per_block + L.k_group(static_cast<int>(n % c.bk)))];
        for (int ch = 0; ch < c.d; ++ch) {
          const double x = double(in.k.get(0, h, n, ch)) - qs.k_mean[static_cast<std::size_t>(h * L.d_qk + ch)];
          worst = std::max(worst, std::fabs(qs.k_code(0, h, n, ch) * double(delta) - x) / (0.5 * delta));
        }
      }
    CAPTURE(c.bits);
    CHECK(worst <= 1.0 + 1e-5);   // fp32 rounding of x·inv may move a value by an ulp
    CHECK(worst > 0.5);           // and the bound is not vacuous
  }
}

TEST_CASE("quantize stage: INT4 packing (element 2j low nibble, two's complement) and NHD = HND") {
  const auto spec = attn_spec(AttentionFamily::Mma, 4, 64, 64, 32, 4, false, false, false);
  HostTensor q(DType::F32, 1, 1, 64, 64), k(DType::F32, 1, 1, 32, 64), v(DType::F32, 1, 1, 32, 64);
  // row 0 of Q: codes -7..7 pattern; the group of row 0 (rows 0 and 8) has amax 7
  for (int ch = 0; ch < 64; ++ch) q.set(0, 0, 0, ch, static_cast<float>((ch % 15) - 7));
  for (int n = 0; n < 32; ++n) k.set(0, 0, n, 0, 1.f);
  const QuantizedHost qs = quantize_stage(q.ref(), k.ref(), v.ref(), spec);
  REQUIRE(qs.layout.row_bytes == 32);
  for (int j = 0; j < 32; ++j) {
    const auto byte = static_cast<std::uint8_t>(qs.q_codes[static_cast<std::size_t>(j)]);
    const int lo = (2 * j) % 15 - 7, hi = (2 * j + 1) % 15 - 7;
    CHECK(byte == static_cast<std::uint8_t>((lo & 0xF) | ((hi & 0xF) << 4)));
  }
  int row[64];
  unpack_codes(qs.q_codes.data(), 4, 64, row);
  for (int ch = 0; ch < 64; ++ch) CHECK(row[ch] == (ch % 15) - 7);

  auto hnd = make_activation_like(9, DType::F16, 2, 2, 1, 70, 50, 40, {}, false);
  auto nhd = make_activation_like(9, DType::F16, 2, 2, 1, 70, 50, 40, {}, true);
  const auto spec8 = attn_spec(AttentionFamily::Mma, 8, 40, 64, 32, 2, true, true, true);
  const QuantizedHost a = quantize_stage(hnd.q.ref(), hnd.k.ref(), hnd.v.ref(), spec8);
  const QuantizedHost b = quantize_stage(nhd.q.ref(), nhd.k.ref(), nhd.v.ref(), spec8);
  CHECK(a.q_codes == b.q_codes);
  CHECK(a.k_codes == b.k_codes);
  CHECK(a.v_codes == b.v_codes);
  CHECK(a.q_scale == b.q_scale);
  CHECK(a.q_kbias == b.q_kbias);
}

TEST_CASE("quantize stage: margins locate the values that sit near a rounding boundary") {
  const auto spec = attn_spec(AttentionFamily::Mma, 8, 32, 64, 32, 4, false, true, true);
  auto in = make_activation_like(21, DType::F16, 1, 1, 1, 64, 64, 32);
  QuantizeOptions o;
  o.margins = true;
  const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  const auto& L = qs.layout;
  REQUIRE(qs.q_margin.size() == static_cast<std::size_t>(L.q_len_pad * L.d_qk));
  REQUIRE(qs.k_margin.size() == static_cast<std::size_t>(L.kv_len_pad * L.d_qk));
  REQUIRE(qs.v_margin.size() == static_cast<std::size_t>(L.d_v * L.kv_len_pad));
  // Recompute one margin per buffer by hand, and check the range.
  for (std::int64_t n = 0; n < 64; ++n)
    for (int ch = 0; ch < 32; ++ch) {
      const float m = qs.k_margin[static_cast<std::size_t>(n * L.d_qk + ch)];
      REQUIRE(m >= 0.f);
      REQUIRE(m <= 0.5f + 1e-3f);
      const float delta = qs.k_scale[static_cast<std::size_t>((n / 32) * 4 + L.k_group(static_cast<int>(n % 32)))];
      // the stage measures the margin on its own t = x·(127/amax); recomputed here through the
      // stored scale (amax ≈ 127·δ), it agrees to far better than 1e-3 code steps
      const float t = (in.k.get(0, 0, n, ch) - qs.k_mean[static_cast<std::size_t>(ch)]) / delta;
      CHECK(std::fabs(m - int_margin(t, 127)) < 1e-3f);
      const float vm = qs.v_margin[static_cast<std::size_t>(ch * L.kv_len_pad + n)];
      REQUIRE(vm >= 0.f);
      REQUIRE(vm <= 0.5f + 1e-3f);
    }
  for (std::int64_t n = 64; n < L.kv_len_pad; ++n) CHECK(std::isinf(qs.k_margin[static_cast<std::size_t>(n * L.d_qk)]));
}

TEST_CASE("quantize stage: spec/tensor mismatches are rejected with names and values") {
  auto in = make_gaussian(1, DType::F16, 1, 2, 1, 16, 16, 64);
  auto spec = attn_spec(AttentionFamily::Mma, 8, 96, 64, 32, 4, false, true, false);
  try {
    quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    FAIL("expected an exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("config.head_dim=96") != std::string::npos);
  }
  spec.head_dim = 64;
  spec.tile.bq = 40;
  CHECK_THROWS_AS(quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec), Error);
}

TEST_CASE("quantize stage: channel sums follow the chunked fp32 order across several chunks") {
  // 2500 keys = 3 statistics chunks (T = 1024 at head dim 40: ~64 KiB of input), the last one
  // partial; int8 and int4 mappings (different P), head dim 40 (padded channels stay 0); the split
  // path's order (its channel_stats' rows per pass) and the fused stage's.
  for (int bits : {8, 4})
    for (bool fused : {false, true}) {
      CAPTURE(bits);
      CAPTURE(fused);
      const auto spec = attn_spec(AttentionFamily::Mma, bits, 40, 64, 32, 2, false, true, true);
      const kernels::KernelSpec ks = kernel_spec(spec);
      const int T = kernels::quantize_stats_chunk(ks);
      const int P = fused ? kernels::quantize_stats_rows_per_pass(ks) : kernels::quantize_split_stats_rows_per_pass(ks);
      REQUIRE(T == 1024);
      REQUIRE(P >= 1);
      auto in = make_activation_like(17, DType::F16, 1, 1, 1, 16, 2500, 40);
      QuantizeOptions fo;
      fo.fused_stats_order = fused;
      const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec, fo);
      REQUIRE(qs.layout.stats_chunks == 3);
      for (int ch = 0; ch < 40; ++ch) {
        CHECK(qs.k_stats[static_cast<std::size_t>(ch)] ==
              stage_sum([&](std::int64_t n) { return in.k.get(0, 0, n, ch); }, 2500, T, P));
        CHECK(qs.v_stats[static_cast<std::size_t>(ch)] ==
              stage_sum([&](std::int64_t n) { return in.v.get(0, 0, n, ch); }, 2500, T, P));
      }
      for (int ch = 40; ch < qs.layout.d_qk; ++ch) CHECK(qs.k_stats[static_cast<std::size_t>(ch)] == 0.f);
    }
}

TEST_CASE("quantize stage: the cluster stage's sums follow the chunked order with its plan's chunks") {
  // 1000 keys of one kv head: the plan cuts them into chunks of whole KV tiles, one per cluster
  // rank; the sums follow the same formula as the fused stage's with that chunk (and its P).
  const auto spec = attn_spec(AttentionFamily::Wgmma, 8, 64, 128, 128, 8, false, true, true);
  auto in = make_activation_like(23, DType::F16, 1, 1, 1, 16, 1000, 64);
  QuantizeOptions co;
  co.cluster_stats_order = true;
  const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec, co);
  const kernels::QuantizeClusterPlan plan = kernels::quantize_cluster_plan(reference::quant_buffers(qs.layout));
  REQUIRE(plan.size > 1);
  REQUIRE(plan.chunk < 1000);
  const int T = static_cast<int>(plan.chunk), P = kernels::quantize_stats_rows_per_pass(kernel_spec(spec));
  for (int ch = 0; ch < 64; ++ch) {
    CHECK(qs.k_stats[static_cast<std::size_t>(ch)] ==
          stage_sum([&](std::int64_t n) { return in.k.get(0, 0, n, ch); }, 1000, T, P));
    CHECK(qs.v_stats[static_cast<std::size_t>(ch)] ==
          stage_sum([&](std::int64_t n) { return in.v.get(0, 0, n, ch); }, 1000, T, P));
  }
  QuantizeOptions both = co;
  both.fused_stats_order = true;
  CHECK_THROWS_AS(quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec, both), Error);
}
