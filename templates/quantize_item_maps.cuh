// The thread mapping of each item kind of a one-launch quantize kernel (fused, cluster, one-pass
// K/V), from the preamble's SAGE2_QZ_{S,Q,K,V}_* values (kernels/family_quantize.cpp item_maps); a
// kernel without Q items (the one-pass K/V kernel) gets no Q values and MapQ = MapK.
#pragma once

#include "quantize_common.cuh"

namespace qz {

using MapS = Map<SAGE2_QZ_S_ROWS, SAGE2_QZ_S_TPR, SAGE2_QZ_S_CPT, SAGE2_QZ_S_CHUNKS>;
using MapK = Map<SAGE2_QZ_K_ROWS, SAGE2_QZ_K_TPR, SAGE2_QZ_K_CPT, SAGE2_QZ_K_CHUNKS>;
using MapV = Map<SAGE2_QZ_V_ROWS, SAGE2_QZ_V_TPR, SAGE2_QZ_V_CPT, SAGE2_QZ_V_CHUNKS>;
#ifdef SAGE2_QZ_Q_ROWS
using MapQ = Map<SAGE2_QZ_Q_ROWS, SAGE2_QZ_Q_TPR, SAGE2_QZ_Q_CPT, SAGE2_QZ_Q_CHUNKS>;
#else
using MapQ = MapK;
#endif

}  // namespace qz
