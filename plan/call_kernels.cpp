#include "plan/call_kernels.hpp"

#include <algorithm>

#include "kernels/attention_family.hpp"
#include "kernels/attention_shape.hpp"
#include "kernels/quantize_shape.hpp"
#include "plan/attention_spec.hpp"
#include "plan/planner.hpp"

namespace sage2::plan {

namespace {
// The split path's kernels. With sampled statistics V comes before K: quantize_k's block 0 of each
// head then fixes the V channels quantize_v found above the headroom (templates/quantize_qk.cuh),
// ordered after every V tile by the stream.
std::vector<kernels::QuantOp> split_ops(const kernels::KernelSpec& attention_spec, bool with_q) {
  using kernels::QuantOp;
  std::vector<QuantOp> ops{QuantOp::ChannelStats, QuantOp::QuantizeK, QuantOp::QuantizeV};
  if (attention_spec.sampled_stats) std::swap(ops[1], ops[2]);
  if (with_q) ops.push_back(QuantOp::QuantizeQ);
  return ops;
}
}  // namespace

std::vector<kernels::QuantOp> quantize_ops(QuantPath path, const kernels::KernelSpec& attention_spec) {
  using kernels::QuantOp;
  const bool cluster_ok = kernels::cluster_quantize_supported(attention_spec);
  // Auto is split: the fused and cluster stages measured slower on the H100 (bench/NOTES.md,
  // "Cluster quantize stage"), and so did the one-pass K/V kernel on the H200 (Flux 90 us against
  // split's 76: bench/NOTES.md, session 14).
  if (path == QuantPath::Auto) path = QuantPath::Split;
  if (path == QuantPath::OnePass && attention_spec.varlen)
    throw Error(ErrorCode::Unsupported,
                "quantize path onepass (ContextOptions::quant_path or SAGE2_QUANT_PATH) runs dense calls; this call is "
                "varlen (use auto or split)");
  if (path == QuantPath::OnePass) {
    // K and V in one launch; Q by the attention kernel, else by quantize_q after it (q·k̄ reads k_stats).
    std::vector<QuantOp> ops{QuantOp::QuantizeKV};
    if (!attention_spec.q_in_kernel) ops.push_back(QuantOp::QuantizeQ);
    if (attention_spec.mask) ops.insert(ops.begin(), QuantOp::MaskTiles);
    return ops;
  }
  if (attention_spec.q_in_kernel) {
    // The attention kernel quantizes Q: the split path without quantize_q (the one-launch stages
    // write Q̂ buffers such a plan does not have).
    if (path != QuantPath::Split)
      throw Error(ErrorCode::InvalidArgument, std::string("quantize path ") + quant_path_name(path) +
                                                  " with an attention spec that quantizes Q itself (" +
                                                  attention_spec.key() + ")");
    std::vector<QuantOp> ops = split_ops(attention_spec, false);
    if (attention_spec.mask) ops.insert(ops.begin(), QuantOp::MaskTiles);
    return ops;
  }
  if (attention_spec.varlen) {
    // Varlen: the split kernels over packed blocks, channel_stats's first CTA building the table of
    // the caller's lengths (the one-launch stages schedule uniform (batch, kv head) groups).
    if (path != QuantPath::Split)
      throw Error(ErrorCode::Unsupported, std::string("quantize path ") + quant_path_name(path) +
                                              " (ContextOptions::quant_path or SAGE2_QUANT_PATH) does not run varlen "
                                              "calls; use auto or split");
    return split_ops(attention_spec, true);
  }
  if (path == QuantPath::Cluster && !cluster_ok)
    throw Error(ErrorCode::Unsupported,
                "quantize path cluster (ContextOptions::quant_path or SAGE2_QUANT_PATH) runs on sm_90a up to head dim " +
                    std::to_string(kernels::kClusterMaxHeadDim) + "; this call has head_dim=" +
                    std::to_string(attention_spec.head_dim) + " on " + kernels::arch_name(attention_spec.arch) +
                    " (use auto or split)");
  if (attention_spec.mask) {
    // The mask's tile classes first (read by the attention kernel only), then the path's kernels.
    kernels::KernelSpec unmasked = attention_spec;
    unmasked.mask = 0;
    std::vector<QuantOp> ops = quantize_ops(path, unmasked);
    ops.insert(ops.begin(), QuantOp::MaskTiles);
    return ops;
  }
  switch (path) {
    case QuantPath::Split:
      return split_ops(attention_spec, true);
    case QuantPath::Fused: return {QuantOp::Fused};
    case QuantPath::Cluster: return {QuantOp::Cluster};
    case QuantPath::OnePass:
    case QuantPath::Auto: break;
  }
  throw Error(ErrorCode::Internal, std::string("quantize stage: path ") + quant_path_name(path));
}

kernels::KernelSpec attention_call_spec(const AttentionProblem& p, const CallSettings& s,
                                        const kernels::TileConfig& tile) {
  kernels::KernelSpec a = attention_spec_for(p, s.arch, s.family);
  a.tile = tile;
  a.ptx = s.ptx;
  apply_quant_path(a, s.quant_path);
  return a;
}

kernels::KernelSpec planned_attention_spec(const AttentionProblem& p, const CallSettings& s) {
  kernels::KernelSpec a = attention_spec_for(p, s.arch, s.family);
  const kernels::TileConfig tile =
      s.planner ? s.planner->choose(a, p).tile : heuristic_tile(a, s.device.max_smem_optin);
  return attention_call_spec(p, s, tile);
}

std::vector<kernels::KernelSpec> QuantizedCallKernels::all() const {
  std::vector<kernels::KernelSpec> v = quantize;
  v.push_back(attention);
  if (delta_s) v.push_back(*delta_s);
  return v;
}

std::vector<kernels::KernelSpec> QuantizedCallKernels::with_alternatives() const {
  std::vector<kernels::KernelSpec> v = all();
  if (stats_at_once) v.push_back(*stats_at_once);
  return v;
}

void QuantizedCallKernels::choose_stats_form(const kernels::QuantBuffers& b, int sm_count) {
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i] == kernels::QuantOp::ChannelStats) quantize[i] = kernels::stats_spec_for(attention, b, sm_count);
}

