// Emulation of the SageAttention2 kernel (the float-op contract is in sage2/reference.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/enum_names.hpp"
#include "reference/internal.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace {
constexpr base::Named<Granularity> kGranularityNames[] = {
    {Granularity::PerTensor, "per-tensor"}, {Granularity::PerBlock, "per-block"},
    {Granularity::PerThread, "per-thread"}, {Granularity::PerToken, "per-token"}};
constexpr base::Named<PvFormat> kPvFormatNames[] = {{PvFormat::E4M3, "e4m3"}, {PvFormat::E5M2, "e5m2"},
                                                    {PvFormat::Int8, "int8"}, {PvFormat::FP16, "fp16"},
                                                    {PvFormat::F32, "f32"},   {PvFormat::Kernel, "kernel"}};
}  // namespace

const char* granularity_name(Granularity g) noexcept { return base::name_of(g, kGranularityNames); }

const char* pv_format_name(PvFormat f) noexcept { return base::name_of(f, kPvFormatNames); }

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

// The emulation's options: InvalidArgument naming a bad one. Returns sm_scale.
double check_options(const EmulationOptions& opt, const kernels::KernelSpec& spec) {
  if (opt.accum_mantissa_bits < 1 || opt.accum_mantissa_bits > 23)
    bad_arg("accum_mantissa_bits=" + std::to_string(opt.accum_mantissa_bits) + " outside 1..23");
  if (!(opt.p_boundary_rel >= 0.f && opt.p_boundary_rel < 0.5f))
    bad_arg("p_boundary_rel=" + std::to_string(opt.p_boundary_rel) + " outside [0, 0.5)");
  if (static_cast<int>(opt.granularity) < 0 || static_cast<int>(opt.granularity) > 3)
    bad_arg("granularity=" + std::to_string(static_cast<int>(opt.granularity)) + " is not a Granularity");
  if (static_cast<int>(opt.pv_format) < 0 || static_cast<int>(opt.pv_format) > 5)
    bad_arg("pv_format=" + std::to_string(static_cast<int>(opt.pv_format)) + " is not a PvFormat");
  if (spec.causal != CausalMode::None && spec.causal != CausalMode::TopLeft && spec.causal != CausalMode::BottomRight)
    bad_arg("config.causal=" + std::to_string(static_cast<int>(spec.causal)) + " is not a CausalMode");
  const double sm = opt.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(spec.head_dim)));
  if (!std::isfinite(sm) || sm == 0.0) bad_arg("sm_scale=" + std::to_string(sm) + " must be finite and non-zero");
  return sm;
}

// A caller's stage (options.stage) must have the layout the spec gives these tensors.
void check_stage(const QuantizedHost& s, const kernels::QuantBuffers& L, const kernels::KernelSpec& spec) {
  auto n = [](std::int64_t c) { return static_cast<std::size_t>(c); };
  if (!detail::same_layout(s.layout, stage_layout(L, kernel_config(spec))) || s.q_codes.size() != n(L.q_codes()) ||
      s.q_scale.size() != n(L.q_scale()) || s.q_mean.size() != n(L.q_mean()) ||
      s.q_kbias.size() != n(L.q_kbias()) || s.k_codes.size() != n(L.k_codes()) ||
      s.k_scale.size() != n(L.k_scale()) || s.k_mean.size() != n(L.k_mean()) ||
      s.v_codes.size() != n(L.v_codes()) || s.v_scale.size() != n(L.v_scale()) ||
      s.v_mean.size() != n(L.v_mean()) || s.q_bad.size() != n(L.q_bad()) ||
      s.k_first_bad.size() != n(L.k_first_bad()) || s.v_first_bad.size() != n(L.v_first_bad()))
    bad_arg("options.stage: its buffers do not have the layout of spec " + spec.key() + " for these tensors");
  if (s.kv_tile_statistics &&
      s.v_tile_scale.size() != n(s.layout.batch * s.layout.kv_heads * L.k_blocks * L.d_v))
    bad_arg("options.stage: v_tile_scale has " + std::to_string(s.v_tile_scale.size()) + " entries, not B*Hkv*k_blocks*d_v");
  if (s.sample_statistics && s.v_amax.size() != n(L.v_scale()))
    bad_arg("options.stage: v_amax has " + std::to_string(s.v_amax.size()) + " entries, not B*Hkv*d_v");
}

// What the operand builders share: the tensors, the stage and its layout.
struct Inputs {
  const TensorRef &q, &k, &v;
  const detail::Problem& p;
  const kernels::QuantBuffers& L;
  const QuantizedHost& qs;
  const EmulationOptions& opt;
};

