#include "runtime/attention_plan.hpp"

#include "plan/attention_spec.hpp"
#include "plan/call_kernels.hpp"
#include "runtime/direct_stage.hpp"
#include "plan/planner.hpp"
#include "runtime/context_impl.hpp"
#include "base/config.hpp"
#include "kernels/attention_family.hpp"

namespace sage2::runtime {

std::optional<kernels::KernelFamily> attention_family_override(AttentionFamily family, const DeviceFacts& facts,
                                                           kernels::Arch arch) {
  if (family == AttentionFamily::Auto) return std::nullopt;
  const auto f = kernels::parse_attention_family(attention_family_name(family));
  if (!f) throw Error(ErrorCode::Internal, std::string("attention family ") + attention_family_name(family) +
                                               " has no kernel family");
  // A family with no kernel at all for this arch is refused when the Context is created.
  const kernels::AttentionFamilyDesc& d = kernels::attention_family(*f);
  if (!d.runs(arch, 4, 1) && !d.runs(arch, 8, 1))
    throw Error(ErrorCode::Unsupported, std::string("attention family ") + d.option_name +
                                            " (ContextOptions::family or SAGE2_ATTENTION_FAMILY) " + d.requirement +
                                            "; device " + std::to_string(facts.ordinal) + " (" + facts.name +
                                            ") is " + kernels::arch_name(arch));
  return *f;
}

kernels::KernelSpec plan_attention(const plan::AttentionProblem& p, const Context::Impl& ctx) {
  return plan::planned_attention_spec(p, ctx.call_settings());
}

kernels::KernelSpec plan_attention(const plan::AttentionProblem& p, kernels::Arch arch, const DeviceFacts& facts) {
  const base::config::ContextConfig defaults = base::config::context_config();
  const auto planner = plan::shared_planner(plan::context_db_path(defaults, facts.name, arch), facts.name,
                                                arch, facts.max_shared_per_block_optin);
  plan::CallSettings s;
  s.arch = arch;
  s.device = direct_device(facts);
  s.quant_path = defaults.quant_path;
  s.family = attention_family_override(defaults.family, facts, arch);
  s.planner = planner.get();
  return plan::planned_attention_spec(p, s);  // ptx false: the caller's loader sets its code form
}

void check_pointers_on_device(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                              const TensorRef& out, const float* lse, const SeqLens* lens, const MaskRef* mask) {
  const auto& a = base::driver::api();
  // cuPointerGetAttributes (not cuPointerGetAttribute): it reports memory the driver does not know
  // as memory type 0 instead of failing, so rejecting a host pointer raises no CUDA API error.
  auto check = [&](const void* ptr, const char* name) {
    unsigned memory_type = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* data[2] = {&memory_type, &ordinal};
    const CUresult r = a.cuPointerGetAttributes(2, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS || memory_type == 0)
      throw Error(ErrorCode::InvalidArgument,
                  std::string(name) + ": pointer is not CUDA device memory (" +
                      (r != CUDA_SUCCESS ? base::driver::error_text(r) : std::string("the driver does not know it")) + ")");
    if (ordinal != ctx.facts().ordinal)
      throw Error(ErrorCode::InvalidArgument, std::string(name) + ": memory is on device " + std::to_string(ordinal) +
                                                  " but this Context is on device " +
                                                  std::to_string(ctx.facts().ordinal));
  };
  check(q.data, "q");
  check(k.data, "k");
  check(v.data, "v");
  check(out.data, "out");
  if (lse) check(lse, "params.lse");
  if (lens) {
    if (lens->cu_seqlens_q) check(lens->cu_seqlens_q, "lens.cu_seqlens_q");
    if (lens->cu_seqlens_k) check(lens->cu_seqlens_k, "lens.cu_seqlens_k");
    if (lens->kv_lens) check(lens->kv_lens, "lens.kv_lens");
  }
  if (mask && mask->type != MaskType::None) check(mask->data, "params.mask");
}

}  // namespace sage2::runtime
