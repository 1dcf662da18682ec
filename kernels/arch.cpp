#include "kernels/arch.hpp"

#include <string>

namespace sage2::kernels {

namespace {
constexpr ArchInfo kArchTable[] = {
    // arch        name      cc   gpus                         int4   fp8_pv arch_specific pv_acc16 (default) smem opt-in
    {Arch::Sm80, "sm_80", 80, "Ampere (A100, A30)", true, false, false, true, false, 163 * 1024},
    {Arch::Sm86, "sm_86", 86, "Ampere (RTX 30, A10, A40, RTX A6000)", true, false, false, true, false, 99 * 1024},
    {Arch::Sm87, "sm_87", 87, "Ampere (Jetson Orin)", true, false, false, true, false, 163 * 1024},
    {Arch::Sm89, "sm_89", 89, "Ada (RTX 40, L4, L40, RTX 6000 Ada)", true, true, false, true, true, 99 * 1024},
    {Arch::Sm90a, "sm_90a", 90, "Hopper (H100, H200, H20, GH200)", true, true, true, false, false, 227 * 1024},
    {Arch::Sm100, "sm_100", 100, "Blackwell (B200, GB200)", false, true, false, true, false, 227 * 1024},
    {Arch::Sm103, "sm_103", 103, "Blackwell (B300, GB300)", false, true, false, true, false, 227 * 1024},
    {Arch::Sm120, "sm_120", 120, "Blackwell (RTX 50, RTX PRO 6000)", false, true, false, true, true, 99 * 1024},
    {Arch::Sm121, "sm_121", 121, "Blackwell (DGX Spark)", false, true, false, true, true, 99 * 1024},
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

bool default_pv_acc16(Arch arch, bool pv_fp16) noexcept {
  const ArchInfo* i = find_arch_info(arch);
  return i && !pv_fp16 && i->pv_acc16 && i->pv_acc16_default;
}

bool resolve_pv_fp16(Arch arch, PvPrecision p) noexcept {
  return p == PvPrecision::Auto ? default_pv_fp16(arch) : p == PvPrecision::Fp16;
}

bool resolve_pv_acc16(Arch arch, bool pv_fp16, PvAccum a) noexcept {
  if (a == PvAccum::Auto) return default_pv_acc16(arch, pv_fp16);
  if (a == PvAccum::PreferFp16) {
    const ArchInfo* i = find_arch_info(arch);
    return i && i->pv_acc16;
  }
  return a == PvAccum::Fp16;
}

const char* arch_name(Arch a) noexcept {
  const ArchInfo* i = find_arch_info(a);
  return i ? i->name : "?";
}

int arch_cc(Arch a) noexcept {
  const ArchInfo* i = find_arch_info(a);
  return i ? i->cc : 0;
}

Arch parse_arch(const std::string& s) {
  std::string n = s;
  for (const char* prefix : {"sm_", "compute_"})
    if (n.rfind(prefix, 0) == 0) {
      n = n.substr(std::string(prefix).size());
      break;
    }
  if (n == "90" || n == "90a") return Arch::Sm90a;  // Hopper: the arch-specific target (wgmma)
  for (const ArchInfo& i : arch_table())
    if (n == std::to_string(i.cc)) return i.arch;
  std::string known;
  for (const ArchInfo& i : arch_table()) known += std::string(known.empty() ? "" : ", ") + i.name;
  throw Error(ErrorCode::InvalidArgument, "arch '" + s + "' is not supported; supported archs are " + known);
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

}  // namespace sage2::kernels