QuantizedCallKernels quantized_call_kernels(const kernels::KernelSpec& a, QuantPath path) {
  QuantizedCallKernels k;
  k.ops = quantize_ops(path, a);
  for (kernels::QuantOp op : k.ops) k.quantize.push_back(kernels::quantize_spec_for(a, op));
  if (std::find(k.ops.begin(), k.ops.end(), kernels::QuantOp::ChannelStats) != k.ops.end())
    k.stats_at_once = kernels::stats_at_once_spec(a);
  k.attention = a;
  if (a.smooth_q) k.delta_s = kernels::delta_s_spec_for(a);
  return k;
}

std::vector<kernels::KernelSpec> direct_call_kernels(const kernels::DirectLayout& l) {
  std::vector<kernels::KernelSpec> v{l.split_spec};
  if (l.merge()) v.push_back(l.merge_spec);
  return v;
}

std::vector<kernels::KernelSpec> companion_specs(const kernels::KernelSpec& attention_spec, QuantPath path) {
  std::vector<kernels::KernelSpec> v = quantized_call_kernels(attention_spec, path).with_alternatives();
  v.erase(std::remove(v.begin(), v.end(), attention_spec), v.end());
  return v;
}

std::vector<kernels::KernelSpec> call_kernel_specs(const AttentionProblem& p, const CallSettings& s) {
  std::vector<kernels::KernelSpec> v;
  if (p.direct) {
    v = direct_call_kernels(kernels::direct_layout(p.direct_problem(), s.arch, s.device));
  } else {
    const kernels::KernelSpec a = planned_attention_spec(p, s);
    QuantizedCallKernels k = quantized_call_kernels(a, s.quant_path);
    k.choose_stats_form(kernels::quant_buffers(p.quant_problem(), a), s.device.sm_count);
    v = k.all();
  }
  for (auto& k : v) k.ptx = s.ptx;  // the loader's code form (KernelLoader::get overrides it too)
  return v;
}

}  // namespace sage2::plan