// γK of every kv head, [B*Hkv][nk][d] (ΔS, exact scores and the ablation granularities read it).
std::vector<float> smoothed_k_all(const Inputs& in) {
  const detail::Problem& p = in.p;
  std::vector<float> gk(sz(p.batch * p.kv_heads * p.kv_len * p.head_dim));
  detail::parallel_for(p.batch * p.kv_heads, in.opt.threads, [&](std::int64_t bh) {
    std::vector<float> x;
    detail::smoothed_k(in.k, in.qs, bh / p.kv_heads, bh % p.kv_heads, x);
    std::copy(x.begin(), x.end(), gk.begin() + bh * p.kv_len * p.head_dim);
  });
  return gk;
}

void size_codes(const Inputs& in, QkOperand& Qo, QkOperand& Ko) {
  const detail::Problem& p = in.p;
  const kernels::QuantBuffers& L = in.L;
  Qo.codes.assign(sz(p.batch * p.q_heads * L.q_len_pad * L.d_qk), 0);
  Qo.scale.assign(sz(p.batch * p.q_heads * L.q_len_pad), 0.f);
  Ko.codes.assign(sz(p.batch * p.kv_heads * L.kv_len_pad * L.d_qk), 0);
  Ko.scale.assign(sz(p.batch * p.kv_heads * L.kv_len_pad), 0.f);
}

// The kernel's own buffers: unpack the codes, expand the group scales to tokens.
void per_thread_operands(const Inputs& in, QkOperand& Qo, QkOperand& Ko) {
  const detail::Problem& p = in.p;
  const kernels::QuantBuffers& L = in.L;
  const kernels::QuantLayout& ql = L.layout;
  const QuantizedHost& qs = in.qs;
  size_codes(in, Qo, Ko);
  const int qg = ql.q_groups_per_block(), kg = ql.k_groups_per_block();
  detail::parallel_for(p.batch * p.q_heads, in.opt.threads, [&](std::int64_t bh) {
    std::vector<int> row(sz(L.d_qk));
    for (std::int64_t i = 0; i < L.q_len_pad; ++i) {
      unpack_codes(qs.q_codes.data() + (bh * L.q_len_pad + i) * L.row_bytes, L.qk_bits, L.d_qk, row.data());
      std::copy(row.begin(), row.end(), Qo.codes.begin() + (bh * L.q_len_pad + i) * L.d_qk);
      Qo.scale[sz(bh * L.q_len_pad + i)] =
          qs.q_scale[sz((bh * L.q_blocks + i / ql.bq) * qg + ql.q_group(static_cast<int>(i % ql.bq)))];
    }
  });
  detail::parallel_for(p.batch * p.kv_heads, in.opt.threads, [&](std::int64_t bh) {
    std::vector<int> row(sz(L.d_qk));
    for (std::int64_t j = 0; j < L.kv_len_pad; ++j) {
      unpack_codes(qs.k_codes.data() + (bh * L.kv_len_pad + j) * L.row_bytes, L.qk_bits, L.d_qk, row.data());
      std::copy(row.begin(), row.end(), Ko.codes.begin() + (bh * L.kv_len_pad + j) * L.d_qk);
      Ko.scale[sz(bh * L.kv_len_pad + j)] =
          qs.k_scale[sz((bh * L.k_blocks + j / ql.bk) * kg + ql.k_group(static_cast<int>(j % ql.bk)))];
    }
  });
}

// Ablation granularities: same smoothed values, same rounding rule, other groups.
void ablation_operands(const Inputs& in, const std::vector<float>& gk, QkOperand& Qo, QkOperand& Ko) {
  const detail::Problem& p = in.p;
  const kernels::QuantBuffers& L = in.L;
  const int R = L.qk_bits == 4 ? 7 : 127;
  const Granularity gran = in.opt.granularity;
  auto quantize_head = [&](const float* x, std::int64_t rows, int tile, std::int16_t* codes_out, float* scale_out) {
    std::vector<int> group(sz(rows));
    int n_groups = 1;
    for (std::int64_t r = 0; r < rows; ++r) {
      switch (gran) {
        case Granularity::PerTensor: group[sz(r)] = 0; break;
        case Granularity::PerBlock: group[sz(r)] = static_cast<int>(r / tile); break;
        case Granularity::PerToken: group[sz(r)] = static_cast<int>(r); break;
        case Granularity::PerThread: break;
      }
      n_groups = std::max(n_groups, group[sz(r)] + 1);
    }
    std::vector<std::int8_t> codes(sz(rows * L.d_qk));
    std::vector<float> scales(sz(n_groups));
    detail::quantize_grouped(x, rows, p.head_dim, p.head_dim, L.d_qk, group.data(), n_groups, R, codes.data(), scales.data(), nullptr);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < L.d_qk; ++c) codes_out[r * L.d_qk + c] = codes[sz(r * L.d_qk + c)];
      scale_out[r] = scales[sz(group[sz(r)])];
    }
  };
  size_codes(in, Qo, Ko);
  detail::parallel_for(p.batch * p.q_heads, in.opt.threads, [&](std::int64_t bh) {
    std::vector<float> x;
    detail::smoothed_q(in.q, in.qs, bh / p.q_heads, bh % p.q_heads, x);
    quantize_head(x.data(), p.q_len, L.layout.bq, Qo.codes.data() + bh * L.q_len_pad * L.d_qk,
                  Qo.scale.data() + bh * L.q_len_pad);
  });
  detail::parallel_for(p.batch * p.kv_heads, in.opt.threads, [&](std::int64_t bh) {
    quantize_head(gk.data() + bh * p.kv_len * p.head_dim, p.kv_len, L.layout.bk,
                  Ko.codes.data() + bh * L.kv_len_pad * L.d_qk, Ko.scale.data() + bh * L.kv_len_pad);
  });
}

