// The arch table: every GPU architecture sage2 generates code for, what its tensor cores offer the
// attention algorithm, and which code a device of a given compute capability gets. The lowest
// unit of kernels/: the spec names an Arch, the families' rules and the planner read the table.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "sage2/sage2.hpp"

namespace sage2::kernels {

// The GPU architectures sage2 generates code for (one row each in the arch table below, which says
// what each one runs). The values are stored in cache entry headers: existing ones never change,
// new ones are appended. Compare archs by arch_cc(), not by value.
enum class Arch : int {
  Sm89 = 0,    // Ada
  Sm90a = 1,   // Hopper (wgmma/TMA: arch-specific code, runs on compute capability 9.0 only)
  Sm80 = 2,    // Ampere A100 / A30
  Sm86 = 3,    // Ampere RTX 30 / A10 / A40
  Sm87 = 4,    // Ampere Jetson Orin
  Sm100 = 5,   // Blackwell B200 / GB200
  Sm103 = 6,   // Blackwell B300 / GB300
  Sm120 = 7,   // Blackwell RTX 50 / RTX PRO
  Sm121 = 8,   // Blackwell DGX Spark
};
const char* arch_name(Arch a) noexcept;        // "sm_80", ..., "sm_90a", "sm_120"; "?" for no arch
int arch_cc(Arch a) noexcept;                  // compute capability as 10·major + minor: 80 ... 121
// Accepts "sm_NN", "compute_NN", "NN" and "sm_90"/"sm_90a"/"90a" for Hopper; throws InvalidArgument
// naming the archs of the table otherwise.
Arch parse_arch(const std::string& s);

// The arch table: every compute capability sage2 generates code for, what its tensor cores offer
// the attention algorithm, and the path it gets. The families' rules (runs(), validate()) and the
// planner's defaults read it; device → code target (code_target() below) resolves against it.
//
//   cc            QKᵀ                P̃V (default; the other is an option)   family
//   80, 86, 87    INT8, INT4 opt-in  FP16 (FP8 unavailable: no e4m3)          mma.sync
//   89            INT8, INT4 opt-in  FP8 e4m3 (FP16 option)                   mma.sync
//   90 (sm_90a)   INT8 (INT4 opt-in, emulated) FP8 (FP16 option: mma.sync)    wgmma + TMA, mma.sync for the rest
//   100, 103,     INT8               FP8 e4m3 (FP16 option)                   mma.sync
//   120, 121
struct ArchInfo {
  Arch arch;
  const char* name;         // NVRTC's real architecture: "sm_80", "sm_90a", ... (PTX: compute_<cc>)
  int cc;                   // 10·major + minor
  const char* gpus;         // for messages and sage2-info
  bool int4;                // INT4 QKᵀ (mma.sync m16n8k64 .s4) may be asked for
  bool fp8_pv;              // e4m3 conversions and mma.sync exist: FP8 P̃V (the default where true)
  bool arch_specific;       // its code runs on exactly this compute capability (sm_90a)
  // P̃V may accumulate in fp16 inside a KV tile (KernelSpec::pv_acc16: mma.sync with an f16
  // accumulator, e4m3 on the FP8 archs, f16 on the FP16 path), flushed into the fp32 O between
  // tiles. Every mma.sync arch but sm_90a, whose default is the wgmma family (fp32 accumulation)
  // and whose ptxas emulates e4m3 mma.sync.
  bool pv_acc16;
  // The accumulation a call gets unless it asks: fp16 where the reference (SageAttention2++)
  // makes "fp32+fp16" its default, i.e. the GeForce-class FP8 archs (sm_89, sm_120, sm_121; its
  // error there is fp32 accumulation's: bench/NOTES.md, session 9 g1 and session 10 p3).
  bool pv_acc16_default;
  int max_smem_optin;       // opt-in shared memory per block (bytes): planning without a device
};
// In compute capability order.
std::span<const ArchInfo> arch_table() noexcept;
const ArchInfo* find_arch_info(Arch arch) noexcept;
const ArchInfo& arch_info(Arch arch);  // InvalidArgument for a value outside the table
// An SM's shared memory as the plans count it without a device: the per-block opt-in plus the
// 1 KB the driver reserves per CTA (sm_90: 227 + 1 = 228 KB).
inline int sm_shared_bytes(Arch arch) { return arch_info(arch).max_smem_optin + 1024; }
// The QK code width and P̃V precision a call gets on `arch` unless it asks: 8-bit everywhere (4-bit
// only when asked), FP16 P̃V where FP8 is unavailable.
int default_qk_bits(Arch arch) noexcept;
bool default_pv_fp16(Arch arch) noexcept;
// The P̃V accumulation a call gets unless it asks (ArchInfo::pv_acc16_default): fp16 inside a tile
// only on the FP8 path (the reference's "fp32+fp16"); the FP16 path's default stays fp32.
bool default_pv_acc16(Arch arch, bool pv_fp16) noexcept;
// A request resolved on `arch` (the one rule for the API's params and the emulation's config):
// Auto the arch's default; PreferFp16 fp16 where the arch offers it; otherwise what was asked.
bool resolve_pv_fp16(Arch arch, PvPrecision p) noexcept;
bool resolve_pv_acc16(Arch arch, bool pv_fp16, PvAccum a) noexcept;

// Where a Context's kernels are generated for.
struct CodeTarget {
  Arch arch = Arch::Sm90a;  // the path and the code's architecture
  bool ptx = false;         // PTX for compute_<cc>, JIT-compiled by the driver (KernelSpec::ptx)
  std::string note;         // why PTX or another arch than the device's (empty: native cubins)
};
// The target for a device of compute capability `cc` (10·major + minor):
//  - a cc of the table: its arch, cubins;
//  - none of the table, cc >= 80: the newest arch of the table the device can run as PTX (older
//    cc, not arch-specific), with a note;
//  - cc < 80: Unsupported, naming what sage2 needs (INT8 mma.sync and cp.async: Ampere sm_80).
// `nvrtc_archs`: the real architectures the loaded NVRTC compiles for (nvrtcGetSupportedArchs,
// as cc numbers; empty: unknown, everything assumed). An arch it lacks falls back to the newest
// one it has that the device can run, as PTX, with a note (Unsupported when there is none).
// `requested` (ContextOptions::target_arch): generate for that arch instead — PTX unless it is the
// device's own — refused (Unsupported) when the device cannot run it (a newer arch; an
// arch-specific one on another cc) or when `nvrtc_archs` lacks it.
CodeTarget code_target(int cc, std::span<const int> nvrtc_archs = {}, std::optional<Arch> requested = std::nullopt);

}  // namespace sage2::kernels
