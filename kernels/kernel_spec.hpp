// KernelSpec: the single description of one kernel specialisation. From it come
//  - the canonical spec key (key()), the readable prefix of the cache key (jit/kernel_build.hpp),
//  - the generated source (jit/source_builder: spec values as constexpr before the template),
//  - the NVRTC options (jit/nvrtc_compiler),
//  - the launch shape (kernels/quantize_shape),
//  - and, for the attention families, the quantization layout (kernels/quant_layout).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/arch.hpp"
#include "sage2/sage2.hpp"

namespace sage2::kernels {

enum class KernelFamily : int {
  Quantize = 0,        // smoothing statistics, per-thread INT4/INT8 Q/K, FP8 V
  DeltaS = 1,          // ΔS = q̄_i · γ(K_j)ᵀ in fp32 (smooth-Q only)
  AttentionMma = 2,    // mma.sync family (sm_89 and sm_90)
  AttentionWgmma = 3,  // wgmma + TMA family (sm_90a)
  Probe = 4,           // hardware probes (tensor-core accumulator width), not used by attention
  DirectSplit = 5,     // direct small-Nq path: split-KV attention from fp16/bf16 Q/K/V (kernels/direct.hpp)
  DirectMerge = 6,     // direct small-Nq path: merge of the splits' partials
};
// The two kernels of the direct small-Nq path (templates/attention_direct.cuh).
constexpr bool is_direct_family(KernelFamily f) noexcept {
  return f == KernelFamily::DirectSplit || f == KernelFamily::DirectMerge;
}
// Defined in kernels/spec_rules.cpp (the names of the attention families are their descriptors').
const char* family_name(KernelFamily f) noexcept;


// Entry points of the quantize family (one template, several kernels).
enum class QuantOp : int {
  None = 0,
  ChannelStats = 1,  // per (batch, head, channel): sum, min, max over tokens (K mean, V mean/absmax)
  QuantizeQ = 2,     // Q block: optional smooth-Q mean, per-thread INT4/INT8, q·k̄ LSE bias
  QuantizeK = 3,     // K block: subtract k̄, per-thread INT4/INT8
  QuantizeV = 4,     // V: optional subtract mean, FP8 E4M3 per channel, transposed [d, n]
  Fused = 5,         // the whole stage in one launch: K/V statistics chunks, then Q, K, V items
                     // taken from a device work counter (kernels/quantize_shape.hpp QuantizeSchedule)
  Cluster = 6,       // the whole stage in one launch of thread-block clusters, one per (batch,
                     // kv head), statistics exchanged in distributed shared memory (sm_90a;
                     // kernels/quantize_shape.hpp quantize_cluster_plan)
  QuantizeKV = 7,    // K and V of a dense call in one launch: split's items in the fused stage's
                     // ticket order, codes lagging their statistics so their rows come from L2
  MaskTiles = 8,     // tensor masks: the class of every (query block, KV tile) of the mask
};
const char* quant_op_name(QuantOp op) noexcept;

// The cluster quantize stage (QuantOp::Cluster) runs up to this head dim: its partials, final
// statistics and item scratch must fit the 48 KiB of static shared memory (at head dim 512 the
// 512-thread CTA's statistics scratch alone takes 32 KiB).
constexpr int kClusterMaxHeadDim = 256;

// Tile configuration of the attention kernel. The quantize kernels take the config of the
// attention kernel that will consume their output: the quantization layout derives from it.
struct TileConfig {
  int bq = 128;     // query rows per CTA
  int bk = 64;      // keys per KV tile
  int warps = 4;    // warps per CTA (compute warps for the mma family)
  int stages = 1;   // pipeline stages for K/V loads
  bool operator==(const TileConfig&) const = default;
};

// The quantization options (include/sage2/sage2.hpp AttentionParams): QK code width and the three
// smoothings. Every internal description of an attention call inherits this one value type —
// KernelSpec, QuantBuffers, plan::AttentionProblem / Specialisation / TuningKey — so a conversion
// copies it whole (`to.quant() = from.quant()`) instead of field by field.
struct QuantOptions {
  int qk_bits = 8;  // 4 or 8
  bool smooth_q = false;
  bool smooth_k = true;
  bool smooth_v = false;
  QuantOptions& quant() { return *this; }
  const QuantOptions& quant() const { return *this; }
  bool operator==(const QuantOptions&) const = default;
};

// The P̃V options, carried the same way (KernelSpec, plan::AttentionProblem / Specialisation /
// TuningKey): `to.pv() = from.pv()`.
struct PvOptions {
  // P̃V in FP16 (mma.sync m16n8k16, fp32 accumulation; V̂ fp16, include/sage2/reference.hpp)
  // instead of FP8 e4m3: the mma family's attention and the quantize_v op feeding it.
  bool pv_fp16 = false;
  // P̃V accumulated in fp16 inside a KV tile (SageAttention2++, the reference's "fp32+fp16" /
  // "fp16+fp32"): mma.sync with an f16 accumulator over at most 64 keys (kPvAcc16Keys), each
  // segment's sum converted and added into an fp32 tile sum, flushed into the fp32 O between tiles
  // as with two_level_accum. V̂'s scale keeps a segment's sum below fp16's largest value
  // (kernels/quant_buffers.hpp). The mma family on the archs whose table row says pv_acc16; the
  // attention kernel and the quantize ops that write V̂.
  bool pv_acc16 = false;
  PvOptions& pv() { return *this; }
  const PvOptions& pv() const { return *this; }
  bool operator==(const PvOptions&) const = default;
};

struct KernelSpec : QuantOptions, PvOptions {
  KernelFamily family = KernelFamily::Quantize;
  Arch arch = Arch::Sm90a;
  QuantOp op = QuantOp::None;               // Quantize family only
  KernelFamily consumer = KernelFamily::AttentionMma;  // Quantize/DeltaS: which attention reads it
  int head_dim = 128;                       // original head dim (1..512)
  CausalMode causal = CausalMode::None;     // attention only
  TileConfig tile{};
  DType in_dtype = DType::F16;
  DType out_dtype = DType::F16;
  bool two_level_accum = true;              // attention only
  bool return_lse = false;                  // attention only
  // Sequences of their own lengths in one call (sage2::SeqLens): attention and the quantize ops
  // of the split path; not with smooth-Q.
  bool varlen = false;
  // A tensor mask (sage2::MaskType as int: 0 none, 1 bool, 2 f16, 3 bf16, 4 f32): attention and
  // the mask_tiles op. Not with varlen.
  int mask = 0;
  // Attention only: the kernel reads the caller's Q (in_dtype, any strides) and quantizes it
  // itself, with the quantize_q kernel's per-thread groups and float ops (kernels/quant_buffers.hpp),
  // so the call has no quantize_q launch and no Q̂ buffers. The family decides where it can
  // (AttentionFamilyDesc::q_in_kernel_ok); not with smooth-Q (q̄ is a mean over a whole block).
  bool q_in_kernel = false;
  // The split path's statistics over a sample of KV tiles (kernels/quant_buffers.hpp, "Sampled
  // statistics"): k̄, μ and V's amax from kSampleTiles tiles, V's scale with kVHeadroom and a
  // fix-up of the channels a key exceeds. The quantize ops channel_stats, quantize_q/k/v read it;
  // on an attention spec it is the call's choice (plan::apply_quant_path: Auto, dense calls) that
  // quantize_spec_for hands to them, and no part of the attention kernel's code (canonical()
  // clears it there).
  bool sampled_stats = false;
  // channel_stats over a dense sampled head: every sampled unit at once, one CTA of kSampleTiles
  // groups of the walk's threads, instead of the walk over the units (kernels::stats_units_at_once;
  // the same statistics bit for bit). A launch's choice by the head count (kernels::stats_spec_for);
  // canonical() clears it on every other spec.
  bool stats_at_once = false;
  // (QuantOptions: qk_bits, smooth_q/k/v; PvOptions: pv_fp16, pv_acc16)
  // Emit PTX for the arch's virtual architecture (compute_NN) instead of a cubin: the driver
  // JIT-compiles it for the device (a GPU newer than the arch table, an NVRTC too old for the
  // device, or ContextOptions::target_arch below the device's). Every kernel of a Context.
  bool ptx = false;