// Q and K as the score loop reads them (exact_qk: the smoothed floats), and γK where needed.
void qk_operands(const Inputs& in, QkOperand& Qo, QkOperand& Ko, std::vector<float>& gk) {
  const detail::Problem& p = in.p;
  Qo.rows_pad = in.L.q_len_pad;
  Ko.rows_pad = in.L.kv_len_pad;
  Qo.d_qk = Ko.d_qk = in.L.d_qk;
  if (in.opt.exact_qk || in.L.smooth_q || in.opt.granularity != Granularity::PerThread) gk = smoothed_k_all(in);
  if (in.opt.exact_qk) {
    Ko.smooth = gk;
    Qo.smooth.resize(sz(p.batch * p.q_heads * p.q_len * p.head_dim));
    detail::parallel_for(p.batch * p.q_heads, in.opt.threads, [&](std::int64_t bh) {
      std::vector<float> x;
      detail::smoothed_q(in.q, in.qs, bh / p.q_heads, bh % p.q_heads, x);
      std::copy(x.begin(), x.end(), Qo.smooth.begin() + bh * p.q_len * p.head_dim);
    });
  } else if (in.opt.granularity == Granularity::PerThread) {
    per_thread_operands(in, Qo, Ko);
  } else {
    ablation_operands(in, gk, Qo, Ko);
  }
}

// V̂ [B*Hkv][nk][d] (token-major for the P̂V̂ loop), δV per (scale range, channel) and μ per
// channel. A scale range is all keys (today's contract: δV applied in the epilogue) or one KV
// tile (kv_tile_statistics: δV[t] applied when tile t is flushed into the fp32 O).
struct VOperand {
  PvRule pv;
  bool from_stage = false;  // the stage's own codes (the kernel's format)
  bool per_tile = false;
  std::int64_t ranges = 1;  // scale ranges per kv head: 1 or k_blocks
  std::vector<float> hat, scale, mean;   // scale [B*Hkv][ranges][d]
  float scale_of(std::int64_t bhk, std::int64_t range, int c, int d) const {
    return scale[sz((bhk * ranges + range) * d + c)];
  }
};

// The kernel's format: E4M3, or FP16 with an FP16-P̃V config; read from the stage's buffers when
// the format is the stage's own.
VOperand v_operand(const Inputs& in, const kernels::KernelSpec& spec) {
  const detail::Problem& p = in.p;
  const kernels::QuantBuffers& L = in.L;
  const QuantizedHost& qs = in.qs;
  const int d = p.head_dim;
  const std::int64_t nk = p.kv_len;
  const PvFormat fmt = in.opt.pv_format != PvFormat::Kernel ? in.opt.pv_format
                       : spec.pv_fp16                        ? PvFormat::FP16
                                                             : PvFormat::E4M3;
  VOperand V{pv_rule(fmt), fmt == (spec.pv_fp16 ? PvFormat::FP16 : PvFormat::E4M3), qs.kv_tile_statistics,
             qs.kv_tile_statistics ? L.k_blocks : 1, {}, {}, {}};
  if (spec.pv_acc16 && fmt == PvFormat::E4M3) V.pv.v_max = kernels::kV8Acc16Max;  // the stage's bound
  const std::int64_t bk = L.layout.bk;
  V.hat.resize(sz(p.batch * p.kv_heads * nk * d));
  V.scale.resize(sz(p.batch * p.kv_heads * V.ranges * d));
  V.mean.resize(sz(p.batch * p.kv_heads * d));
  detail::parallel_for(p.batch * p.kv_heads, in.opt.threads, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
    float* out = V.hat.data() + bh * nk * d;
    for (int c = 0; c < d; ++c) V.mean[sz(bh * d + c)] = qs.v_mean[sz(bh * L.d_v + c)];
    if (V.from_stage) {   // the kernel's buffers (e4m3, or fp16 with its power-of-two scale)
      for (int c = 0; c < d; ++c) {
        for (std::int64_t t = 0; t < V.ranges; ++t)
          V.scale[sz((bh * V.ranges + t) * d + c)] =
              V.per_tile ? qs.v_tile_scale[sz((bh * L.k_blocks + t) * L.d_v + c)] : qs.v_scale[sz(bh * L.d_v + c)];
        for (std::int64_t n = 0; n < nk; ++n) out[n * d + c] = qs.v_value(b, h, n, c);
      }
      return;
    }
    std::vector<float> x;
    std::vector<std::uint8_t> bad;
    detail::load_head(in.v, b, h, x);
    detail::sanitize(x, bad);   // non-finite V: 0 here (its outputs are poisoned by the flags)
    for (int c = 0; c < d; ++c) {
      const float mu = V.mean[sz(bh * d + c)];
      for (std::int64_t t = 0; t < V.ranges; ++t) {
        const std::int64_t n0 = V.per_tile ? t * bk : 0, n1 = V.per_tile ? std::min(nk, n0 + bk) : nk;
        float& scale = V.scale[sz((bh * V.ranges + t) * d + c)];
        float inv = 1.f;
        if (V.pv.v_max > 0.f) {   // scaled formats, same amax rule as the stage
          const float amax = V.per_tile ? detail::v_amax_of_keys(x, d, n0, n1, c, mu, L.smooth_v)
                                        : detail::v_amax(qs, b, h, c);
          scale = amax / V.pv.v_max;
          inv = (amax > 0.f && std::isfinite(amax)) ? V.pv.v_max / amax : 0.f;
        } else {
          scale = 1.f;
        }
        for (std::int64_t n = n0; n < n1; ++n) {
          const float v = V.pv.v_max > 0.f ? (x[sz(n * d + c)] - mu) * inv : x[sz(n * d + c)] - mu;
          out[n * d + c] = bad[sz(n * d + c)] ? 0.f : V.pv.round(v);
        }
      }
    }
  });
  return V;
}

