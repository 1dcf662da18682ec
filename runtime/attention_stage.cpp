#include "runtime/attention_stage.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace sage2::runtime {

std::size_t delta_s_workspace_bytes(const kernels::QuantBuffers& b, std::size_t cap) {
  return kernels::delta_s_workspace_bytes(b, cap);
}

void encode_tma_map(const kernels::TmaMapSpec& t, kernels::TmaMap& out) {
  static_assert(sizeof(CUtensorMap) == sizeof(kernels::TmaMap), "TmaMap must mirror CUtensorMap");
  static_assert(alignof(kernels::TmaMap) >= 64, "tensor maps must be 64-byte aligned");
  const cuuint64_t dims[2] = {t.dims[0], t.dims[1]};
  const cuuint64_t strides[1] = {t.row_stride};
  const cuuint32_t box[2] = {t.box[0], t.box[1]};
  const cuuint32_t estr[2] = {1, 1};
  const CUtensorMapSwizzle sw = t.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : t.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                        : CU_TENSOR_MAP_SWIZZLE_32B;
  auto* map = reinterpret_cast<CUtensorMap*>(&out);
  const CUresult r = base::driver::api().cuTensorMapEncodeTiled(
      map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(t.base), dims, strides, box, estr,
      CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::DriverError,
                "cuTensorMapEncodeTiled(dims " + std::to_string(t.dims[0]) + "x" + std::to_string(t.dims[1]) +
                    ", stride " + std::to_string(t.row_stride) + ", box " + std::to_string(t.box[0]) + "x" +
                    std::to_string(t.box[1]) + ", swizzle " + std::to_string(t.swizzle_bytes) +
                    "): " + base::driver::error_text(r));
}

void TmaMapCache::get(const kernels::AttentionFamilyDesc& family, const kernels::KernelSpec& spec, const kernels::QuantBuffers& b,
                      const void* workspace, kernels::TmaMap* out) const {
  const int n = family.tma_maps;
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < used_; ++i)
    if (slots_[i].workspace == workspace) {
      std::memcpy(out, slots_[i].maps, sizeof(kernels::TmaMap) * static_cast<std::size_t>(n));
      return;
    }
  kernels::TmaMapSpec specs[kernels::kMaxTmaMaps];
  family.tma_specs(spec, b, workspace, specs);
  Slot s;
  s.workspace = workspace;
  for (int i = 0; i < n; ++i) encode_tma_map(specs[i], s.maps[i]);
  const int slot = used_ < kSlots ? used_++ : next_;
  next_ = (slot + 1) % kSlots;
  slots_[slot] = s;
  std::memcpy(out, s.maps, sizeof(kernels::TmaMap) * static_cast<std::size_t>(n));
}

void layout_attention_stage(const kernels::KernelSpec& spec, const kernels::QuantBuffers& b, std::size_t delta_s_bytes,
                            AttentionStagePlan& plan) {
  plan.spec = spec;
  plan.family = &kernels::attention_family(spec.family);
  plan.kernel = plan.family->kernel_config(spec);
  plan.delta_s_bytes = delta_s_bytes;
  plan.chunks = kernels::attention_chunks(b, spec.smooth_q ? delta_s_bytes : 0);
}

void check_attention_stage(Context::Impl& ctx, const AttentionStagePlan& plan) {
  if (plan.spec.arch != ctx.arch())
    throw Error(ErrorCode::InvalidArgument, std::string("attention stage: the spec is for ") +
                                                kernels::arch_name(plan.spec.arch) + ", the Context's device is " +
                                                kernels::arch_name(ctx.arch()));
  plan.family->check(plan.spec, ctx.facts().max_shared_per_block_optin);
}

void load_attention_stage(Context::Impl& ctx, const kernels::QuantBuffers& b, AttentionStagePlan& plan,
                          LoadedKernel* attention, LoadedKernel* delta_s) {
  check_attention_stage(ctx, plan);
  const kernels::KernelSpec& spec = plan.spec;
  LoadedKernel& attn = attention ? *attention : ctx.kernels().get(spec);
  LoadedKernel* ds = nullptr;
  kernels::KernelSpec ds_spec;
  if (spec.smooth_q) {
    ds_spec = kernels::delta_s_spec_for(spec);
    ds = delta_s ? delta_s : &ctx.kernels().get(ds_spec);
  }
  plan.attention.clear();
  plan.delta_s.clear();
  for (const auto& c : plan.chunks) {
    plan.attention.push_back({&attn, plan.family->launch_shape(spec, b, c)});
    if (ds) plan.delta_s.push_back({ds, kernels::delta_s_launch_shape(ds_spec, b, c)});
  }
}

void build_attention_stage_params(const AttentionStagePlan& plan, const kernels::QuantBuffers& b,
                                  const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                                  float sm_scale, void* delta_s_workspace, AttentionStageParams& params,
                                  const MaskRef* mask, const TensorRef* q_input) {
  const kernels::KernelSpec& spec = plan.spec;
  if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(delta_s_workspace) & 15u) != 0)
    throw Error(ErrorCode::InvalidArgument, "attention stage: the ΔS workspace must be 16-byte aligned");
  const kernels::AttentionArgs args{workspace, out, lse, sm_scale, delta_s_workspace, mask ? *mask : MaskRef{},
                                q_input ? *q_input : TensorRef{}};
  const std::size_t n = plan.chunks.size();
  params.attention.resize(n);
  params.delta_s.clear();
  for (std::size_t i = 0; i < n; ++i) {
    plan.family->write_params(spec, b, args, plan.chunks[i], params.attention[i].bytes);
    if (spec.smooth_q)
      params.delta_s.push_back(kernels::make_delta_s_params(b, workspace, k_input, delta_s_workspace, plan.chunks[i]));
  }
}

void add_tensor_maps(const AttentionStagePlan& plan, const kernels::QuantBuffers& b, const void* workspace,
                     AttentionStageParams& params) {
  const kernels::AttentionFamilyDesc& f = *plan.family;
  if (f.tma_maps == 0) return;
  kernels::TmaMap maps[kernels::kMaxTmaMaps];
  plan.tma.get(f, plan.spec, b, workspace, maps);
  for (auto& p : params.attention)
    for (int m = 0; m < f.tma_maps && m < kernels::kMaxTmaMaps; ++m)
      std::memcpy(p.bytes + f.tma_offsets[m], &maps[m], sizeof(kernels::TmaMap));
}

void enqueue_attention_stage(const AttentionStagePlan& plan, AttentionStageParams& params, CUstream stream) {
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    if (!plan.delta_s.empty()) launch(*plan.delta_s[i].kernel, plan.delta_s[i].shape, &params.delta_s[i], stream);
    launch(*plan.attention[i].kernel, plan.attention[i].shape, params.attention[i].bytes, stream);
  }
}

void launch_attention_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec, const kernels::QuantBuffers& b,
                            const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                            float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream,
                            const TensorRef* q_input) {
  AttentionStagePlan plan;
  layout_attention_stage(attention_spec, b, delta_s_bytes, plan);
  check_attention_stage(ctx, plan);
  AttentionStageParams params;
  build_attention_stage_params(plan, b, k_input, workspace, out, lse, sm_scale, delta_s_workspace, params, nullptr,
                               q_input);
  base::driver::ScopedContext scope(ctx.cu_context());
  add_tensor_maps(plan, b, workspace, params);
  load_attention_stage(ctx, b, plan);
  enqueue_attention_stage(plan, params, stream);
}

}  // namespace sage2::runtime
