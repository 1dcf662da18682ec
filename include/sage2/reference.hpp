// sage2::reference — the CPU reference of sage2 (no GPU needed).
//
// Three things live here:
//  1. exact attention in double precision (the ground truth every accuracy number is measured
//     against);
//  2. the reference of the GPU *quantize stage*: the exact buffers described in
//     kernels/quant_buffers.hpp, produced with the same float operations (bit-faithful);
//  3. an emulation of the quantized attention kernel described by a KernelConfig (family, tile,
//     code width, smoothing, causal mode, ...: the public twin of the spec the GPU kernels are
//     generated from, converted inside the library, so groups, padding and sum orders are the
//     kernels' own), plus ablation knobs (EmulationOptions) that the kernels do not have. The
//     emulation *defines* the float-op contract the GPU attention kernel follows.
//
// Users debugging accuracy can call these directly; the GPU test suite uses them as its oracle.
//
// =============================================================================================
// NUMERICS CONTRACT OF THE ATTENTION EMULATION (one query row i of head (b, h); kv head
// h_kv = h / (q_heads / kv_heads); all arithmetic fp32 unless said otherwise)
// =============================================================================================
//  Quantize stage (kernels/quant_buffers.hpp, reproduced exactly by quantize_stage()); a non-finite
//  input element reads as 0 in every statistic and gets code 0 (see NaN / Inf policy below):
//    k̄ = smooth_k ? mean_n K : 0;  γK_j = float(K_j) - k̄
//    q̄_b = smooth_q ? mean of Q over query block b (valid rows) : 0;  γQ_i = float(Q_i) - q̄_b
//    INT4/INT8 symmetric per group g:  δ_g = amax_g / R,  inv_g = R / amax_g (0 if amax_g is 0 or
//    not finite),  code = rint(clamp(nan→0(x·inv_g), -R, R))  (R = 7 or 127, ties to even)
//    V: μ = smooth_v ? mean_n V : 0;  δV[c] = amax_c / 448;  V̂ = e4m3_rn_satfinite((V-μ)·448/amax_c)
//    One-pass statistics (QuantizeOptions / EmulationOptions::kv_tile_statistics; DESIGN.md "the
//      amendment that one pass over K and V may use"): k̄ and μ are the means over the first KV
//      tile's keys [0, min(bk, kv_len)) (not all keys); V is scaled per (tile t, channel c):
//      amax_tc over tile t's keys, δV[t][c] = amax_tc / 448, V̂ = e4m3((V-μ)·448/amax_tc) (FP16 P̃V:
//      the power-of-two rule below, per tile)
//    FP16 P̃V (KernelConfig::pv_precision Fp16): δV[c] = 2^max(0, e-15) with amax_c = f·2^e, f in
//      [0.5, 1) (so δV = 1 unless |V-μ| reaches 2^15, which only bf16 inputs can), inv = 1/δV (0 if
//      amax_c is 0 or not finite), V̂ = fp16_rn((V-μ)·inv): V itself for an unsmoothed fp16 input
//  Scores, per KV tile of bk keys (tile t covers keys [t·bk, t·bk+bk)):
//    dot_ij = Σ_c Q̂_ic·K̂_jc                        exact int32
//    s_ij   = float(dot_ij) · ((δq_i · δk_j) · c2)   (log2 domain; each product rounded to fp32;
//             c2 = fp32(sm_scale) · fp32(log2 e): the scale folded into the dequantisation, one
//             multiply per score)
//    s_ij  += ΔS_ij · c2  (smooth_q only)  ΔS_ij = Σ_c q̄_b[c]·γK_j[c], computed from the
//             UN-quantized γK (reference: products summed in double, rounded once to fp32)
//    s_ij   = -inf for masked keys (causal) and for padded keys j >= kv_len
//    (ablation exact_qk: s_ij = (S_ij + ΔS_ij) · c2 from the unquantized product S_ij)
//  Online softmax, per tile (m = -inf, l = 0, O = 0, A = 0 at the start):
//    m_new = max(m, max_j s_ij)     max ignores NaN (PTX max.f32 semantics)
//    m_use = (m_new == -inf) ? 0 : m_new          (the usual guard against -inf - -inf)
//    a     = exp2(m - m_use)        (exp2(-inf) = 0; a tile whose keys are all masked changes
//                                    nothing and may be skipped)
//    L     = fp32(log2 p_scale)     E4M3: p_scale = 448 (static scale 1/448), L = 8.807355;
//                                   FP16: p_scale = 1, L = 0
//    P̃'_ij = exp2(s_ij - (m_use - L))   = p_scale·P̃_ij ∈ [0, p_scale], in one exp2 (the scale
//                                       folded into the exponent: no multiply per score)
//            mma family with 16-row warps (bq = 16·warps), without smooth_q and without a
//            tensor mask: the dequantisation fused
//            into the exponent's argument, P̃'_ij = exp2(fma(float(dot_ij), (δq_i·δk_j)·c2,
//            -(m_use - L))), one rounding instead of two (EmulationOptions::exponent_form); m is
//            the same (max s = f·max dot per scale group, bit for bit); masked keys stay 0
//    l     = l·a + rowsum_j(P̃'_ij)  rowsum of the UNquantized P̃', in key order, fp32
//            mma family with FP16 P̃V: rowsum of P̂ instead, 16 keys a step, each step's exact sum
//            rounded once into an fp32 tile sum that starts from 0 (EmulationOptions::row_sum)
//    P̂_ij  = fmt(P̃'_ij)             RNE, saturating (E4M3); FP16: fp16_rn(P̃_ij) (P̃ <= 1: no overflow)
//    Tensor-core accumulator with `accum_mantissa_bits` = M (23 = true fp32, 13 = the FP22 the
//    paper measured on Ada for f32.e4m3.e4m3.f32): the tile's keys are consumed in k-chunks of
//    32 keys (one mma k32 / wgmma k32 step; 16 when bk is not a multiple of 32, and for FP16 P̃V:
//    mma m16n8k16, whose f16 products are exact in fp32, accumulated in fp32, M = 23). Model of one
//    step:  chunk_c = Σ_{j in chunk} P̂_ij·V̂_jc  (exact, products summed in double),
//           acc_c  = trunc_M(fp32(acc_c + chunk_c))   (one RN rounding to fp32, then the low
//                                                       23-M mantissa bits zeroed: truncation)
//    two_level_accum = true : acc starts from 0 in every tile (R = acc after the tile), then
//                             O_c = O_c·a + R_c  in true fp32
//                             (kv_tile_statistics: O_c = O_c·a + R_c·δV[t][c], the tile's scale
//                             taken at the flush, and no δV in the epilogue)
//    fp16 accumulation (KernelConfig::pv_accum Fp16; needs two_level_accum): the tile's keys are
//      cut into segments of 64 (kernels::kPvAcc16Keys) and each segment into k-steps of 32 keys
//      (e4m3 mma m16n8k32.f16) or 16 (FP16 P̃V: m16n8k16.f16; EmulationOptions::pv_acc16_step
//      overrides). Per segment:  h_c = 0;  per step: h_c = fp16_rn(h_c + chunk_c)  (chunk_c exact,
//      one RN rounding to fp16 per mma); then R_c = h_c (first segment) or fp32(R_c + h_c);
//      O_c = O_c·a + R_c as above. V̂'s bound keeps every |h_c| < 65504 (64·448·2.25 for e4m3,
//      δV[c] = amax_c / 2.25; 64·2^9 for FP16, δV[c] = 2^max(0, e-9)).
//    two_level_accum = false: acc is carried across tiles and rescaled in fp32 before the tile's
//                             first chunk: acc_c = acc_c·a (then truncated by the next chunk add);
//                             O = acc at the end
//    m = m_new
//  (Tiles are processed in key order; every row of a query block runs the same tile sequence up
//  to its last visible key. The reference evaluates rows independently, as the kernel does.)
//  Epilogue:
//    l == 0 (no visible key: all keys masked) → O_i = 0 and LSE_i = -inf
//    non-finite inputs: row / channel poison from the stage's flags (NaN / Inf policy below)
//    O_ic = (O_c · r) · δV[c] + μ[c]      r = 1/l (IEEE reciprocal, one per row); evaluated left
//                                         to right, fp32; l carries p_scale
//    (kv_tile_statistics: O_ic = (O_c · r) + μ[c]; δV is already in O)
//    LSE_i = (m + (log2(l) - L)) · ln2 + q_kbias_i · sm_scale   natural log; q_kbias_i = Q_i·k̄ makes the
//            returned LSE the one of the UN-smoothed scores (smooth-Q's ΔS is already in S)
//  Causal masks (CausalMode): TopLeft: key j visible to query i iff j <= i;
//    BottomRight: iff j <= i + kv_len - q_len (rows with no visible key get O = 0, LSE = -inf).
//  The reference itself is built for the x86-64 baseline (no FMA contraction); a build with
//  -march=native and -ffp-contract=fast may change the last bit of emulated outputs.
//  Known, accepted differences of a GPU kernel vs this emulation (bit-exactness is promised for
//  the quantize-stage codes away from rounding boundaries, not for the attention output):
//    exp2 (ex2.approx), the order of fp32 reductions (rowmax, rowsum, ΔS, q̄, q·k̄; the K/V
//    channel sums follow the split stage's fixed order bit for bit — chunks of
//    kernels::quantize_stats_chunk tokens, kernels/quant_buffers.hpp — or the fused stage's with
//    QuantizeOptions::fused_stats_order), FMA contraction of
//    s = dot·δ + ΔS·c2 and of the exponent s − (m_use − L) (the wgmma family evaluates it as one
//    FMA dot·δ − (m_use − L) without smooth-Q; m is the same: max_j(dot_j)·δ = max_j(dot_j·δ) for
//    δ >= 0), and the (unpublished) internal adder of the tensor core.
//
// NaN / Inf policy (project issue #4: "Bad input")
//  exact_attention: no sanitising, plain IEEE double arithmetic of the textbook formula over the
//    VISIBLE keys only (masked keys are never read). Row i with n_vis visible keys gets:
//     - n_vis = 0: O = 0 and LSE = -inf (nothing is read, whatever q_i holds);
//     - q_i non-finite: every score is NaN or ±Inf → O row NaN, LSE NaN;
//     - q_i finite, k_j of a visible key non-finite: s_ij is NaN, +Inf or -Inf (0·Inf = NaN,
//       Inf - Inf = NaN). NaN or +Inf → O row NaN, LSE NaN. -Inf → key j gets weight
//       exp(-Inf) = 0, as if masked (if no visible key scores finitely, max = -inf → NaN row);
//     - v[j, c] non-finite for a visible j: O[i, c] is NaN or ±Inf (a weight that underflowed to
//       0 still gives 0·Inf = NaN); the other channels and the LSE are unaffected.
//  Quantized path (quantize_stage, this emulation, the GPU kernels; same rule everywhere): a
//    non-finite input element reads as 0 in every statistic of the quantize stage (channel sums,
//    min/max, k̄, μ, q̄, q·k̄, Q/K group amax, V amax) and its code is 0, so it never spreads
//    through a mean or a shared scale. The stage records q_bad[i] (row i of Q has one),
//    k_first_bad (smallest key whose K row has one) and v_first_bad[c] (smallest key j with
//    V[j, c] non-finite). The epilogue of row i, with visible keys [0, n_vis):
//       n_vis = 0                              → O = 0, LSE = -inf   (as exact)
//       q_bad[i] or k_first_bad < n_vis        → O row = NaN, LSE = NaN
//       otherwise O[i, c] = NaN iff v_first_bad[c] < n_vis; LSE finite
//    Poison is always NaN (never ±Inf). Every other output is computed from finite values only
//    and equals, bit for bit in the emulation, the output for the same inputs with the
//    non-finite elements replaced by 0. Nothing loops on data: no hang.
//    kv_tile_statistics keeps all of this: the first tile's means and each tile's V amax are
//    statistics like the others (a bad element reads as 0 there), and the flags are still taken
//    over all keys, so a bad V[j, c] only changes its own code and poisons the rows that see j.
//  Difference from exact_attention (finite/non-finite pattern, element for element): identical,
//    except for the -Inf case above — a visible key whose k_j holds ±Inf but no NaN and whose
//    exact score against q_i is -Inf (each Inf element meets a non-zero q_i element, all products
//    negative after the sign of sm_scale) has weight 0 there, while sage2 cannot see that sign
//    (the key's codes are 0) and returns a NaN row. A key with a NaN, or a 0 in q_i facing its
//    Inf, is always NaN in both. (Finite inputs whose fp32 statistics overflow — bf16 values
//    near 3e38 — are outside this policy.)
//
// Errors: every entry point throws sage2::Error(ErrorCode::InvalidArgument, "<argument>=<value>
// ...") for unusable input (null data, stride_dim != 1, mismatched shapes, head mismatch for GQA,
// config/tensor head_dim mismatch, bad knob values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sage2/sage2.hpp"