// The attention loop's constants and operands (what every query block reads).
struct Attention {
  const Inputs& in;
  const kernels::KernelSpec& spec;
  const QkOperand &Qo, &Ko;
  const std::vector<float>& gk;
  const VOperand& V;
  float sm_f = 0, c2 = 0, log2_ps = 0;
  int kchunk = 32;
  bool acc16 = false;   // fp16 accumulator inside a tile (spec.pv_acc16), k-steps of kchunk keys
};

// One query block's position: its (batch, head), kv head and rows.
struct Block {
  std::int64_t bh = 0, b = 0, h = 0, bhk = 0, blk = 0, i0 = 0;
  int rows = 0;
};

// Per-row state of the block (the kernel's registers): m, l, accumulator, fp32 O, visible keys.
struct RowState {
  std::vector<float> m, l, acc, o;
  std::vector<double> slack;  // EmulationOptions::p_boundary_rel: Σ |Δcode|·|V̂|, carried like O
  std::vector<std::int64_t> j_end, tiles;
  std::int64_t tiles_max = 0;
};

// ΔS_j = q̄_blk · γK_j (fp32 result, double products/sum) for this query block.
std::vector<float> delta_s(const Attention& A, const Block& B) {
  const kernels::QuantBuffers& L = A.in.L;
  const int d = A.in.p.head_dim;
  const std::int64_t nk = A.in.p.kv_len;
  std::vector<float> dS(sz(nk));
  const float* qm = A.in.qs.q_mean.data() + (B.bh * L.q_blocks + B.blk) * L.d_qk;
  const float* g = A.gk.data() + B.bhk * nk * d;
  for (std::int64_t j = 0; j < nk; ++j) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += static_cast<double>(qm[c]) * g[j * d + c];
    dS[sz(j)] = static_cast<float>(s);
  }
  return dS;
}

RowState row_state(const Attention& A, const Block& B) {
  const std::int64_t nq = A.in.p.q_len, nk = A.in.p.kv_len;
  const int d = A.in.p.head_dim, bk = A.in.L.layout.bk;
  RowState st;
  st.m.assign(sz(B.rows), kNegInf);
  st.l.assign(sz(B.rows), 0.f);
  st.acc.assign(sz(B.rows * d), 0.f);
  st.o.assign(sz(B.rows * d), 0.f);
  if (A.in.opt.p_boundary_rel > 0.f) st.slack.assign(sz(B.rows * d), 0.0);
  st.j_end.resize(sz(B.rows));
  st.tiles.resize(sz(B.rows));
  for (int r = 0; r < B.rows; ++r) {
    const std::int64_t i = B.i0 + r;
    std::int64_t j_end = nk;
    if (A.spec.causal == CausalMode::TopLeft) j_end = std::min(nk, i + 1);
    if (A.spec.causal == CausalMode::BottomRight) j_end = std::min(nk, i + nk - nq + 1);
    st.j_end[sz(r)] = j_end;
    st.tiles[sz(r)] = j_end > 0 ? (j_end + bk - 1) / bk : 0;   // later tiles: all masked, skipped
    st.tiles_max = std::max(st.tiles_max, st.tiles[sz(r)]);
  }
  return st;
}

