// Context::attention: validate → cached plan (kernel specs, loaded kernels, shapes) → workspace →
// quantize → ΔS → attention, all enqueued on the caller's stream without host synchronisation.
#include <string>

#include "runtime/attention_plan.hpp"
#include "runtime/call_plan.hpp"
#include "runtime/context_impl.hpp"

namespace sage2 {

// Per call after the first of a shape signature: validation, one hash lookup, the pointer
// checks, then the launches with parameter structs rebuilt for the pointers (runtime/call_plan.hpp).
std::size_t Context::workspace_size(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                                    const AttentionParams& params) const {
  return runtime::call_workspace_bytes(*impl_, q, k, v, out, params);
}

namespace {

void run_attention(Context::Impl& impl, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                   const TensorRef& out, const AttentionParams& params, CUstream_st* stream, const SeqLens* lens) {
  const std::shared_ptr<const runtime::CallPlan> plan = runtime::call_plan(impl, q, k, v, out, params, lens);
  const std::size_t total = plan->total();
  runtime::check_pointers_on_device(impl, q, k, v, out, params.lse, lens, &params.mask);
  char* ws;
  if (params.workspace) {
    if (params.workspace_bytes < total)
      throw Error(ErrorCode::InvalidArgument, "params.workspace_bytes=" + std::to_string(params.workspace_bytes) +
                                                  " is smaller than workspace_size()=" + std::to_string(total));
    ws = static_cast<char*>(params.workspace);
  } else {
    ws = static_cast<char*>(impl.workspace().get(stream, total));
  }
  runtime::run_call_plan(impl, *plan, q, k, v, out, params.lse, ws, stream, lens,
                         params.mask.type != MaskType::None ? &params.mask : nullptr);
}

}  // namespace

void Context::attention(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                        const AttentionParams& params, CUstream_st* stream) {
  run_attention(*impl_, q, k, v, out, params, stream, nullptr);
}

void Context::attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                               const SeqLens& lens, const AttentionParams& params, CUstream_st* stream) {
  run_attention(*impl_, q, k, v, out, params, stream, &lens);
}

std::size_t Context::workspace_size_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& out, const SeqLens& lens,
                                           const AttentionParams& params) const {
  return runtime::call_workspace_bytes(*impl_, q, k, v, out, params, &lens);
}

}  // namespace sage2