namespace sage2::reference {

// ---------------------------------------------------------------------------------------------
// The attention kernel the reference reproduces (the library converts it to the kernels' spec).
struct KernelTile {
  int bq = 128;     // query rows per CTA
  int bk = 64;      // keys per KV tile
  int warps = 4;    // warps per CTA (consumer warps for the wgmma family)
  int stages = 1;   // pipeline stages (no effect on the numerics)
  bool operator==(const KernelTile&) const = default;
};
struct KernelConfig {
  // Mma (mma.sync; every arch) or Wgmma (sm_90a, 8-bit, FP8 P̃V, head dim <= 256); Auto: the
  // family a Context would pick for arch, qk_bits, head_dim and P̃V precision.
  AttentionFamily family = AttentionFamily::Mma;
  std::string arch = "sm_90a";  // an arch of the table: "sm_80" ... "sm_121" (as DeviceInfo::arch)
  int head_dim = 128;
  CausalMode causal = CausalMode::None;
  KernelTile tile{};
  int qk_bits = 8;              // 4 or 8
  bool smooth_q = false, smooth_k = true, smooth_v = false;
  DType in_dtype = DType::F16, out_dtype = DType::F16;
  bool two_level_accum = true;
  bool return_lse = false;
  // P̃V in FP8 e4m3 or FP16 (contract above); Auto: the arch's default (FP16 on sm_80/86/87, where
  // FP8 does not exist; FP8 elsewhere). kernel_config() of a spec writes Fp8 or Fp16.
  PvPrecision pv_precision = PvPrecision::Auto;
  // P̃V accumulated in fp32, or in fp16 inside a tile (contract above); Auto: the arch's default
  // for the resolved precision. kernel_config() of a spec writes Fp32 or Fp16.
  PvAccum pv_accum = PvAccum::Auto;
  bool operator==(const KernelConfig&) const = default;
};

// The layout of the quantize-stage buffers (kernels/quant_buffers.hpp) for a problem and a config:
// sizes, padding and the per-thread scale groups. Every vector of QuantizedHost has the count
// its comment gives in these terms.
struct StageLayout {
  KernelConfig config;  // the kernel the buffers feed (family resolved); the layout derives from it
  std::int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;
  int head_dim = 0;
  std::int64_t q_blocks = 0, k_blocks = 0;     // ceil(len / bq), ceil(len / bk)
  std::int64_t q_len_pad = 0, kv_len_pad = 0;  // blocks * tile
  int d_qk = 0;        // padded Q/K head dim (elements)
  int row_bytes = 0;   // bytes of one quantized Q/K row
  int d_v = 0;         // padded V head dim
  int stats_chunk = 0;            // tokens per statistics chunk of the fused stage
  std::int64_t stats_chunks = 0;  // ceil(kv_len / stats_chunk)
  int q_groups_per_block = 0, k_groups_per_block = 0;
  std::vector<int> q_group_of_row;  // [bq]: the Q scale group of each row of a query block
  std::vector<int> k_group_of_key;  // [bk]: the K scale group of each key of a KV block
  std::vector<int> v_slot_in_16;    // [16]: stored column of each key of a 16-key group of V̂
  int v_code_bytes = 1;             // 1: e4m3 V̂; 2: fp16 V̂ (FP16 P̃V)