// Row i's scores against keys [j0, j0 + nt) in the log2 domain (masked: −inf) into s; their max.
float scores(const Attention& A, const Block& B, std::int64_t i, std::int64_t j0, int nt, std::int64_t j_end,
             const std::vector<float>& dS, std::vector<float>& s, float* dot_f = nullptr, float* f_of = nullptr) {
  const kernels::QuantBuffers& L = A.in.L;
  const detail::Problem& p = A.in.p;
  const bool exact = A.in.opt.exact_qk;
  const std::int16_t* qc = exact ? nullptr : A.Qo.codes.data() + (B.bh * L.q_len_pad + i) * L.d_qk;
  const float qscale = exact ? 0.f : A.Qo.scale[sz(B.bh * L.q_len_pad + i)];
  const float* qf = exact ? A.Qo.smooth.data() + (B.bh * p.q_len + i) * p.head_dim : nullptr;
  float tile_max = kNegInf;
  for (int jj = 0; jj < nt; ++jj) {
    const std::int64_t j = j0 + jj;
    if (j >= j_end) {
      s[sz(jj)] = kNegInf;
      continue;
    }
    float sv;
    if (exact) {   // ablation: unquantized scores, s = (S + ΔS)·c2
      const float* kf = A.Ko.smooth.data() + (B.bhk * p.kv_len + j) * p.head_dim;
      double acc_d = 0;
      for (int c = 0; c < p.head_dim; ++c) acc_d += static_cast<double>(qf[c]) * kf[c];
      float S = static_cast<float>(acc_d);
      if (L.smooth_q) S = S + dS[sz(j)];
      sv = S * A.c2;
    } else {   // the contract: s = dot·((δq·δk)·c2) (+ ΔS·c2)
      const std::int16_t* kc = A.Ko.codes.data() + (B.bhk * L.kv_len_pad + j) * L.d_qk;
      std::int32_t dot = 0;
      for (int c = 0; c < L.d_qk; ++c) dot += static_cast<std::int32_t>(qc[c]) * static_cast<std::int32_t>(kc[c]);
      const float dq_dk = qscale * A.Ko.scale[sz(B.bhk * L.kv_len_pad + j)];
      sv = static_cast<float>(dot) * (dq_dk * A.c2);
      if (dot_f) {  // EmulationOptions::exponent_form fused: the exponent's operands
        dot_f[jj] = static_cast<float>(dot);
        f_of[jj] = dq_dk * A.c2;
      }
      if (L.smooth_q) sv = sv + dS[sz(j)] * A.c2;
    }
    s[sz(jj)] = sv;
    if (sv > tile_max) tile_max = sv;   // NaN never wins (max.f32 ignores NaN)
  }
  return tile_max;
}

// One k-step of the tile's P̂·V̂: chunk_c = Σ_{jj in [c0, c1)} P̂_jj·V̂_(j0+jj),c, exact (products
// summed in double); false when every P̂ of the step is 0.
bool pv_chunk(const Attention& A, const float* vh, std::int64_t j0, int c0, int c1, const std::vector<float>& pt,
              std::vector<double>& chunk) {
  const int d = A.in.p.head_dim;
  std::fill(chunk.begin(), chunk.end(), 0.0);
  bool any = false;
  for (int jj = c0; jj < c1; ++jj) {
    const float phat = A.V.pv.round(pt[sz(jj)]);
    if (phat == 0.f) continue;
    any = true;
    const double pd = phat;
    const float* vr = vh + (j0 + jj) * d;
    for (int c = 0; c < d; ++c) chunk[sz(c)] += pd * static_cast<double>(vr[c]);
  }
  return any;
}

// x rounded to fp16 (nearest, ties to even; overflow to ±inf) in one step from double: the f16
// accumulator of an mma rounds the exact sum once (going through float would round twice).
double round_half(double x) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);                          // |x| = f·2^e, f in [0.5, 1)
  const int q = std::max(e - 11, -24);        // ulp: 11 significant bits; subnormals 2^-24
  const double r = std::nearbyint(std::ldexp(x, -q));
  const double y = std::ldexp(r, q);
  return std::fabs(y) > 65504.0 ? std::copysign(INFINITY, y) : y;
}

// The tile's P̂·V̂ sum in acc (fp32) through fp16 accumulators: per segment of kPvAcc16Keys keys,
// h = 0, then one fp16 rounding per k-step of A.kchunk keys; the segment's h is added into acc.
void accumulate_pv16(const Attention& A, const Block& B, std::int64_t j0, int nt, const std::vector<float>& pt,
                     float* acc, std::vector<double>& chunk, std::vector<double>& h) {
  const int d = A.in.p.head_dim;
  const float* vh = A.V.hat.data() + B.bhk * A.in.p.kv_len * d;
  for (int s0 = 0; s0 < nt; s0 += kernels::kPvAcc16Keys) {
    const int s1 = std::min(nt, s0 + kernels::kPvAcc16Keys);
    std::fill(h.begin(), h.end(), 0.0);
    for (int c0 = s0; c0 < s1; c0 += A.kchunk) {
      pv_chunk(A, vh, j0, c0, std::min(s1, c0 + A.kchunk), pt, chunk);
      for (int c = 0; c < d; ++c) h[sz(c)] = round_half(h[sz(c)] + chunk[sz(c)]);
    }
    for (int c = 0; c < d; ++c) acc[c] = s0 == 0 ? static_cast<float>(h[sz(c)]) : acc[c] + static_cast<float>(h[sz(c)]);
  }
}

