#include "plan/candidates.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "kernels/attention_family.hpp"
#include "plan/attention_spec.hpp"

namespace sage2::plan {

int default_max_smem_optin(kernels::Arch arch) {
  const kernels::ArchInfo* i = kernels::find_arch_info(arch);
  return i ? i->max_smem_optin : 48 * 1024;
}

const std::vector<kernels::TileConfig>& tile_candidates(kernels::KernelFamily family, kernels::Arch) {
  static const std::vector<kernels::TileConfig> none;
  const kernels::AttentionFamilyDesc* f = kernels::find_attention_family(family);
  return f ? f->candidates() : none;
}

std::optional<std::string> static_reject_reason(const kernels::KernelSpec& spec, int max_smem_optin) {
  try {
    kernels::check_attention_config(spec, max_smem_optin);
    return std::nullopt;
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

std::optional<std::string> ptxas_reject_reason(const kernels::KernelSpec& spec, const jit::PtxasFacts& f) {
  if (f.spill_store_bytes > 0 || f.spill_load_bytes > 0)
    return "spills registers (" + std::to_string(f.spill_store_bytes) + " bytes stored, " +
           std::to_string(f.spill_load_bytes) + " loaded)";
  if (f.stack_frame_bytes > 0)
    return "uses a " + std::to_string(f.stack_frame_bytes) + "-byte stack frame (local memory)";
  if (f.registers > 0) {
    const int threads = kernels::attention_kernel_config(spec).threads;
    if (static_cast<long long>(f.registers) * threads > kRegistersPerBlock)
      return std::to_string(f.registers) + " registers x " + std::to_string(threads) + " threads exceed the " +
             std::to_string(kRegistersPerBlock) + " registers of a block";
  }
  return std::nullopt;
}


std::string tile_str(const kernels::TileConfig& t) {
  char b[64];
  std::snprintf(b, sizeof b, "bq%d.bk%d.w%d.s%d", t.bq, t.bk, t.warps, t.stages);
  return b;
}

std::optional<kernels::TileConfig> parse_tile(const std::string& s) {
  int v[4];
  char tail = 0;
  if (std::sscanf(s.c_str(), "bq%d.bk%d.w%d.s%d%c", &v[0], &v[1], &v[2], &v[3], &tail) == 4 ||
      std::sscanf(s.c_str(), "%dx%dx%dx%d%c", &v[0], &v[1], &v[2], &v[3], &tail) == 4) {
    for (int x : v)
      if (x <= 0 || x > 4096) return std::nullopt;
    return kernels::TileConfig{v[0], v[1], v[2], v[3]};
  }
  return std::nullopt;
}

Specialisation Specialisation::defaults(kernels::Arch arch, int head_dim, CausalMode causal, DType dtype) {
  Specialisation s;
  s.head_dim = head_dim;
  s.causal = causal;
  s.dtype = dtype;
  s.qk_bits = kernels::default_qk_bits(arch);
  s.smooth_q = s.qk_bits == 4;
  s.pv_fp16 = kernels::default_pv_fp16(arch);
  s.pv_acc16 = kernels::default_pv_acc16(arch, s.pv_fp16);
  s.smooth_k = true;
  s.smooth_v = false;
  return s;
}

AttentionProblem Specialisation::problem(std::int64_t q_len, std::int64_t kv_len, std::int64_t q_heads,
                                         std::int64_t kv_heads) const {
  AttentionProblem p;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.head_dim = head_dim;
  p.dtype = dtype;
  p.causal = causal;
  p.quant() = quant();
  p.pv() = pv();
  p.return_lse = return_lse;
  p.sm_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return p;
}

kernels::KernelSpec Specialisation::attention_spec(kernels::Arch arch, const kernels::TileConfig& tile) const {
  kernels::KernelSpec k = attention_spec_for(problem(), arch, family);
  k.tile = tile;
  return k;
}

TuningKey Specialisation::key(kernels::Arch arch, std::int64_t q_len, std::int64_t kv_len, std::int64_t q_heads,
                              std::int64_t kv_heads) const {
  return tuning_key(problem(q_len, kv_len, q_heads, kv_heads), attention_spec(arch, kernels::TileConfig{}).family);
}

std::string Specialisation::str() const {
  std::string s = "d";
  s += std::to_string(head_dim);
  s += causal == CausalMode::None ? " full" : causal == CausalMode::TopLeft ? " causal" : " causal-br";
  s += " ";
  s += dtype_name(dtype);
  s += " int";
  s += std::to_string(qk_bits);
  std::string sm;
  if (smooth_q) sm += "q";
  if (smooth_k) sm += "k";
  if (smooth_v) sm += "v";
  if (!sm.empty()) {
    s += " s";
    s += sm;
  }
  if (return_lse) s += " lse";
  if (pv_fp16) s += " pv16";
  if (pv_acc16) s += " acc16";
  if (family) {
    s += " ";
    s += kernels::family_name(*family);
  }
  return s;
}


}  // namespace sage2::plan
