#include "runtime/wgmma_stage.hpp"

#include "runtime/attention_stage.hpp"

#include <string>
#include <vector>

namespace sage2::runtime {

void encode_tma_map(const jit::TmaMapSpec& t, dev::TmaDesc& out) {
  static_assert(sizeof(CUtensorMap) == sizeof(dev::TmaDesc), "TmaDesc must mirror CUtensorMap");
  static_assert(alignof(dev::TmaDesc) >= 64, "tensor maps must be 64-byte aligned");
  const cuuint64_t dims[2] = {t.dims[0], t.dims[1]};
  const cuuint64_t strides[1] = {t.row_stride};
  const cuuint32_t box[2] = {t.box[0], t.box[1]};
  const cuuint32_t estr[2] = {1, 1};
  const CUtensorMapSwizzle sw = t.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : t.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                        : CU_TENSOR_MAP_SWIZZLE_32B;
  auto* map = reinterpret_cast<CUtensorMap*>(&out);
  const CUresult r = driver::api().cuTensorMapEncodeTiled(
      map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(t.base), dims, strides, box, estr,
      CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::DriverError,
                "cuTensorMapEncodeTiled(dims " + std::to_string(t.dims[0]) + "x" + std::to_string(t.dims[1]) +
                    ", stride " + std::to_string(t.row_stride) + ", box " + std::to_string(t.box[0]) + "x" +
                    std::to_string(t.box[1]) + ", swizzle " + std::to_string(t.swizzle_bytes) +
                    "): " + driver::error_text(r));
}

// Context::attention runs the same steps from a cached plan (runtime/call_plan.cpp run_call_plan):
// a change to how the parameters or tensor maps are built here belongs there too.
void launch_wgmma_attention_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                                  const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                                  float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream) {
  jit::KernelSpec spec = attention_spec;
  spec.arch = ctx.arch();
  jit::check_wgmma_config(spec, ctx.facts().max_shared_per_block_optin);
  if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(delta_s_workspace) & 15u) != 0)
    throw Error(ErrorCode::InvalidArgument, "attention stage (wgmma): the ΔS workspace must be 16-byte aligned");
  const std::vector<jit::AttentionChunk> chunks = jit::attention_chunks(b, spec.smooth_q ? delta_s_bytes : 0);
  // Every parameter struct (tensor maps included) first: errors surface before the first launch.
  const jit::WgmmaTmaSpecs tma = jit::wgmma_tma_specs(spec, b, workspace);
  dev::TmaDesc tm_q, tm_k, tm_v;
  {
    driver::ScopedContext scope(ctx.cu_context());
    encode_tma_map(tma.q, tm_q);
    encode_tma_map(tma.k, tm_k);
    encode_tma_map(tma.v, tm_v);
  }
  std::vector<dev::WgmmaAttentionParams> ap;
  std::vector<dev::DeltaSParams> dp;
  ap.reserve(chunks.size());
  for (const auto& c : chunks) {
    ap.push_back(jit::make_wgmma_params(spec, b, workspace, out, lse, sm_scale, delta_s_workspace, c));
    ap.back().tm_q = tm_q;
    ap.back().tm_k = tm_k;
    ap.back().tm_v = tm_v;
    if (spec.smooth_q) dp.push_back(jit::make_delta_s_params(b, workspace, k_input, delta_s_workspace, c));
  }
  driver::ScopedContext scope(ctx.cu_context());
  LoadedKernel& attn = ctx.kernels().get(spec);
  const DeltaSKernel dsk = delta_s_kernel(ctx, spec);
  LoadedKernel* ds = dsk.kernel;
  const jit::KernelSpec& ds_spec = dsk.spec;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (ds) launch(*ds, jit::delta_s_launch_shape(ds_spec, b, chunks[i]), &dp[i], stream);
    launch(attn, jit::wgmma_launch_shape(spec, b, chunks[i]), &ap[i], stream);
  }
}

}  // namespace sage2::runtime