  int q_group(int row_in_block) const { return q_group_of_row[static_cast<std::size_t>(row_in_block)]; }
  int k_group(int key_in_block) const { return k_group_of_key[static_cast<std::size_t>(key_in_block)]; }
  // Column of `key` in the transposed V̂ ([d_v][kv_len_pad]): the wgmma family and FP16 V̂ permute
  // the keys of each 16-key group, the mma family's e4m3 V̂ keeps key order.
  std::int64_t v_slot(std::int64_t key) const {
    return (key & ~std::int64_t(15)) + v_slot_in_16[static_cast<std::size_t>(key & 15)];
  }
  bool operator==(const StageLayout&) const = default;
};

// ---------------------------------------------------------------------------------------------
// Scalar formats. All conversions round to nearest, ties to even.
float half_to_float(std::uint16_t bits) noexcept;        // exact (subnormals, ±Inf, NaN payload)
std::uint16_t float_to_half(float x) noexcept;            // RNE; overflow → ±Inf; NaN → quiet NaN
float bf16_to_float(std::uint16_t bits) noexcept;         // exact
std::uint16_t float_to_bf16(float x) noexcept;            // RNE; NaN → quiet NaN (sign kept)

// FP8 (OCP 8-bit floating point): E4M3 ("fn": no Inf, NaN = S.1111.111, max ±448) and E5M2
// (IEEE-like: Inf = S.11111.00, NaN = S.11111.{01,10,11}, max finite ±57344).
// Encoding = cvt.rn.satfinite: RNE; |x| beyond the largest finite value (Inf included) saturates
// to ±max; NaN encodes to 0x7F for both formats; -0 and negative values that round to zero keep
// the sign bit (0x80).
enum class Fp8Format : int { E4M3 = 0, E5M2 = 1 };
const char* fp8_format_name(Fp8Format f) noexcept;
float fp8_max(Fp8Format f) noexcept;
float fp8_to_float(std::uint8_t code, Fp8Format f) noexcept;
std::uint8_t float_to_fp8(float x, Fp8Format f) noexcept;
float fp8_round(float x, Fp8Format f) noexcept;          // fp8_to_float(float_to_fp8(x))

// Distance of an unrounded value to the nearest rounding boundary, in units of the local code
// step: 0 = exactly on a tie (GPU and CPU may legitimately disagree), 0.5 = exactly representable.
// Values beyond the largest code get 0.5 + overshoot/step; NaN gets +Inf (NaN maps to a fixed
// code, no boundary).
float fp8_margin(float x, Fp8Format f) noexcept;
float int_margin(float t, int R) noexcept;               // for t = x·inv before clamp/rint
float half_margin(float x) noexcept;                      // fp16 RNE (FP16 V̂); overflow: distance past 65520

// The integer rule of the quantize stage: rint(clamp(NaN→0(x·inv), -R, R)), ties to even.
int quantize_int(float x, float inv, int R) noexcept;

// Keep `mantissa_bits` (0..23) of an fp32 mantissa, zeroing the rest (truncation toward zero).
// 23 returns x unchanged; Inf/NaN are returned unchanged.
float truncate_mantissa(float x, int mantissa_bits) noexcept;

// Round a float to the storage format of `t` (F16/BF16 RNE, F32 unchanged).
float round_to_dtype(float x, DType t) noexcept;

// ---------------------------------------------------------------------------------------------
// Host tensors.

// Element (b, h, n, c) of a host tensor as float. No bounds checks.
float load(const TensorRef& t, std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) noexcept;
// Throws InvalidArgument naming `name` unless t is a usable host tensor (non-null, sizes > 0,
// stride_dim == 1, dtype F16/BF16/F32).
void validate_tensor(const TensorRef& t, const char* name);

// An owning host tensor (zero-filled) whose ref() can be handed to every function here and to
// the GPU API after a copy. set() rounds to the dtype (RNE).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t dim,
             bool nhd = false);
  TensorRef ref() const;
  void set(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c, float value);
  float get(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) const;
  std::size_t offset(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c) const;
  DType dtype() const { return dtype_; }
  std::int64_t batch() const { return b_; }
  std::int64_t heads() const { return h_; }
  std::int64_t seq() const { return n_; }
  std::int64_t dim() const { return d_; }
  bool nhd() const { return nhd_; }
  std::vector<std::uint16_t>& bits() { return bits_; }   // F16/BF16 storage
  std::vector<float>& f32() { return f32_; }             // F32 storage

 private:
  DType dtype_ = DType::F16;
  std::int64_t b_ = 0, h_ = 0, n_ = 0, d_ = 0;
  bool nhd_ = false;
  std::vector<std::uint16_t> bits_;
  std::vector<float> f32_;
};