  // canonical(), key(), entry_name() and validate() ask the spec's family descriptor: they are
  // defined in kernels/spec_rules.cpp, above the registry (the descriptors include this header).
  //
  // Copy with the fields that do not affect this family's code reset to fixed values, so two
  // specs that generate the same code have the same key.
  KernelSpec canonical() const;
  // The one canonical key string of the spec, e.g.
  //   "quantize.quantize_q|sm_90a|d128|attn_mma|bq128.bk64.w4.s1|int8|sq1.sk1.sv0|f16>f16|causal:none|acc2:1.lse:0"
  // (varlen specs end in "|varlen", then "|mask:..", "|pv16" (pv_fp16) and "|ptx"; keys of
  // specs without them are those of earlier versions)
  // It names the specialisation within one build of the library. The disk cache key adds what
  // else the cubin depends on (source, templates, options, NVRTC, library: jit::make_build).
  std::string key() const;
  // Name of the extern "C" __global__ entry in the generated module.
  std::string entry_name() const;
  // Throws InvalidArgument (naming the field and value) when the spec cannot be generated.
  void validate() const;

  bool operator==(const KernelSpec&) const = default;
};

// Whether the spec's kernel writes or reads V̂ (attention, quantize_v, the fused and cluster
// stages): the specs whose code depends on pv_fp16.
bool uses_v_codes(const KernelSpec& spec) noexcept;
// Whether quantize op `op` runs with KernelSpec::sampled_stats (its descriptor's samples_stats).
bool op_samples_stats(QuantOp op) noexcept;

// The spec of a quantize kernel that feeds the attention kernel `attention`: same arch, head dim,
// tile, code width, smoothing and input dtype, so the quantization layout of producer and
// consumer is derived from the same values.
KernelSpec quantize_spec_for(const KernelSpec& attention, QuantOp op);

// Keys per fp16 accumulator segment of the P̃V product (pv_acc16): 64·448·2.25 = 64512 < 65504
// (FP8: P̂ <= 448, |V̂| <= 2.25) and 64·1·2^9 = 32768 (FP16: P̂ <= 1, |V̂| < 2^9).
constexpr int kPvAcc16Keys = 64;
// V̂'s bound with fp16 accumulation: the e4m3 scale is amax / kV8Acc16Max (the reference's
// quant_v_scale_max for "fp32+fp16"); FP16 V̂'s power-of-two scale keeps |V̂| < 2^kV16Acc16Exp.
constexpr float kV8Acc16Max = 2.25f;
constexpr int kV16Acc16Exp = 9;
constexpr int kV16Exp = 15;  // FP16 V̂ with fp32 accumulation: |V̂| < 2^15
// Sampled statistics (KernelSpec::sampled_stats; kernels/quant_buffers.hpp): the units sampled per
// (batch, kv head), the keys of a unit, and V's scale headroom (a power of two: the headroom changes
// no e4m3 code above the subnormals; reference::QuantizeOptions' sample_tiles, sample_unit and
// v_headroom default to these). The unit is fixed in keys, not the KV tile: the statistics kernel's
// bytes do not grow with bk (wgmma's 128-key tiles read half of K and V at 1K keys with a tile
// unit; the emulation's rel-L1 with 64-key units is 0.99-1.01x the every-key statistics', as the
// tile unit's: bench/NOTES.md, session 30).
constexpr int kSampleTiles = 4;
constexpr int kSampleUnit = 64;
constexpr float kVHeadroom = 16.f;

// Padded head dims (the quantize kernel pads, no extra launches).
int qk_dim_padded(int head_dim, int qk_bits);   // multiple of the mma k: 32 (int8) / 64 (int4)
int qk_row_bytes(int head_dim, int qk_bits);    // bytes of one quantized Q/K row
int v_dim_padded(int head_dim);                 // multiple of 32 (FP8 P̂V̂ n tiles)
int v_code_bytes(bool pv_fp16);                 // bytes of one V̂ code: 1 (e4m3) or 2 (fp16)

}  // namespace sage2::kernels