// acc += P̂·V̂ over keys [j0, j0 + nt), chunk by chunk through the modelled tensor-core
// accumulator (mantissa truncated to accum_mantissa_bits after each chunk).
void accumulate_pv(const Attention& A, const Block& B, std::int64_t j0, int nt, const std::vector<float>& pt,
                   float* acc, std::vector<double>& chunk) {
  const int d = A.in.p.head_dim, M = A.in.opt.accum_mantissa_bits;
  const float* vh = A.V.hat.data() + B.bhk * A.in.p.kv_len * d;
  for (int c0 = 0; c0 < nt; c0 += A.kchunk) {
    const bool any = pv_chunk(A, vh, j0, c0, std::min(nt, c0 + A.kchunk), pt, chunk);
    if (!any && M == 23) continue;   // acc + 0 == acc exactly (and truncation is idempotent)
    for (int c = 0; c < d; ++c)
      acc[c] = truncate_mantissa(static_cast<float>(static_cast<double>(acc[c]) + chunk[sz(c)]), M);
  }
}

// EmulationOptions::p_boundary_rel: the row's slack (in O's units before 1/l, per-tile V scales
// applied) rescaled by a like O, plus |Δcode|·|V̂| of each key of tile t whose P̂ code the
// kernel may round the other way.
void add_boundary_slack(const Attention& A, const Block& B, std::int64_t t, std::int64_t j0, int nt,
                        const std::vector<float>& pt, float a, double* slack) {
  const int d = A.in.p.head_dim;
  const double eps = A.in.opt.p_boundary_rel;
  const float* vh = A.V.hat.data() + B.bhk * A.in.p.kv_len * d;
  for (int c = 0; c < d; ++c) slack[c] *= a;
  for (int jj = 0; jj < nt; ++jj) {
    const double p = pt[sz(jj)];
    const double dcode = A.V.pv.round(static_cast<float>(p * (1 + eps))) - A.V.pv.round(static_cast<float>(p * (1 - eps)));
    if (dcode == 0) continue;
    const float* vr = vh + (j0 + jj) * d;
    for (int c = 0; c < d; ++c)
      slack[c] += std::fabs(dcode * vr[c]) * (A.V.per_tile ? A.V.scale_of(B.bhk, t, c, d) : 1.f);
  }
}