// Synthetic inputs shaped like real attention activations (paper Fig. 2): the tokens of Q and K
// are highly similar (a per-channel bias shared by all tokens, a few channels with a large bias —
// the outliers — and a smaller per-token part); the per-token part has a low-rank shared latent so
// that queries prefer keys of similar tokens (non-trivial attention); V has a channel-wise bias.
struct ActivationModel {
  double qk_bias = 1.0;          // std of the per-channel bias of Q and of K
  int outlier_channels = 4;      // channels whose bias is multiplied by outlier_factor
  double outlier_factor = 8.0;
  double qk_noise = 0.6;         // std of the iid per-token part
  int latent_rank = 8;           // rank of the shared per-token structure (0: none)
  double latent_scale = 1.0;     // size of that structure per channel
  double v_bias = 2.0;           // std of V's per-channel bias
  int v_outlier_channels = 4;    // channels with bias of magnitude v_outlier_bias (sign random)
  double v_outlier_bias = 8.0;
  double v_latent_scale = 1.0;   // V also carries the token's latent content (so O varies by query)
  double v_noise = 1.0;
};

struct AttentionInputs {
  HostTensor q, k, v;
};

// Deterministic for a given seed on every platform (own generator, own normal sampler).
AttentionInputs make_activation_like(std::uint64_t seed, DType dtype, std::int64_t batch,
                                     std::int64_t q_heads, std::int64_t kv_heads, std::int64_t q_len,
                                     std::int64_t kv_len, std::int64_t head_dim,
                                     const ActivationModel& model = {}, bool nhd = false);
