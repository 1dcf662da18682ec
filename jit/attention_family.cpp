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

// ---- the arch table ------------------------------------------------------------------------
namespace {
constexpr ArchInfo kArchTable[] = {
    // arch        name      cc   gpus                                     int4   fp8_pv arch_specific smem opt-in
    {Arch::Sm80, "sm_80", 80, "Ampere (A100, A30)", true, false, false, 163 * 1024},
    {Arch::Sm86, "sm_86", 86, "Ampere (RTX 30, A10, A40, RTX A6000)", true, false, false, 99 * 1024},
    {Arch::Sm87, "sm_87", 87, "Ampere (Jetson Orin)", true, false, false, 163 * 1024},
    {Arch::Sm89, "sm_89", 89, "Ada (RTX 40, L4, L40, RTX 6000 Ada)", true, true, false, 99 * 1024},
    {Arch::Sm90a, "sm_90a", 90, "Hopper (H100, H200, H20, GH200)", true, true, true, 227 * 1024},
    {Arch::Sm100, "sm_100", 100, "Blackwell (B200, GB200)", false, true, false, 227 * 1024},
    {Arch::Sm103, "sm_103", 103, "Blackwell (B300, GB300)", false, true, false, 227 * 1024},
    {Arch::Sm120, "sm_120", 120, "Blackwell (RTX 50, RTX PRO 6000)", false, true, false, 99 * 1024},
    {Arch::Sm121, "sm_121", 121, "Blackwell (DGX Spark)", false, true, false, 99 * 1024},
};

std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }
}  // namespace

std::span<const ArchInfo> arch_table() noexcept { return kArchTable; }

const ArchInfo* find_arch_info(Arch arch) noexcept {
  for (const ArchInfo& i : kArchTable)
    if (i.arch == arch) return &i;
  return nullptr;
}

const ArchInfo& arch_info(Arch arch) {
  if (const ArchInfo* i = find_arch_info(arch)) return *i;
  throw Error(ErrorCode::InvalidArgument, "arch value " + std::to_string(static_cast<int>(arch)) + " is not in the arch table");
}

int default_qk_bits(Arch) noexcept { return 8; }

bool default_pv_fp16(Arch arch) noexcept {
  const ArchInfo* i = find_arch_info(arch);
  return i && !i->fp8_pv;
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

CodeTarget code_target(int cc, std::span<const int> nvrtc_archs, std::optional<Arch> requested) {
  auto nvrtc_has = [&](const ArchInfo& i) {
    if (nvrtc_archs.empty()) return true;
    for (int a : nvrtc_archs)
      if (a == i.cc) return true;
    return false;
  };
  // PTX (and cubins) of a non-arch-specific target run on every later compute capability.
  auto device_runs = [&](const ArchInfo& i) { return i.arch_specific ? i.cc == cc : i.cc <= cc; };
  std::string table;
  for (const ArchInfo& i : kArchTable) table += std::string(table.empty() ? "" : ", ") + i.name;
  if (cc < 80)
    throw Error(ErrorCode::Unsupported,
                "compute capability " + cc_text(cc) + " is older than sage2 supports: its kernels need compute "
                "capability 8.0 or newer (Ampere: INT8 tensor-core mma.sync m16n8k32, ldmatrix and cp.async); "
                "sage2 generates code for " + table + " and, as PTX, for newer GPUs");
  if (requested) {
    const ArchInfo& r = arch_info(*requested);
    if (!device_runs(r))
      throw Error(ErrorCode::Unsupported,
                  std::string("target arch ") + r.name + " (ContextOptions::target_arch or SAGE2_TARGET_ARCH) cannot run on "
                  "this device of compute capability " + cc_text(cc) +
                  (r.arch_specific ? ": its code runs on compute capability " + cc_text(r.cc) + " only"
                                   : ": a target may not be newer than the device") +
                  " (targets the device runs: the table's archs up to " + cc_text(cc) + ", sm_90a on 9.0 only)");
    if (!nvrtc_has(r))
      throw Error(ErrorCode::Unsupported, std::string("target arch ") + r.name +
                                              ": the loaded NVRTC cannot compile for it (too old a CUDA toolkit)");
    if (r.cc == cc) return CodeTarget{r.arch, false, ""};
    return CodeTarget{r.arch, true,
                      std::string("target arch ") + r.name + " requested: compute_" + std::to_string(r.cc) +
                          " PTX, JIT-compiled by the driver for the device's compute capability " + cc_text(cc)};
  }
  const ArchInfo* exact = nullptr;
  for (const ArchInfo& i : kArchTable)
    if (i.cc == cc) exact = &i;
  if (exact && nvrtc_has(*exact)) return CodeTarget{exact->arch, false, ""};
  const ArchInfo* best = nullptr;
  for (const ArchInfo& i : kArchTable)
    if (!i.arch_specific && i.cc <= cc && nvrtc_has(i)) best = &i;  // the table is in cc order
  if (!best)
    throw Error(ErrorCode::Unsupported,
                "compute capability " + cc_text(cc) + ": the loaded NVRTC compiles for none of sage2's archs that "
                "this device can run (" + table + "); load a newer NVRTC (SAGE2_LIBNVRTC)");
  const std::string what = std::string("compute_") + std::to_string(best->cc) + " PTX (the " + best->name +
                           " path), JIT-compiled by the driver";
  if (exact)
    return CodeTarget{best->arch, true,
                      std::string("the loaded NVRTC cannot compile for ") + exact->name +
                          " (CUDA 12.8 or newer can); using " + what};
  return CodeTarget{best->arch, true,
                    "compute capability " + cc_text(cc) + " is newer than sage2's arch table; using " + what};
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

bool family_runs(const AttentionFamilyDesc& d, Arch arch, int qk_bits, int head_dim, bool pv_fp16) {
  const ArchInfo* i = find_arch_info(arch);
  if (!i || (!pv_fp16 && !i->fp8_pv) || (pv_fp16 && !d.runs_pv_fp16())) return false;
  return d.runs(arch, qk_bits, head_dim);
}

KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim, bool pv_fp16) noexcept {
  const AttentionFamilyDesc* best = nullptr;
  for (const AttentionFamilyDesc* d : attention_families())
    if (family_runs(*d, arch, qk_bits, head_dim, pv_fp16) && (!best || d->preference > best->preference)) best = d;
  return best ? best->family : attention_families()[0]->family;
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

}  // namespace sage2::jit
