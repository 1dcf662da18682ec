// The rules of a kernel spec that ask its family's descriptor: names, the canonical form and key,
// validation, the entry name, the quantization layout's instruction shape. They are declared with
// the types (kernels/kernel_spec.hpp, kernels/quant_layout.hpp) and defined here, above the family
// registry, so that the spec's own unit and the descriptors it describes do not include each
// other (the families' headers include kernel_spec.hpp).
#include <sstream>
#include <string>

#include "kernels/attention_family.hpp"
#include "kernels/direct.hpp"
#include "kernels/family_quantize.hpp"
#include "kernels/kernel_spec.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/quantize_shape.hpp"

namespace sage2::kernels {

const char* family_name(KernelFamily f) noexcept {
  if (const AttentionFamilyDesc* d = find_attention_family(f)) return d->name;
  if (f == KernelFamily::Quantize) return "quantize";
  if (const AuxFamilyDesc* d = aux_family(f)) return d->name;
  return "?";
}

const char* quant_op_name(QuantOp op) noexcept {
  if (const QuantOpDesc* d = find_quant_op(op)) return d->name;
  return op == QuantOp::None ? "none" : "?";
}

bool uses_v_codes(const KernelSpec& s) noexcept {
  if (find_attention_family(s.family)) return true;
  const QuantOpDesc* d = s.family == KernelFamily::Quantize ? find_quant_op(s.op) : nullptr;
  // (sampled statistics: quantize_k's block 0 rewrites the V channels a key exceeds)
  return d && (d->writes_v || (s.sampled_stats && s.op == QuantOp::QuantizeK));
}

bool op_samples_stats(QuantOp op) noexcept {
  const QuantOpDesc* d = find_quant_op(op);
  return d && d->samples_stats;
}

KernelSpec KernelSpec::canonical() const {
  if (family == KernelFamily::Probe) {  // one probe module per arch: nothing else matters
    KernelSpec p;
    p.family = KernelFamily::Probe;
    p.arch = arch;
    p.consumer = KernelFamily::Probe;
    p.ptx = ptx;
    return p;
  }
  if (is_direct_family(family)) {  // the direct path: no quantization options
    KernelSpec d = *this;
    d.op = QuantOp::None;
    d.consumer = family;
    d.qk_bits = 8;
    d.smooth_q = d.smooth_k = d.smooth_v = false;
    d.two_level_accum = true;
    d.varlen = false;
    d.mask = 0;
    d.q_in_kernel = false;
    d.sampled_stats = false;
    d.pv_fp16 = false;
    d.pv_acc16 = false;
    d.out_dtype = in_dtype;
    if (family == KernelFamily::DirectMerge) d.tile = TileConfig{};
    return d;
  }
  KernelSpec c = *this;
  if (find_attention_family(family)) {
    c.op = QuantOp::None;
    c.consumer = family;
  } else {
    c.causal = CausalMode::None;
    c.two_level_accum = true;
    c.return_lse = false;
    c.q_in_kernel = false;
  }
  if (family == KernelFamily::DeltaS) c.varlen = false;  // smooth-Q only: never varlen
  // Only the split path's statistics, Q, K and V kernels read the sampling (their own rule below).
  if (!(family == KernelFamily::Quantize && op_samples_stats(op))) c.sampled_stats = false;
  // Only channel_stats over a sampled head of a head dim its at-once form runs (its own rule).
  if (c.stats_at_once && !stats_units_at_once(c)) c.stats_at_once = false;
  // Only the attention kernels and the quantize ops that write V̂ read the P̃V precision.
  if (!uses_v_codes(c)) c.pv_fp16 = c.pv_acc16 = false;
  // Only the attention kernels and the tile classification read the mask.
  const QuantOpDesc* qop = family == KernelFamily::Quantize ? find_quant_op(op) : nullptr;
  if (family == KernelFamily::DeltaS || (family == KernelFamily::Quantize && !(qop && qop->reads_mask))) c.mask = 0;
  if (family == KernelFamily::DeltaS) {
    // ΔS reads fp32 q̄ and the un-quantized input K; bits and V smoothing do not matter.
    c.op = QuantOp::None;
    c.qk_bits = 8;
    c.smooth_q = true;
    c.smooth_v = false;
    c.out_dtype = DType::F32;
  }
  if (family == KernelFamily::Quantize) {
    c.out_dtype = in_dtype;
    if (qop) qop->canonicalize(c);  // the fields the op does not read
    c.tile.stages = 1;
  }
  return c;
}

void KernelSpec::validate() const {
  auto bad = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, "kernel spec: " + what); };
  if (head_dim < 1 || head_dim > 512) bad("head_dim=" + std::to_string(head_dim) + " outside 1..512");
  if (qk_bits != 4 && qk_bits != 8) bad("qk_bits=" + std::to_string(qk_bits) + " (must be 4 or 8)");
  if (tile.warps < 1 || tile.warps > 16) bad("warps=" + std::to_string(tile.warps) + " outside 1..16");
  if (tile.bq < 16) bad("bq=" + std::to_string(tile.bq) + " must be a multiple of 16*warps=" + std::to_string(16 * tile.warps));
  if (tile.bk < 16 || tile.bk % 16 != 0) bad("bk=" + std::to_string(tile.bk) + " must be a positive multiple of 16");
  if (tile.stages < 1 || tile.stages > 8) bad("stages=" + std::to_string(tile.stages) + " outside 1..8");
  if (in_dtype == DType::F32) bad("in_dtype=f32 (inputs are f16 or bf16)");
  const QuantOpDesc* qop = family == KernelFamily::Quantize ? find_quant_op(op) : nullptr;
  if (family == KernelFamily::Quantize && !qop) bad("quantize spec without an op");
  if (varlen && smooth_q) bad("varlen calls do not support smooth_q (its ΔS has no per-sequence layout)");
  if (mask < 0 || mask > 4) bad("mask=" + std::to_string(mask) + " (0 none, 1 bool, 2 f16, 3 bf16, 4 f32)");
  if (mask != 0 && varlen) bad("a tensor mask cannot be combined with varlen (key padding: kv_lens)");
  if (qop) qop->validate(*this);  // the op's own rules
  if (q_in_kernel && smooth_q) bad("q_in_kernel with smooth_q (q̄ is a mean over the whole query block)");
  if (sampled_stats && varlen) bad("sampled_stats with varlen (the sample is taken per dense (batch, kv head))");
  if (sampled_stats && qop && !op_samples_stats(op))
    bad(std::string("sampled_stats: ") + quant_op_name(op) + " takes its statistics over every key (split path only)");
  const ArchInfo* ai = find_arch_info(arch);
  if (!ai) bad("arch=" + std::to_string(static_cast<int>(arch)) + " is not an arch of the table");
  if (uses_v_codes(*this) && !pv_fp16 && !ai->fp8_pv)
    bad(std::string("FP8 P̃V needs e4m3 conversions and mma (sm_89 and newer); ") + ai->name +
        " runs P̃V in FP16 (pv_fp16)");
  if (uses_v_codes(*this) && pv_acc16 && !ai->pv_acc16)
    bad(std::string("pv_acc16: fp16 accumulation of P̃V (mma.sync with an f16 accumulator) is not offered on ") +
        ai->name + " (it runs on the mma.sync family of sm_80/86/87 with FP16 P̃V and of sm_89/100/103/120/121 "
        "with FP8 or FP16 P̃V; sm_90a accumulates in fp32)");
  if (uses_v_codes(*this) && pv_acc16 && find_attention_family(family) && !two_level_accum)
    bad("pv_acc16 needs two_level_accum (the fp16 accumulator is flushed into the fp32 O between tiles)");
  if (is_direct_family(family)) return validate_direct_spec(*this);
  // The attention family whose layout the kernel writes or reads sets the rules of the tile.
  const AttentionFamilyDesc* f = find_attention_family(family);
  if (!f) f = find_attention_family(consumer);
  if (f) f->validate(*this);
  if (q_in_kernel && !(find_attention_family(family) && find_attention_family(family)->q_in_kernel_ok(*this)))
    bad(std::string("q_in_kernel: the ") + family_name(family) + " kernel of this spec reads Q̂ from the quantize stage");
}

