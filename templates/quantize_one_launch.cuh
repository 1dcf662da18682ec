// What the kernels that run several item kinds in one launch share (quantize_fused.cuh,
// quantize_cluster.cuh, quantize_kv.cuh): every item body and the scratch of one item of any kind
// (FUSED_SMEM; the one-pass K/V kernel sizes its own, KV_SCRATCH). Needs the includer's MapS,
// MapQ, MapK, MapV.
#pragma once

#include "quantize_common.cuh"
#include "quantize_qk_body.cuh"
#include "quantize_v_body.cuh"

namespace qz {

// Scratch of one work item of any kind (the fused and cluster stages run every kind in one CTA).
constexpr int FUSED_SMEM =
    MaxOf<MaxOf<stats_smem_bytes<MapS>(), v_smem_bytes<MapV>()>::value,
          MaxOf<qk_smem_bytes<true, MapQ>(), qk_smem_bytes<false, MapK>()>::value>::value;

}  // namespace qz