// KV tile t for every row of the block that reaches it: scores, online softmax, P̂V̂.
void tile_step(const Attention& A, const Block& B, std::int64_t t, const std::vector<float>& dS, RowState& st) {
  const int d = A.in.p.head_dim, bk = A.in.L.layout.bk;
  const bool two_level = A.spec.two_level_accum;
  const std::int64_t j0 = t * bk;
  const int nt = static_cast<int>(std::min<std::int64_t>(bk, A.in.p.kv_len - j0));   // real keys in the tile
  std::vector<float> s(sz(bk)), pt(sz(bk));
  // EmulationOptions::exponent_form (never with smooth Q, nor for the exact-QK ablation); the
  // contract's fused form: the mma family with warps of 16 query rows
  const ExponentForm form = A.in.opt.exponent_form;
  const bool mma16 = A.spec.family == kernels::KernelFamily::AttentionMma && A.spec.tile.bq == 16 * A.spec.tile.warps;
  const bool fused = (form == ExponentForm::Fused || (form == ExponentForm::Contract && mma16)) &&
                     !A.in.L.smooth_q && !A.in.opt.exact_qk;
  std::vector<float> dot_f(fused ? sz(bk) : 0), f_of(fused ? sz(bk) : 0);
  // EmulationOptions::row_sum; the contract's sum of P̂: the mma family with FP16 P̃V
  const RowSumForm rs = A.in.opt.row_sum;
  const bool of_phat = rs == RowSumForm::OfPHat ||
                       (rs == RowSumForm::Contract && A.spec.family == kernels::KernelFamily::AttentionMma && A.spec.pv_fp16);
  std::vector<double> chunk(sz(d)), h(A.acc16 ? sz(d) : 0);
  for (int r = 0; r < B.rows; ++r) {
    if (t >= st.tiles[sz(r)]) continue;
    float& m = st.m[sz(r)];
    float& l = st.l[sz(r)];
    float* acc = st.acc.data() + r * d;
    float* o = st.o.data() + r * d;
    const float tile_max = scores(A, B, B.i0 + r, j0, nt, st.j_end[sz(r)], dS, s, fused ? dot_f.data() : nullptr,
                                  fused ? f_of.data() : nullptr);
    const float m_new = std::max(m, tile_max);
    const float m_use = (m_new == kNegInf) ? 0.f : m_new;   // the usual -inf guard
    const float a = std::exp2(m - m_use);
    // P̃·p_scale in one exp2: exp2(s − (m_use − log2 p_scale)); l sums it (l is p_scale·Σ P̃)
    const float m_sh = m_use - A.log2_ps;
    float rowsum = 0.f;
    for (int jj = 0; jj < nt; ++jj) {
      // (a masked key's s is −inf: it stays 0 in either form)
      pt[sz(jj)] = fused && s[sz(jj)] != kNegInf ? std::exp2(std::fma(dot_f[sz(jj)], f_of[sz(jj)], -m_sh))
                                                 : std::exp2(s[sz(jj)] - m_sh);
      if (!of_phat) rowsum += pt[sz(jj)];
    }
    if (of_phat)   // EmulationOptions::row_sum OfPHat: 16-key steps of P̂
      for (int c0 = 0; c0 < nt; c0 += 16) {
        double step = 0;
        for (int jj = c0; jj < std::min(nt, c0 + 16); ++jj) step += A.V.pv.round(pt[sz(jj)]);
        rowsum = static_cast<float>(static_cast<double>(rowsum) + step);
      }
    l = l * a + rowsum;
    if (two_level) {
      std::fill(acc, acc + d, 0.f);
    } else {
      for (int c = 0; c < d; ++c) acc[c] = acc[c] * a;
    }
    if (!st.slack.empty()) add_boundary_slack(A, B, t, j0, nt, pt, a, st.slack.data() + r * d);
    if (A.acc16)
      accumulate_pv16(A, B, j0, nt, pt, acc, chunk, h);
    else
      accumulate_pv(A, B, j0, nt, pt, acc, chunk);
    if (two_level && A.V.per_tile) {   // the flush takes the tile's V scale
      for (int c = 0; c < d; ++c) o[c] = o[c] * a + acc[c] * A.V.scale_of(B.bhk, t, c, d);
    } else if (two_level) {
      for (int c = 0; c < d; ++c) o[c] = o[c] * a + acc[c];
    }
    m = m_new;
  }
}

// The epilogue of the block's rows: O = O / l · δV + μ, the LSE, the non-finite input flags.
void write_rows(const Attention& A, const Block& B, const RowState& st, EmulationResult& res) {
  const kernels::QuantBuffers& L = A.in.L;
  const QuantizedHost& qs = A.in.qs;
  const int d = A.in.p.head_dim;
  const std::int64_t nq = A.in.p.q_len;
  const float ln2 = 0.693147180559945309417f;
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const std::int32_t kfb = qs.k_first_bad[sz(B.bhk)];
  const std::int32_t* vfb = qs.v_first_bad.data() + B.bhk * L.d_v;
  for (int r = 0; r < B.rows; ++r) {
    const std::int64_t i = B.i0 + r;
    const float* o = A.spec.two_level_accum ? st.o.data() + r * d : st.acc.data() + r * d;
    const float l = st.l[sz(r)], m = st.m[sz(r)];
    float* out = res.o.data() + res.index(B.b, B.h, i, 0);
    float& lse = res.lse[sz(B.bh * nq + i)];
    // Non-finite inputs (the flags of the quantize stage): keys [0, n_vis) are visible.
    const std::int64_t n_vis = std::max<std::int64_t>(0, st.j_end[sz(r)]);
    const bool row_bad = n_vis > 0 && (qs.q_bad[sz(B.bh * L.q_len_pad + i)] != 0 || kfb < n_vis);
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
    if (!st.slack.empty())
      for (int c = 0; c < d; ++c)
        res.o_slack[res.index(B.b, B.h, i, c)] = static_cast<float>(
            st.slack[sz(r * d + c)] / l * (A.V.per_tile ? 1.f : std::fabs(A.V.scale_of(B.bhk, 0, c, d))));
    for (int c = 0; c < d; ++c) {
      float x = o[c] * rl;   // l carries p_scale
      if (!A.V.per_tile) x = x * A.V.scale_of(B.bhk, 0, c, d);   // per tile: applied at each flush
      x = x + A.V.mean[sz(B.bhk * d + c)];
      if (vfb[c] < n_vis) x = qnan;
      out[c] = A.in.opt.round_output ? round_to_dtype(x, A.spec.out_dtype) : x;
    }
    float lv = (m + (std::log2(l) - A.log2_ps)) * ln2;
    if (L.smooth_k) lv = lv + qs.q_kbias[sz(B.bh * L.q_len_pad + i)] * A.sm_f;
    lse = lv;
  }
}