std::string KernelSpec::key() const {
  const KernelSpec c = canonical();
  std::ostringstream k;
  k << family_name(c.family);
  if (c.family == KernelFamily::Quantize) k << '.' << quant_op_name(c.op);
  k << '|' << arch_name(c.arch) << "|d" << c.head_dim << '|' << family_name(c.consumer)
    << "|bq" << c.tile.bq << ".bk" << c.tile.bk << ".w" << c.tile.warps << ".s" << c.tile.stages
    << "|int" << c.qk_bits << "|sq" << c.smooth_q << ".sk" << c.smooth_k << ".sv" << c.smooth_v << '|'
    << dtype_name(c.in_dtype) << '>' << dtype_name(c.out_dtype) << "|causal:" << causal_mode_name(c.causal)
    << "|acc2:" << c.two_level_accum << ".lse:" << c.return_lse;
  if (c.varlen) k << "|varlen";
  if (c.mask != 0) k << "|mask:" << mask_type_name(static_cast<MaskType>(c.mask));
  if (c.q_in_kernel) k << "|qin";
  if (c.sampled_stats) k << "|ss" << kSampleTiles << "x" << kSampleUnit;
  if (c.stats_at_once) k << "|su";
  if (c.pv_fp16) k << "|pv16";
  if (c.pv_acc16) k << "|acc16";
  if (c.ptx) k << "|ptx";
  return k.str();
}

std::string KernelSpec::entry_name() const {
  if (family == KernelFamily::Quantize) return std::string("sage2_") + quant_op_name(op);
  if (const AuxFamilyDesc* d = aux_family(family)) return d->entry;
  if (const AttentionFamilyDesc* d = find_attention_family(family)) return d->entry;
  return "sage2_unknown";
}

MmaShape mma_shape_for(const KernelSpec& spec) {
  const AttentionFamilyDesc* f = find_attention_family(spec.family);
  if (!f) f = find_attention_family(spec.consumer);
  if (f) return f->mma_shape(spec.qk_bits);
  // feeds no attention kernel (probes): the mma.sync shape of its code width
  return spec.qk_bits == 4 ? MmaShape::M16N8K64_S4 : MmaShape::M16N8K32_S8;
}

QuantLayout quant_layout(const KernelSpec& spec) {
  QuantLayout l;
  l.shape = mma_shape_for(spec);
  l.bq = spec.tile.bq;
  l.bk = spec.tile.bk;
  l.warps = spec.tile.warps;
  l.v_fp16 = spec.pv_fp16;
  l.v_acc16 = spec.pv_acc16;
  return l;
}

}  // namespace sage2::kernels