// Plain N(0, 1) inputs (the benchmark convention).
AttentionInputs make_gaussian(std::uint64_t seed, DType dtype, std::int64_t batch, std::int64_t q_heads,
                              std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len,
                              std::int64_t head_dim, bool nhd = false);
// Heavy-tailed inputs: Student-t with `dof` degrees of freedom (3: finite variance 3, infinite
// fourth moment; the rare large elements a per-channel scale over all tokens must absorb).
AttentionInputs make_student_t(std::uint64_t seed, DType dtype, std::int64_t batch, std::int64_t q_heads,
                               std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len,
                               std::int64_t head_dim, int dof = 3, bool nhd = false);

// ---------------------------------------------------------------------------------------------
// Accuracy metrics of the paper's appendix A.7, on the flattened output. Non-finite entries of
// `out` are counted in `nonfinite` and make every metric NaN.
struct Metrics {
  double cos_sim = 0, rel_l1 = 0, rmse = 0, max_abs = 0;
  std::int64_t count = 0, nonfinite = 0;
};
Metrics compare(const double* ref, const float* out, std::size_t n);
Metrics compare(const double* ref, const double* out, std::size_t n);
Metrics compare(const std::vector<double>& ref, const std::vector<float>& out);
Metrics compare(const std::vector<double>& ref, const std::vector<double>& out);

// ---------------------------------------------------------------------------------------------
// Exact attention, double precision.
// q [B, Hq, Nq, d], k [B, Hkv, Nk, d], v [B, Hkv, Nk, dv]; Hq % Hkv == 0 (query head h reads kv
// head h / (Hq / Hkv)); any strides with stride_dim == 1; sm_scale defaults to 1/sqrt(d).
struct AttentionOptions {
  CausalMode causal = CausalMode::None;
  std::optional<double> sm_scale;
  int threads = 0;   // 0: std::thread::hardware_concurrency()
};

struct ExactResult {
  std::int64_t batch = 0, heads = 0, q_len = 0, dim = 0;   // dim = dv
  std::vector<double> o;     // [batch][heads][q_len][dim]
  std::vector<double> lse;   // [batch][heads][q_len], natural log; -inf for rows with no key
  std::size_t index(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>(((b * heads + h) * q_len + i) * dim + c);
  }
};

ExactResult exact_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                            const AttentionOptions& options = {});

// Is key j visible to query i (CausalMode semantics above)?
bool key_visible(CausalMode mode, std::int64_t i, std::int64_t j, std::int64_t q_len, std::int64_t kv_len) noexcept;

