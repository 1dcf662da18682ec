// Emulation of the SageAttention2 kernel (the float-op contract is in sage2/reference.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/internal.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

const char* granularity_name(Granularity g) noexcept {
  switch (g) {
    case Granularity::PerTensor: return "per-tensor";
    case Granularity::PerBlock: return "per-block";
    case Granularity::PerThread: return "per-thread";
    case Granularity::PerToken: return "per-token";
  }
  return "?";
}

const char* pv_format_name(PvFormat f) noexcept {
  switch (f) {
    case PvFormat::E4M3: return "e4m3";
    case PvFormat::E5M2: return "e5m2";
    case PvFormat::Int8: return "int8";
    case PvFormat::FP16: return "fp16";
    case PvFormat::F32: return "f32";
    case PvFormat::Kernel: return "kernel";
  }
  return "?";
}

namespace {

using detail::bad_arg;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

// Q or K of every head in the form the score loop reads: int16 codes + one scale per token, or
// (exact_qk) the smoothed floats.
struct QkOperand {
  std::int64_t rows_pad = 0;
  int d_qk = 0;
  std::vector<std::int16_t> codes;   // [heads][rows_pad][d_qk]
  std::vector<float> scale;          // [heads][rows_pad]
  std::vector<float> smooth;         // exact_qk: [heads][rows][d]
};

// P̂ and V̂ format: rounding of P̃·p_scale and of (V-μ)·inv.
struct PvRule {
  PvFormat f;
  float p_scale;   // static scale of P̃
  float v_max;     // the format's largest value (per-channel V scale = amax / v_max); 0: no scale
  float round(float x) const {
    switch (f) {
      case PvFormat::E4M3: return fp8_round(x, Fp8Format::E4M3);
      case PvFormat::E5M2: return fp8_round(x, Fp8Format::E5M2);
      case PvFormat::Int8: return static_cast<float>(quantize_int(x, 1.f, 127));
      case PvFormat::FP16: return half_to_float(float_to_half(x));
      case PvFormat::F32: return x;
      case PvFormat::Kernel: break;
    }
    return x;
  }
};

PvRule pv_rule(PvFormat f) {
  switch (f) {
    case PvFormat::E4M3: return {f, 448.f, 448.f};
    case PvFormat::E5M2: return {f, 57344.f, 57344.f};
    case PvFormat::Int8: return {f, 127.f, 127.f};
    case PvFormat::FP16: return {f, 1.f, 0.f};
    case PvFormat::F32: return {f, 1.f, 0.f};
    case PvFormat::Kernel: break;
  }
  return {f, 1.f, 0.f};
}

}  // namespace

