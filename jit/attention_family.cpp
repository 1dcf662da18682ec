#include "jit/attention_family.hpp"

#include <string>

#include "jit/family_mma.hpp"
#include "jit/family_wgmma.hpp"

namespace sage2::jit {

LaunchShape AttentionFamilyDesc::launch_shape(const KernelSpec& spec, const QuantBuffers& b,
                                              const AttentionChunk& chunk) const {
  return chunk_launch_shape(spec, b, chunk, kernel_config(spec));
}

void AttentionFamilyDesc::tma_specs(const KernelSpec&, const QuantBuffers&, const void*, TmaMapSpec*) const {}

bool AttentionFamilyDesc::q_in_kernel_ok(const KernelSpec&) const { return false; }
bool AttentionFamilyDesc::waits_for_previous() const { return false; }

bool waits_for_previous_kernel(const KernelSpec& spec) {
  if (spec.arch != Arch::Sm90a) return false;  // griddepcontrol: sm_90+
  if (spec.family == KernelFamily::Quantize) return true;  // quantize.cuh: qz::enter()
  const AttentionFamilyDesc* f = find_attention_family(spec.family);
  return f && f->waits_for_previous();
}

// The descriptors are constant-initialised objects (jit/family_*.cpp): the registry is usable
// from any static initialiser.
std::span<const AttentionFamilyDesc* const> attention_families() noexcept {
  static const AttentionFamilyDesc* const families[] = {&mma_family(), &wgmma_family()};
  return families;
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

KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim) noexcept {
  const AttentionFamilyDesc* best = nullptr;
  for (const AttentionFamilyDesc* d : attention_families())
    if (d->runs(arch, qk_bits, head_dim) && (!best || d->preference > best->preference)) best = d;
  return best ? best->family : attention_families()[0]->family;
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

}  // namespace sage2::jit