// ---------------------------------------------------------------------------------------------
// Reference of the GPU quantize stage: exactly the buffers of kernels/quant_buffers.hpp (same
// layout, same element counts, padded entries zero), computed with the float ops stated in that
// header's comment. Reductions the GPU does in fp32 (channel sums, q̄, q·k̄) are computed here in
// double and rounded once to fp32 — the correctly rounded value a GPU tree sum approximates to a
// few ulp; the margins below let a comparison tell those cases apart from real bugs.
struct QuantizeOptions {
  bool margins = false;   // also fill q_margin / k_margin / v_margin
  int threads = 0;
  // K/V channel sums in the order of the fused stage (SAGE2_QUANT_PATH=fused: chunks of
  // kernels::quantize_stats_chunk tokens summed with the fused CTA's rows per pass) instead of the
  // default split stage's (the same chunks, its channel_stats' rows per pass; the same order up to
  // head dim 128): the reference is bit-faithful to whichever path the GPU ran.
  bool fused_stats_order = false;
  // ... or in the order of the cluster stage (QuantPath::Cluster, the sm_90a default: chunks of
  // kernels::quantize_cluster_plan(...).chunk tokens, one per CTA of the group's cluster).
  bool cluster_stats_order = false;
  // The statistics one pass over K and V can have (DESIGN.md, "the amendment that one pass over K
  // and V may use"; project issue 30): k̄ and μ (smooth_v) are the means of the first KV tile,
  // keys [0, min(bk, kv_len)) of each (batch, kv head), instead of all keys, and V is scaled per
  // (KV tile, channel): δV[t][c] = amax over tile t's keys of |V − μ| / 448 (v_tile_scale), applied
  // by the attention when tile t's accumulator is flushed into the fp32 O. k_stats / v_stats then
  // hold the first tile's sum / min / max (sum in the split stage's order over those keys) and
  // v_scale stays 0. Default off: today's contract, bit for bit.
  bool kv_tile_statistics = false;
  // The split path's sampled statistics (a 3T stage that keeps the attention kernels as they are;
  // what Auto runs for dense calls: kernels::KernelSpec::sampled_stats): k̄, μ and the statistics
  // k_stats / v_stats are taken over a sample of keys — units ⌊i·T/S⌋, i = 0..S−1 (S =
  // sample_tiles), of the T = ceil(kv_len / U) units of U = sample_unit keys (U = bk when 0),
  // gathered in that order (every key when T <= S, then summed in the split stage's own order) —
  // and V's per-channel scale from the
  // sample's amax A_s with headroom H = v_headroom:
  // with H_s = H·A_s where finite (else A_s), amax = A_all > H_s ? A_all : H_s, where A_all is the
  // amax over all keys (so codes never saturate; the kernel detects A_all > H_s while it writes
  // the codes and redoes that channel). With T > S the sums run in the split stage's order with
  // one chunk per sampled unit (U keys). k_first_bad / v_first_bad still cover every key. Exclusive with
  // kv_tile_statistics. Default off (the GPU's sampled stage is compared with it on).
  bool sample_statistics = false;
  int sample_tiles = 4;      // S >= 1
  int sample_unit = 64;      // U: keys per sampled unit, a multiple of 16 (0: the KV tile, bk)
  float v_headroom = 16.f;   // H >= 1 (a power of two keeps the scale's product exact)
};

struct QuantizedHost {
  StageLayout layout;                       // the sizes; every vector below has layout's count
  std::vector<std::int8_t> q_codes;         // [B][Hq][q_len_pad][row_bytes]  (int4: 2 per byte)
  std::vector<float> q_scale;               // [B][Hq][q_blocks][q_groups_per_block]
  std::vector<float> q_mean;                // [B][Hq][q_blocks][d_qk]            (smooth_q)
  std::vector<float> q_kbias;               // [B][Hq][q_len_pad]                 (smooth_k)
  std::vector<std::int8_t> k_codes;         // [B][Hkv][kv_len_pad][row_bytes]
  std::vector<float> k_scale;               // [B][Hkv][k_blocks][k_groups_per_block]
  std::vector<float> k_mean;                // [B][Hkv][d_qk]
  std::vector<float> k_stats;               // [B][Hkv][3][d_qk]  sum, min, max
  std::vector<std::uint8_t> v_codes;        // [B][Hkv][d_v][kv_len_pad]  e4m3; FP16 P̃V: fp16 codes,
                                            // 2 bytes each (little-endian), so 2× the bytes
  std::vector<float> v_scale;               // [B][Hkv][d_v]   (0 with kv_tile_statistics)
  std::vector<float> v_tile_scale;          // [B][Hkv][k_blocks][d_v]  kv_tile_statistics only, else empty
  bool kv_tile_statistics = false;          // the QuantizeOptions field these buffers were made with
  bool sample_statistics = false;           // the QuantizeOptions field these buffers were made with
  std::vector<float> v_amax;                // [B][Hkv][d_v] sample_statistics only: the amax of V's scale
  std::vector<float> v_mean;                // [B][Hkv][d_v]
  std::vector<float> v_stats;               // [B][Hkv][3][d_v]
  std::vector<std::uint8_t> q_bad;          // [B][Hq][q_len_pad]   Q row has a NaN/Inf (padded 0)
  std::vector<std::int32_t> k_first_bad;    // [B][Hkv]             first key with a NaN/Inf, INT32_MAX: none
  std::vector<std::int32_t> v_first_bad;    // [B][Hkv][d_v]        per channel; padded INT32_MAX
  // Margins (QuantizeOptions::margins), one per CODE (unpacked), same order as the codes:
  //   q_margin [B][Hq][q_len_pad][d_qk], k_margin [B][Hkv][kv_len_pad][d_qk],
  //   v_margin [B][Hkv][d_v][kv_len_pad]; see int_margin / fp8_margin / half_margin (FP16 V̂);
  //   padded entries +Inf.
  std::vector<float> q_margin, k_margin, v_margin;

  // Unpacked code accessors (b, head, token, channel); channel < d_qk (d_v for V).
  int q_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const;
  int k_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const;
  std::uint8_t v_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const;  // e4m3 layouts
  std::uint16_t v_code16(std::int64_t b, std::int64_t h, std::int64_t n, int c) const;  // fp16 layouts
  float v_value(std::int64_t b, std::int64_t h, std::int64_t n, int c) const;  // the code's value, either format
};

// `config`: the attention kernel the buffers feed. Throws InvalidArgument naming the field when
// the config cannot be generated (validated as the kernels' spec) or does not match the tensors.
QuantizedHost quantize_stage(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                             const KernelConfig& config, const QuantizeOptions& options = {});

// Unpack one row of INT4 codes (2 per byte, element 2j in the low nibble) / copy INT8 codes.
void unpack_codes(const std::int8_t* row, int qk_bits, int d_qk, int* out);

