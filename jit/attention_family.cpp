#include "jit/attention_family.hpp"

#include <string>

namespace sage2::jit {

// The descriptors (jit/family_*.cpp). Constant-initialised: the registry is usable from any
// static initialiser.
extern const AttentionFamilyDesc kMmaFamily;
extern const AttentionFamilyDesc kWgmmaFamily;

namespace {
constexpr const AttentionFamilyDesc* kFamilies[] = {&kMmaFamily, &kWgmmaFamily};
}  // namespace

std::span<const AttentionFamilyDesc* const> attention_families() noexcept { return kFamilies; }

const AttentionFamilyDesc* find_attention_family(KernelFamily family) noexcept {
  for (const AttentionFamilyDesc* d : kFamilies)
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
  for (const AttentionFamilyDesc* d : kFamilies)
    if (d->runs(arch, qk_bits, head_dim) && (!best || d->preference > best->preference)) best = d;
  return best ? best->family : kFamilies[0]->family;
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
