#include "kernels/attention_family.hpp"

#include <string>


namespace sage2::kernels {

LaunchShape AttentionFamilyDesc::launch_shape(const KernelSpec& spec, const QuantBuffers& b,
                                              const AttentionChunk& chunk) const {
  return chunk_launch_shape(spec, b, chunk, kernel_config(spec));
}

void AttentionFamilyDesc::tma_specs(const KernelSpec&, const QuantBuffers&, const void*, TmaMapSpec*) const {}

bool AttentionFamilyDesc::q_in_kernel_ok(const KernelSpec&) const { return false; }
bool AttentionFamilyDesc::waits_for_previous() const { return false; }

bool waits_for_previous_kernel(const KernelSpec& spec) {
  if (spec.arch != Arch::Sm90a) return false;  // griddepcontrol: sm_90+
  if (spec.family == KernelFamily::Quantize) return true;  // quantize_common.cuh: qz::enter()
  const AttentionFamilyDesc* f = find_attention_family(spec.family);
  return f && f->waits_for_previous();
}

std::string arch_path(Arch arch) {
  const ArchInfo& i = arch_info(arch);
  const bool pv16 = default_pv_fp16(arch);
  std::string s = std::string("INT8 QKᵀ") + (i.int4 ? " (INT4 opt-in)" : "") + " + " +
                  (pv16 ? "FP16 P̃V (fp32 accumulation; FP8 unavailable)" : "FP8 P̃V (FP16 P̃V opt-in)") + ", ";
  const KernelFamily f = default_attention_family(arch, default_qk_bits(arch), 128, pv16);
  const AttentionFamilyDesc& d = attention_family(f);
  s += std::string(d.option_name) + " family";
  for (const AttentionFamilyDesc* o : attention_families())
    if (o != &d && family_runs(*o, arch, 8, 512, pv16)) {
      s += std::string(" (") + d.requirement + "; the " + o->option_name + " family for the rest)";
      break;
    }
  return s;
}

const AttentionFamilyDesc* find_attention_family(KernelFamily family) noexcept {
  for (const AttentionFamilyDesc* d : attention_families())
    if (d->family == family) return d;
  return nullptr;
}

const AttentionFamilyDesc& attention_family(KernelFamily family) {
  if (const AttentionFamilyDesc* d = find_attention_family(family)) return *d;
  throw Error(ErrorCode::InvalidArgument,
              std::string("kernel family ") + family_name(family) + " is not an attention family");
}

bool family_runs(const AttentionFamilyDesc& d, Arch arch, int qk_bits, int head_dim, bool pv_fp16) {
  return !family_runs_why_not(d, arch, qk_bits, head_dim, pv_fp16);
}

std::optional<std::string> family_runs_why_not(const AttentionFamilyDesc& d, Arch arch, int qk_bits, int head_dim,
                                               bool pv_fp16) {
  const ArchInfo* i = find_arch_info(arch);
  if (!i) return std::string("arch ") + arch_name(arch) + " is not in the arch table";
  if (!pv_fp16 && !i->fp8_pv) return std::string(i->name) + " has no FP8 P̃V (no e4m3 tensor-core instructions)";
  if (qk_bits == 4 && !i->int4) return std::string(i->name) + " has no INT4 QKᵀ (no 4-bit mma)";
  if ((pv_fp16 && !d.runs_pv_fp16()) || !d.runs(arch, qk_bits, head_dim))
    return std::string("the ") + d.option_name + " family " + d.requirement;
  return std::nullopt;
}

KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim, bool pv_fp16) noexcept {
  const AttentionFamilyDesc* best = nullptr;
  for (const AttentionFamilyDesc* d : attention_families())
    if (family_runs(*d, arch, qk_bits, head_dim, pv_fp16) && (!best || d->preference > best->preference)) best = d;
  return best ? best->family : attention_families()[0]->family;
}

std::optional<KernelFamily> parse_attention_family(const std::string& s) {
  for (const AttentionFamilyDesc* d : attention_families())
    if (s == d->option_name || s == d->name) return d->family;
  return std::nullopt;
}

KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim) noexcept {
  return default_attention_family(arch, qk_bits, head_dim, default_pv_fp16(arch));
}

AttentionKernelConfig attention_kernel_config(const KernelSpec& spec) {
  return attention_family(spec.family).kernel_config(spec);
}

void check_attention_config(const KernelSpec& spec, int max_smem_optin) {
  attention_family(spec.family).check(spec, max_smem_optin);
}

LaunchShape attention_launch_shape(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& chunk) {
  return attention_family(spec.family).launch_shape(spec, b, chunk);
}

}  // namespace sage2::kernels