// ---------------------------------------------------------------------------------------------
// Emulation of the quantized attention kernel described by `config` (family, qk_bits,
// smooth_q/k/v, tile bq/bk/warps, causal, two_level_accum) — see the contract at the top of
// this file.
enum class Granularity : int {
  PerTensor = 0,   // one Q/K scale per (batch, head)
  PerBlock = 1,    // one scale per bq query rows / bk keys (SageAttention 1)
  PerThread = 2,   // the kernel's: groups of the config's layout (StageLayout; SageAttention 2)
  PerToken = 3,    // one scale per token
};
enum class PvFormat : int {
  E4M3 = 0,   // the kernel's: P̂ = e4m3(P̃·448), V̂ per channel e4m3 (δV = amax/448)
  E5M2 = 1,   // P̂ = e5m2(P̃·57344), V̂ per channel e5m2 (δV = amax/57344)
  Int8 = 2,   // P̂ = rint(P̃·127), V̂ per channel int8 (δV = amax/127)
  FP16 = 3,   // P̂ = half(P̃), V̂ = half(V - μ), no scales
  F32 = 4,    // no rounding of P̃ or V (isolates the other approximations)
  Kernel = 5, // the config's own: E4M3, or FP16 for a config with FP16 P̃V (its fp16 V̂ buffers)
};
const char* granularity_name(Granularity g) noexcept;
const char* pv_format_name(PvFormat f) noexcept;

// EmulationOptions::exponent_form.
enum class ExponentForm : int { Contract = 0, Unfused = 1, Fused = 2 };
// EmulationOptions::row_sum.
enum class RowSumForm : int { Contract = 0, OfPTilde = 1, OfPHat = 2 };

struct EmulationOptions {
  Granularity granularity = Granularity::PerThread;
  PvFormat pv_format = PvFormat::Kernel;
  int accum_mantissa_bits = 23;      // 13 = FP22 (paper, Ada f32.e4m3 mma); 1..23
  bool exact_qk = false;             // S from the un-quantized smoothed Q/K (dot in double)
  std::optional<double> sm_scale;    // default 1/sqrt(config.head_dim)
  bool round_output = false;         // round O to config.out_dtype like the kernel's store
  int threads = 0;
  // Quantize-stage buffers to read instead of running quantize_stage() (e.g. a GPU stage's,
  // downloaded): the attention part is then emulated on exactly the codes the kernel read, so a
  // code that the GPU rounded the other way at a rounding boundary (the accepted fp32
  // reduction-order differences of q̄, k̄, ...) does not show up as an attention error. Its layout
  // must be the one quantize_stage() would produce for these tensors and config (else InvalidArgument).
  const QuantizedHost* stage = nullptr;
  // The one-pass statistics (QuantizeOptions::kv_tile_statistics; contract above): the stage is
  // run with them (a caller's `stage` must have been made with the same setting) and the fp32 O
  // takes each tile's V scale at the flush, O_c = O_c·a + R_c·δV[t][c], so the epilogue is
  // O_ic = (O_c · r) + μ[c]. Needs two_level_accum (a carried accumulator has no flush per tile).
  bool kv_tile_statistics = false;
  // QuantizeOptions::sample_statistics (with its sample_tiles, sample_unit, v_headroom) for the
  // stage (a caller's `stage` must have been made with the same setting); the attention part is today's.
  bool sample_statistics = false;
  int sample_tiles = 4;
  int sample_unit = 64;
  float v_headroom = 16.f;
  // The row sum l (issues 31, 41; bench/NOTES.md sessions 10, 28). OfPHat: l adds the P̂ the
  // P̂·V̂ product reads (a tensor-core row sum of P̂ against ones, as the reference's sm80 kernel:
  // 16 keys a step, each step's exact sum rounded once into the fp32 tile sum that starts from 0
  // per tile); OfPTilde: the fp32 sum of P̃ above. Contract: OfPHat for the mma family with FP16
  // P̃V (its kernels' form: O and the LSE as accurate as with OfPTilde), OfPTilde elsewhere (with
  // FP8 P̂ the LSE's error would grow).
  RowSumForm row_sum = RowSumForm::Contract;
  // The exponent's argument (issue 41, the mma.sync family's instruction count). Fused:
  // P̃·p_scale = exp2(fma(float(dot), f, −m_sh)) with f = (δq·δk)·c2, one rounding, instead of the
  // unfused exp2(s − m_sh) with s = dot·f rounded first. The row max m is the same in both
  // (rounding is monotone, so max s = f · max dot per scale group, bit for bit), so only P̃ moves,
  // by at most one rounding of the exponent's argument. Calls with smooth Q (ΔS added to s) and
  // the exact-QK ablation are always unfused. Contract: fused in the mma family's kernels with
  // 16-row warps (their form), unfused with 32-row warps (at 255 registers, the two scales kept to
  // the exponent spilled) and in the wgmma family; Fused / Unfused force one form (studies).
  ExponentForm exponent_form = ExponentForm::Contract;
  // fp16 accumulation (config.pv_accum Fp16): keys per fp16 rounding of the accumulator; 0: the
  // instruction's k (32 for e4m3 m16n8k32, 16 for FP16 m16n8k16). 16 with FP8 models an e4m3
  // mma lowered into two f16 k16 HMMAs (Hopper's ptxas running compute_89 PTX). 16 or 32.
  int pv_acc16_step = 0;
  // P̂'s codes at a rounding boundary: a P̃·p_scale within this relative distance of one (its
  // two neighbours' codes differ) is not decided by the contract, because the kernel's exp2 is an
  // approximation (ex2.approx) and its scores' fp32 operations run in another order. For each
  // output element, EmulationResult::o_slack then bounds how far the output can move when every
  // such code rounds the other way (Σ |Δcode|·|V̂|, carried like O, over l, times δV). 0: off.
  float p_boundary_rel = 0.f;
};

