#include "plan/attention_spec.hpp"

#include "base/config.hpp"
#include "kernels/attention_family.hpp"

namespace sage2::plan {

kernels::KernelSpec attention_spec_for(const AttentionProblem& p, kernels::Arch arch, std::optional<kernels::KernelFamily> family) {
  kernels::KernelSpec s;
  const int head_dim = static_cast<int>(p.head_dim);
  s.family = family.value_or(kernels::default_attention_family(arch, p.qk_bits, head_dim, p.pv_fp16));
  const kernels::AttentionFamilyDesc& d = kernels::attention_family(s.family);
  if (!kernels::family_runs(d, arch, p.qk_bits, head_dim, p.pv_fp16))
    throw Error(ErrorCode::Unsupported,
                std::string("the ") + d.option_name + " attention family" +
                    (family ? " (ContextOptions::family or SAGE2_ATTENTION_FAMILY) " : " ") + d.requirement +
                    "; this call has qk_bits=" + std::to_string(p.qk_bits) + ", head_dim=" +
                    std::to_string(p.head_dim) + ", P̃V " + (p.pv_fp16 ? "fp16" : "fp8") + ", arch " +
                    kernels::arch_name(arch));
  s.arch = arch;
  s.head_dim = p.head_dim;
  s.causal = p.causal;
  s.quant() = p.quant();
  s.in_dtype = p.dtype;
  s.out_dtype = p.dtype;
  s.two_level_accum = true;
  s.return_lse = p.return_lse;
  s.varlen = p.varlen;
  s.mask = p.mask;
  s.pv() = p.pv();
  return s;
}

kernels::TileConfig heuristic_tile(const kernels::KernelSpec& attention_spec, int max_smem_optin) {
  return kernels::attention_family(attention_spec.family).default_tile(attention_spec, max_smem_optin);
}

void apply_quant_path(kernels::KernelSpec& s, QuantPath path) {
  // Auto and OnePass: Q quantized by the attention kernel wherever its family can (one trip of Q
  // through memory, one launch less); the other explicit paths keep their quantize_q (Split: the
  // baseline).
  s.q_in_kernel = (path == QuantPath::Auto || path == QuantPath::OnePass) &&
                  kernels::attention_family(s.family).q_in_kernel_ok(s);
  // Auto's split stage takes its statistics from a sample of KV tiles (dense calls: the sample is
  // per (batch, kv head)); the explicit Split keeps every key (the baseline the others equal).
  s.sampled_stats = path == QuantPath::Auto && !s.varlen;
}

kernels::KernelSpec plan_attention_heuristic(const AttentionProblem& p, kernels::Arch arch, int max_smem_optin) {
  kernels::KernelSpec s = attention_spec_for(p, arch);
  s.tile = heuristic_tile(s, max_smem_optin);
  apply_quant_path(s, base::config::context_config().quant_path);
  return s;
}

}  // namespace sage2::plan