EmulationResult emulate_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                  const KernelConfig& config, const EmulationOptions& opt) {
  const detail::Problem p = detail::check_qkv(q, k, v);
  const kernels::KernelSpec spec = kernel_spec(config);
  if (opt.accum_mantissa_bits < 1 || opt.accum_mantissa_bits > 23)
    bad_arg("accum_mantissa_bits=" + std::to_string(opt.accum_mantissa_bits) + " outside 1..23");
  if (static_cast<int>(opt.granularity) < 0 || static_cast<int>(opt.granularity) > 3)
    bad_arg("granularity=" + std::to_string(static_cast<int>(opt.granularity)) + " is not a Granularity");
  if (static_cast<int>(opt.pv_format) < 0 || static_cast<int>(opt.pv_format) > 5)
    bad_arg("pv_format=" + std::to_string(static_cast<int>(opt.pv_format)) + " is not a PvFormat");
  if (spec.causal != CausalMode::None && spec.causal != CausalMode::TopLeft && spec.causal != CausalMode::BottomRight)
    bad_arg("config.causal=" + std::to_string(static_cast<int>(spec.causal)) + " is not a CausalMode");
  const double sm = opt.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(spec.head_dim)));
  if (!std::isfinite(sm) || sm == 0.0) bad_arg("sm_scale=" + std::to_string(sm) + " must be finite and non-zero");

  // The quantize stage, exactly as the GPU runs it (validates spec vs tensors too), or the
  // caller's buffers of the same layout.
  QuantizedHost own;
  if (!opt.stage) {
    QuantizeOptions qopt;
    qopt.threads = opt.threads;
    own = quantize_stage(q, k, v, config, qopt);
  }
  const kernels::QuantBuffers L =
      kernels::quant_buffers(kernels::QuantProblem{p.batch, p.q_heads, p.kv_heads, p.q_len, p.kv_len, p.d}, spec);
  if (opt.stage) {
    const QuantizedHost& s = *opt.stage;
    auto n = [](std::int64_t c) { return static_cast<std::size_t>(c); };
    if (!detail::same_layout(s.layout, stage_layout(L, kernel_config(spec))) || s.q_codes.size() != n(L.q_codes()) ||
        s.q_scale.size() != n(L.q_scale()) || s.q_mean.size() != n(L.q_mean()) ||
        s.q_kbias.size() != n(L.q_kbias()) || s.k_codes.size() != n(L.k_codes()) ||
        s.k_scale.size() != n(L.k_scale()) || s.k_mean.size() != n(L.k_mean()) ||
        s.v_codes.size() != n(L.v_codes()) || s.v_scale.size() != n(L.v_scale()) ||
        s.v_mean.size() != n(L.v_mean()) || s.q_bad.size() != n(L.q_bad()) ||
        s.k_first_bad.size() != n(L.k_first_bad()) || s.v_first_bad.size() != n(L.v_first_bad()))
      bad_arg("options.stage: its buffers do not have the layout of spec " + spec.key() + " for these tensors");
  }
  const QuantizedHost& qs = opt.stage ? *opt.stage : own;
  const kernels::QuantLayout& ql = L.layout;
  const int d = p.d;
  const int R = L.qk_bits == 4 ? 7 : 127;
  const std::int64_t nq = p.q_len, nk = p.kv_len;

  // ---- Q/K operands ------------------------------------------------------------------------
  QkOperand Qo, Ko;
  Qo.rows_pad = L.q_len_pad;
  Ko.rows_pad = L.kv_len_pad;
  Qo.d_qk = Ko.d_qk = L.d_qk;
  const bool need_gk = opt.exact_qk || L.smooth_q || opt.granularity != Granularity::PerThread;
  std::vector<float> gk;   // γK [B*Hkv][nk][d]
  if (need_gk) {
    gk.resize(sz(p.batch * p.kv_heads * nk * d));
    detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
      std::vector<float> x;
      detail::smoothed_k(k, qs, bh / p.kv_heads, bh % p.kv_heads, x);
      std::copy(x.begin(), x.end(), gk.begin() + bh * nk * d);
    });
  }
  if (opt.exact_qk) {
    Ko.smooth = gk;
    Qo.smooth.resize(sz(p.batch * p.q_heads * nq * d));
    detail::parallel_for(p.batch * p.q_heads, opt.threads, [&](std::int64_t bh) {
      std::vector<float> x;
      detail::smoothed_q(q, qs, bh / p.q_heads, bh % p.q_heads, x);
      std::copy(x.begin(), x.end(), Qo.smooth.begin() + bh * nq * d);
    });
  } else if (opt.granularity == Granularity::PerThread) {
    // The kernel's own buffers: unpack the codes, expand the group scales to tokens.
    Qo.codes.assign(sz(p.batch * p.q_heads * L.q_len_pad * L.d_qk), 0);
    Qo.scale.assign(sz(p.batch * p.q_heads * L.q_len_pad), 0.f);
    Ko.codes.assign(sz(p.batch * p.kv_heads * L.kv_len_pad * L.d_qk), 0);
    Ko.scale.assign(sz(p.batch * p.kv_heads * L.kv_len_pad), 0.f);
    const int qg = ql.q_groups_per_block(), kg = ql.k_groups_per_block();
    detail::parallel_for(p.batch * p.q_heads, opt.threads, [&](std::int64_t bh) {
      std::vector<int> row(sz(L.d_qk));
      for (std::int64_t i = 0; i < L.q_len_pad; ++i) {
        unpack_codes(qs.q_codes.data() + (bh * L.q_len_pad + i) * L.row_bytes, L.qk_bits, L.d_qk, row.data());
        std::copy(row.begin(), row.end(), Qo.codes.begin() + (bh * L.q_len_pad + i) * L.d_qk);
        Qo.scale[sz(bh * L.q_len_pad + i)] =
            qs.q_scale[sz((bh * L.q_blocks + i / ql.bq) * qg + ql.q_group(static_cast<int>(i % ql.bq)))];
      }
    });
    detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
      std::vector<int> row(sz(L.d_qk));
      for (std::int64_t j = 0; j < L.kv_len_pad; ++j) {
        unpack_codes(qs.k_codes.data() + (bh * L.kv_len_pad + j) * L.row_bytes, L.qk_bits, L.d_qk, row.data());
        std::copy(row.begin(), row.end(), Ko.codes.begin() + (bh * L.kv_len_pad + j) * L.d_qk);
        Ko.scale[sz(bh * L.kv_len_pad + j)] =
            qs.k_scale[sz((bh * L.k_blocks + j / ql.bk) * kg + ql.k_group(static_cast<int>(j % ql.bk)))];
      }
    });
  } else {
    // Ablation granularities: same smoothed values, same rounding rule, other groups.
    auto quantize_head = [&](const float* x, std::int64_t rows, std::int64_t rows_pad, int tile,
                             std::int16_t* codes_out, float* scale_out) {
      std::vector<int> group(sz(rows));
      int n_groups = 1;
      for (std::int64_t r = 0; r < rows; ++r) {
        switch (opt.granularity) {
          case Granularity::PerTensor: group[sz(r)] = 0; break;
          case Granularity::PerBlock: group[sz(r)] = static_cast<int>(r / tile); break;
          case Granularity::PerToken: group[sz(r)] = static_cast<int>(r); break;
          case Granularity::PerThread: break;
        }
        n_groups = std::max(n_groups, group[sz(r)] + 1);
      }
      std::vector<std::int8_t> codes(sz(rows * L.d_qk));
      std::vector<float> scales(sz(n_groups));
      detail::quantize_grouped(x, rows, d, d, L.d_qk, group.data(), n_groups, R, codes.data(), scales.data(), nullptr);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (int c = 0; c < L.d_qk; ++c) codes_out[r * L.d_qk + c] = codes[sz(r * L.d_qk + c)];
        scale_out[r] = scales[sz(group[sz(r)])];
      }
      (void)rows_pad;
    };
    Qo.codes.assign(sz(p.batch * p.q_heads * L.q_len_pad * L.d_qk), 0);
    Qo.scale.assign(sz(p.batch * p.q_heads * L.q_len_pad), 0.f);
    Ko.codes.assign(sz(p.batch * p.kv_heads * L.kv_len_pad * L.d_qk), 0);
    Ko.scale.assign(sz(p.batch * p.kv_heads * L.kv_len_pad), 0.f);
    detail::parallel_for(p.batch * p.q_heads, opt.threads, [&](std::int64_t bh) {
      std::vector<float> x;
      detail::smoothed_q(q, qs, bh / p.q_heads, bh % p.q_heads, x);
      quantize_head(x.data(), nq, L.q_len_pad, ql.bq, Qo.codes.data() + bh * L.q_len_pad * L.d_qk,
                    Qo.scale.data() + bh * L.q_len_pad);
    });
    detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
      quantize_head(gk.data() + bh * nk * d, nk, L.kv_len_pad, ql.bk, Ko.codes.data() + bh * L.kv_len_pad * L.d_qk,
                    Ko.scale.data() + bh * L.kv_len_pad);
    });
  }

  // ---- V operand: V̂ [B*Hkv][nk][d] (token-major for the P̂V̂ loop), δV, μ ---------------------
  // The kernel's format: E4M3, or FP16 with an FP16-P̃V config; read from the stage's buffers when
  // the format is the stage's own.
  const PvFormat fmt = opt.pv_format != PvFormat::Kernel ? opt.pv_format
                       : spec.pv_fp16                     ? PvFormat::FP16
                                                          : PvFormat::E4M3;
  const bool stage_v = fmt == (spec.pv_fp16 ? PvFormat::FP16 : PvFormat::E4M3);
  const PvRule pv = pv_rule(fmt);
  std::vector<float> vhat(sz(p.batch * p.kv_heads * nk * d));
  std::vector<float> vscale(sz(p.batch * p.kv_heads * d)), vmean(sz(p.batch * p.kv_heads * d));
  detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
    float* out = vhat.data() + bh * nk * d;
    for (int c = 0; c < d; ++c) vmean[sz(bh * d + c)] = qs.v_mean[sz(bh * L.d_v + c)];
    if (stage_v) {   // the kernel's buffers (e4m3, or fp16 with its power-of-two scale)
      for (int c = 0; c < d; ++c) {
        vscale[sz(bh * d + c)] = qs.v_scale[sz(bh * L.d_v + c)];
        for (std::int64_t n = 0; n < nk; ++n) out[n * d + c] = qs.v_value(b, h, n, c);
      }
      return;
    }
    std::vector<float> x;
    std::vector<std::uint8_t> bad;
    detail::load_head(v, b, h, x);
    detail::sanitize(x, bad);   // non-finite V: 0 here (its outputs are poisoned by the flags)
    for (int c = 0; c < d; ++c) {
      const float mu = vmean[sz(bh * d + c)];
      float inv = 1.f;
      if (pv.v_max > 0.f) {   // per-channel scaled formats, same amax rule as the stage
        const float amax = detail::v_amax(qs, b, h, c);
        vscale[sz(bh * d + c)] = amax / pv.v_max;
        inv = (amax > 0.f && std::isfinite(amax)) ? pv.v_max / amax : 0.f;
      } else {
        vscale[sz(bh * d + c)] = 1.f;
      }
      for (std::int64_t n = 0; n < nk; ++n) {
        const float t = pv.v_max > 0.f ? (x[sz(n * d + c)] - mu) * inv : x[sz(n * d + c)] - mu;
        out[n * d + c] = bad[sz(n * d + c)] ? 0.f : pv.round(t);
      }
    }
  });

  // ---- attention -----------------------------------------------------------------------------
  EmulationResult res;
  res.batch = p.batch;
  res.heads = p.q_heads;
  res.q_len = nq;
  res.dim = d;
  res.o.assign(sz(p.batch * p.q_heads * nq * d), 0.f);
  res.lse.assign(sz(p.batch * p.q_heads * nq), 0.f);

  const float sm_f = static_cast<float>(sm);
  const float c2 = sm_f * 1.44269504088896340736f;   // fp32(sm_scale) · fp32(log2 e)
  const float ln2 = 0.693147180559945309417f;
  const float log2_ps = static_cast<float>(std::log2(static_cast<double>(pv.p_scale)));   // fp32(log2 p_scale)
  const int bq = ql.bq, bk = ql.bk;
  const int kchunk = (bk % 32 == 0 && !(stage_v && spec.pv_fp16)) ? 32 : 16;  // FP16 P̃V: m16n8k16
  const int M = opt.accum_mantissa_bits;
  const bool two_level = spec.two_level_accum;
  const std::int64_t q_blocks = L.q_blocks;

  detail::parallel_for(p.batch * p.q_heads * q_blocks, opt.threads, [&](std::int64_t item) {
    const std::int64_t blk = item % q_blocks;
    const std::int64_t bh = item / q_blocks;
    const std::int64_t b = bh / p.q_heads, h = bh % p.q_heads;
    const std::int64_t hk = h / p.group;
    const std::int64_t bhk = b * p.kv_heads + hk;
    const std::int64_t i0 = blk * bq;
    const std::int64_t i1 = std::min(nq, i0 + bq);

    // ΔS_j = q̄_blk · γK_j (fp32 result, double products/sum) for this query block.
    std::vector<float> dS;
    if (L.smooth_q) {
      dS.resize(sz(nk));
      const float* qm = qs.q_mean.data() + (bh * L.q_blocks + blk) * L.d_qk;
      const float* g = gk.data() + bhk * nk * d;
      for (std::int64_t j = 0; j < nk; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += static_cast<double>(qm[c]) * g[j * d + c];
        dS[sz(j)] = static_cast<float>(s);
      }
    }

    // Per-row state of the block (the kernel's registers): m, l, accumulator, fp32 O.
    const auto rows = static_cast<int>(i1 - i0);
    std::vector<float> m_row(sz(rows), kNegInf), l_row(sz(rows), 0.f);
    std::vector<float> acc_all(sz(rows * d), 0.f), o_all(sz(rows * d), 0.f);
    std::vector<std::int64_t> j_end_row(sz(rows)), tiles_row(sz(rows));
    std::int64_t tiles_max = 0;
    for (int r = 0; r < rows; ++r) {
      const std::int64_t i = i0 + r;
      std::int64_t j_end = nk;
      if (spec.causal == CausalMode::TopLeft) j_end = std::min(nk, i + 1);
      if (spec.causal == CausalMode::BottomRight) j_end = std::min(nk, i + nk - nq + 1);
      j_end_row[sz(r)] = j_end;
      tiles_row[sz(r)] = j_end > 0 ? (j_end + bk - 1) / bk : 0;   // later tiles: all masked, skipped
      tiles_max = std::max(tiles_max, tiles_row[sz(r)]);
    }
    std::vector<float> s(sz(bk)), pt(sz(bk));
    std::vector<double> chunk(sz(d));
    const float* vh = vhat.data() + bhk * nk * d;
    for (std::int64_t t = 0; t < tiles_max; ++t) {
      const std::int64_t j0 = t * bk;
      const int nt = static_cast<int>(std::min<std::int64_t>(bk, nk - j0));   // real keys in the tile
      for (int r = 0; r < rows; ++r) {
        if (t >= tiles_row[sz(r)]) continue;
        const std::int64_t i = i0 + r;
        const std::int64_t j_end = j_end_row[sz(r)];
        float& m = m_row[sz(r)];
        float& l = l_row[sz(r)];
        float* acc = acc_all.data() + r * d;
        float* o = o_all.data() + r * d;
        const std::int16_t* qc = opt.exact_qk ? nullptr : Qo.codes.data() + (bh * L.q_len_pad + i) * L.d_qk;
        const float qscale = opt.exact_qk ? 0.f : Qo.scale[sz(bh * L.q_len_pad + i)];
        const float* qf = opt.exact_qk ? Qo.smooth.data() + (bh * nq + i) * d : nullptr;
        // scores (log2 domain)
        float tile_max = kNegInf;
        for (int jj = 0; jj < nt; ++jj) {
          const std::int64_t j = j0 + jj;
          if (j >= j_end) {
            s[sz(jj)] = kNegInf;
            continue;
          }
          float sv;
          if (opt.exact_qk) {   // ablation: unquantized scores, s = (S + ΔS)·c2
            const float* kf = Ko.smooth.data() + (bhk * nk + j) * d;
            double acc_d = 0;
            for (int c = 0; c < d; ++c) acc_d += static_cast<double>(qf[c]) * kf[c];
            float S = static_cast<float>(acc_d);
            if (L.smooth_q) S = S + dS[sz(j)];
            sv = S * c2;
          } else {   // the contract: s = dot·((δq·δk)·c2) (+ ΔS·c2)
            const std::int16_t* kc = Ko.codes.data() + (bhk * L.kv_len_pad + j) * L.d_qk;
            std::int32_t dot = 0;
            for (int c = 0; c < L.d_qk; ++c) dot += static_cast<std::int32_t>(qc[c]) * static_cast<std::int32_t>(kc[c]);
            const float dq_dk = qscale * Ko.scale[sz(bhk * L.kv_len_pad + j)];
            sv = static_cast<float>(dot) * (dq_dk * c2);
            if (L.smooth_q) sv = sv + dS[sz(j)] * c2;
          }
          s[sz(jj)] = sv;
          if (sv > tile_max) tile_max = sv;   // NaN never wins (max.f32 ignores NaN)
        }
        const float m_new = std::max(m, tile_max);
        const float m_use = (m_new == kNegInf) ? 0.f : m_new;   // the usual -inf guard
        const float a = std::exp2(m - m_use);
        // P̃·p_scale in one exp2: exp2(s − (m_use − log2 p_scale)); l sums it (l is p_scale·Σ P̃)
        const float m_sh = m_use - log2_ps;
        float rowsum = 0.f;
        for (int jj = 0; jj < nt; ++jj) {
          pt[sz(jj)] = std::exp2(s[sz(jj)] - m_sh);
          rowsum += pt[sz(jj)];
        }
        l = l * a + rowsum;
        // P̂V̂ through the modelled tensor-core accumulator
        if (two_level) {
          std::fill(acc, acc + d, 0.f);
        } else {
          for (int c = 0; c < d; ++c) acc[c] = acc[c] * a;
        }
        for (int c0 = 0; c0 < nt; c0 += kchunk) {
          std::fill(chunk.begin(), chunk.end(), 0.0);
          const int c1 = std::min(nt, c0 + kchunk);
          bool any = false;
          for (int jj = c0; jj < c1; ++jj) {
            const float phat = pv.round(pt[sz(jj)]);
            if (phat == 0.f) continue;
            any = true;
            const double pd = phat;
            const float* vr = vh + (j0 + jj) * d;
            for (int c = 0; c < d; ++c) chunk[sz(c)] += pd * static_cast<double>(vr[c]);
          }
          if (!any && M == 23) continue;   // acc + 0 == acc exactly (and truncation is idempotent)
          for (int c = 0; c < d; ++c)
            acc[c] = truncate_mantissa(static_cast<float>(static_cast<double>(acc[c]) + chunk[sz(c)]), M);
        }
        if (two_level) {
          for (int c = 0; c < d; ++c) o[c] = o[c] * a + acc[c];
        }
        m = m_new;
      }
    }
    const float qnan = std::numeric_limits<float>::quiet_NaN();
    const std::int32_t kfb = qs.k_first_bad[sz(bhk)];
    const std::int32_t* vfb = qs.v_first_bad.data() + bhk * L.d_v;
    for (int r = 0; r < rows; ++r) {
      const std::int64_t i = i0 + r;
      const float* o = two_level ? o_all.data() + r * d : acc_all.data() + r * d;
      const float l = l_row[sz(r)], m = m_row[sz(r)];
      float* out = res.o.data() + res.index(b, h, i, 0);
      float& lse = res.lse[sz(bh * nq + i)];
      // Non-finite inputs (the flags of the quantize stage): keys [0, n_vis) are visible.
      const std::int64_t n_vis = std::max<std::int64_t>(0, j_end_row[sz(r)]);
      const bool row_bad = n_vis > 0 && (qs.q_bad[sz(bh * L.q_len_pad + i)] != 0 || kfb < n_vis);
      if (row_bad) {
        std::fill(out, out + d, qnan);
        lse = qnan;
        continue;
      }
      if (l == 0.f) {   // no visible key
        lse = kNegInf;
        continue;       // O stays 0
      }
      const float rl = 1.f / l;   // one IEEE reciprocal per row (the kernels' rcp.rn)
      for (int c = 0; c < d; ++c) {
        float x = o[c] * rl;   // l carries p_scale
        x = x * vscale[sz(bhk * d + c)];
        x = x + vmean[sz(bhk * d + c)];
        if (vfb[c] < n_vis) x = qnan;
        out[c] = opt.round_output ? round_to_dtype(x, spec.out_dtype) : x;
      }
      float lv = (m + (std::log2(l) - log2_ps)) * ln2;
      if (L.smooth_k) lv = lv + qs.q_kbias[sz(bh * L.q_len_pad + i)] * sm_f;
      lse = lv;
    }
  });
  return res;
}

}  // namespace sage2::reference