struct EmulationResult {
  std::int64_t batch = 0, heads = 0, q_len = 0, dim = 0;
  std::vector<float> o;     // [batch][heads][q_len][dim]
  std::vector<float> lse;   // [batch][heads][q_len], natural log, of the un-smoothed scores
  std::vector<float> o_slack;  // like o, with EmulationOptions::p_boundary_rel > 0 (else empty)
  std::size_t index(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>(((b * heads + h) * q_len + i) * dim + c);
  }
};

// config.head_dim must equal the tensors' head dim; the config's in_dtype is not checked against the
// tensors (F32 tensors are accepted for experiments). The emulation always runs quantize_stage():
// per-thread Q/K codes and scales and the E4M3 V codes are its buffers, read as the kernel reads
// them; other granularities / P̃,V formats re-quantize from the same smoothing statistics.
// Cost: O(B·Hq·Nq·Nk·d), about 1.5 s per head at N = 4096, d = 128 on one core (exact attention
// likewise); work is spread over `threads` std::threads by (batch, head, query block); results do
// not depend on the thread count.
EmulationResult emulate_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                  const KernelConfig& config, const EmulationOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Variable-length batches: the host twin of sage2::SeqLens and Context::attention_varlen, with
// the length arrays in host vectors. Two forms, as in SeqLens:
//  Packed: cu_seqlens_q and cu_seqlens_k (B + 1 entries each) set, kv_lens empty. q is a view
//    with batch 1 of the packed [total_q, Hq, d] tensor (TensorRef::nhd(data, dtype, 1, Hq,
//    total_q, d), or HostTensor(dtype, 1, Hq, total_q, d, true)), k and v of [total_k, Hkv, d]
//    (any strides as elsewhere). Sequence b holds tokens [cu_q[b], cu_q[b+1]) of q and
//    [cu_k[b], cu_k[b+1]) of k and v.
//  Key padding: kv_lens (B entries, B = q.batch) set, the cu vectors empty. q [B, Hq, Nq, d],
//    k and v [B, Hkv, Nk, d] as for a dense call; query rows of batch b see keys [0, kv_lens[b]).
// Sequence b is exactly the dense problem of that sequence alone (batch 1, q_len = len_q[b],
// kv_len = len_k[b]; the causal masks aligned per sequence: BottomRight is j <= i + len_k - len_q
// of the sequence), and the varlen functions compute it by calling exact_attention /
// emulate_attention on views of that sequence: every result row of sequence b is bit-identical
// to the dense call's. Special lengths: len_q = 0 has no rows; len_k = 0 (len_q > 0) gives O = 0
// and LSE = -inf on every row (no visible key, the rule above).
// Results: packed → batch 1, heads Hq, q_len = total_q (= q.seq): o [Hq][total_q][dim] and lse
// [Hq][total_q], the layout of the GPU's packed LSE; rows [cu_q[B], total_q) belong to no sequence
// and hold NaN in o and lse (the GPU leaves them untouched: they have no defined value). Key
// padding → the dense shapes ([B][Hq][Nq][dim], lse [B][Hq][Nq]).
// Errors: InvalidArgument naming the array and the entry for lengths that break SeqLens's rules
// (cu[0] != 0, a decreasing cu, cu[B] beyond the tensor's tokens, B < 1, cu_q/cu_k sizes that
// differ, a packed tensor with batch != 1, kv_lens[b] outside [0, Nk], kv_lens.size() != B, both
// forms or neither). (The GPU finds such arrays on the device and writes NaN instead.)
struct HostSeqLens {
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k;   // packed form: B + 1 entries each
  std::vector<std::int32_t> kv_lens;                      // key-padding form: B entries

  // The packed form of per-sequence lengths (cu = 0 and the running sums).
  static HostSeqLens packed_from_lengths(const std::vector<std::int32_t>& len_q,
                                         const std::vector<std::int32_t>& len_k);
  static HostSeqLens key_padding(std::vector<std::int32_t> kv_lens);
  bool packed() const { return !cu_seqlens_q.empty() || !cu_seqlens_k.empty(); }
  // B: cu_seqlens_q.size() - 1 (packed) or kv_lens.size() (key padding); 0 when neither is set.
  std::int64_t batch() const;
};

ExactResult exact_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                   const HostSeqLens& lens, const AttentionOptions& options = {});
// options.stage is not accepted (each sequence has its own quantize stage): InvalidArgument.
// config.smooth_q is computed per sequence like every other statistic, although the GPU's varlen
// path does not offer smooth-Q (SeqLens); pass the config of the call being checked.
EmulationResult emulate_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                         const HostSeqLens& lens, const KernelConfig& config,
                                         const EmulationOptions& options = {});

}  // namespace sage2::reference