// One query block of one (batch, q head): the kernel's CTA.
void emulate_block(const Attention& A, std::int64_t item, EmulationResult& res) {
  const detail::Problem& p = A.in.p;
  const std::int64_t q_blocks = A.in.L.q_blocks;
  Block B;
  B.blk = item % q_blocks;
  B.bh = item / q_blocks;
  B.b = B.bh / p.q_heads;
  B.h = B.bh % p.q_heads;
  B.bhk = B.b * p.kv_heads + B.h / p.group();
  B.i0 = B.blk * A.in.L.layout.bq;
  B.rows = static_cast<int>(std::min(p.q_len, B.i0 + A.in.L.layout.bq) - B.i0);
  const std::vector<float> dS = A.in.L.smooth_q ? delta_s(A, B) : std::vector<float>();
  RowState st = row_state(A, B);
  for (std::int64_t t = 0; t < st.tiles_max; ++t) tile_step(A, B, t, dS, st);
  write_rows(A, B, st, res);
}

}  // namespace

EmulationResult emulate_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                  const KernelConfig& config, const EmulationOptions& opt) {
  const detail::Problem p = detail::check_qkv(q, k, v);
  const kernels::KernelSpec spec = kernel_spec(config);
  const double sm = check_options(opt, spec);

  // The quantize stage, exactly as the GPU runs it (validates spec vs tensors too), or the
  // caller's buffers of the same layout.
  if (opt.pv_acc16_step != 0 && opt.pv_acc16_step != 16 && opt.pv_acc16_step != 32)
    bad_arg("pv_acc16_step=" + std::to_string(opt.pv_acc16_step) + " (0, 16 or 32)");
  if (spec.pv_acc16 && !spec.two_level_accum)
    bad_arg("config.pv_accum=fp16 needs config.two_level_accum (the fp16 accumulator is flushed into fp32 between tiles)");
  if (opt.kv_tile_statistics && !spec.two_level_accum)
    bad_arg("kv_tile_statistics needs config.two_level_accum (per-tile V scales are applied at the per-tile flush)");
  QuantizedHost own;
  if (!opt.stage) {
    QuantizeOptions qopt;
    qopt.threads = opt.threads;
    qopt.kv_tile_statistics = opt.kv_tile_statistics;
    qopt.sample_statistics = opt.sample_statistics;
    qopt.sample_tiles = opt.sample_tiles;
    qopt.sample_unit = opt.sample_unit;
    qopt.v_headroom = opt.v_headroom;
    own = quantize_stage(q, k, v, config, qopt);
  }
  const kernels::QuantBuffers L = kernels::quant_buffers(p.quant_problem(), spec);
  if (opt.stage) {
    if (opt.stage->kv_tile_statistics != opt.kv_tile_statistics)
      bad_arg(std::string("options.stage was made with kv_tile_statistics=") +
              (opt.stage->kv_tile_statistics ? "true" : "false") + " but options.kv_tile_statistics=" +
              (opt.kv_tile_statistics ? "true" : "false"));
    if (opt.stage->sample_statistics != opt.sample_statistics)
      bad_arg(std::string("options.stage was made with sample_statistics=") +
              (opt.stage->sample_statistics ? "true" : "false") + " but options.sample_statistics=" +
              (opt.sample_statistics ? "true" : "false"));
    check_stage(*opt.stage, L, spec);
  }
  const Inputs in{q, k, v, p, L, opt.stage ? *opt.stage : own, opt};

  QkOperand Qo, Ko;
  std::vector<float> gk;   // γK [B*Hkv][nk][d]
  qk_operands(in, Qo, Ko, gk);
  const VOperand V = v_operand(in, spec);

  Attention A{in, spec, Qo, Ko, gk, V};
  A.sm_f = static_cast<float>(sm);
  A.c2 = A.sm_f * 1.44269504088896340736f;   // fp32(sm_scale) · fp32(log2 e)
  A.log2_ps = static_cast<float>(std::log2(static_cast<double>(V.pv.p_scale)));   // fp32(log2 p_scale)
  A.kchunk = (L.layout.bk % 32 == 0 && !(V.from_stage && spec.pv_fp16)) ? 32 : 16;  // FP16 P̃V: m16n8k16
  A.acc16 = spec.pv_acc16;
  if (A.acc16 && opt.pv_acc16_step != 0) A.kchunk = opt.pv_acc16_step;

  EmulationResult res;
  res.batch = p.batch;
  res.heads = p.q_heads;
  res.q_len = p.q_len;
  res.dim = p.head_dim;
  res.o.assign(sz(p.batch * p.q_heads * p.q_len * p.head_dim), 0.f);
  res.lse.assign(sz(p.batch * p.q_heads * p.q_len), 0.f);
  if (opt.p_boundary_rel > 0.f) res.o_slack.assign(res.o.size(), 0.f);
  detail::parallel_for(p.batch * p.q_heads * L.q_blocks, opt.threads,
                       [&](std::int64_t item) { emulate_block(A, item, res); });
  return res;
}

}  // namespace sage2::reference
