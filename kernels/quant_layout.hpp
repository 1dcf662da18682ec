// Per-thread quantization layout: which tokens share a scale.
//
// The rule (DESIGN.md): the tokens whose dot products land in one thread's accumulator fragment
// share a scale. The layout is therefore DERIVED from the attention kernel's TileConfig and the
// mma instruction it uses — never configured separately — and the quantize kernel receives it
// through the same KernelSpec, so producer and consumer cannot disagree.
//
// Accumulator fragments (PTX ISA, "Matrix Fragments for mma.m16n8k*" and "wgmma .m64nNk*"):
//  mma.sync m16n8k32 (.s8) and m16n8k64 (.s4), C/D fragment of a warp, lane l:
//     groupID = l >> 2, tid = l % 4
//     rows  groupID and groupID + 8            (of the 16-row tile)
//     cols  2*tid and 2*tid + 1                 (of the 8-col tile)
//  wgmma m64nNk32 (.s8), D fragment of a warpgroup, warp w (0..3) of the group, lane l:
//     rows  16*w + groupID and 16*w + groupID + 8
//     cols  8*j + 2*tid and 8*j + 2*tid + 1     (j = 0..N/8-1)
// Hence:
//  - keys: a thread always sees keys with (key % 8) / 2 == tid  → 4 K groups per KV block; the
//    wgmma family also splits them at 64-key boundaries (k_span), so that a K group holds 16 keys
//    at bk 128 as at bk 64 — a refinement (each thread reads one scale per 64-key half): with 32
//    keys per group the H100 suite saw an LSE error 0.13 vs fp64 (bound 0.1, GQA 4, hd 64);
//  - queries (mma.sync): each warp owns bq/warps consecutive rows; a thread sees the rows of its
//    warp with row % 8 == groupID → 8 Q groups per warp;
//  - queries (wgmma): each warpgroup owns bq/(warps/4) consecutive rows, cut in 64-row tiles;
//    warp w of the group sees rows 16*w + {groupID, groupID+8} of each tile → 8 per warp.
#pragma once

#include <vector>

#include "kernels/kernel_spec.hpp"

namespace sage2::kernels {

enum class MmaShape : int {
  M16N8K64_S4 = 0,    // mma.sync INT4 (Ada; emulated on Hopper)
  M16N8K32_S8 = 1,    // mma.sync INT8
  WGMMA_M64NK32_S8 = 2,  // wgmma INT8 (Hopper)
};
const char* mma_shape_name(MmaShape s) noexcept;

struct QuantLayout {
  MmaShape shape = MmaShape::M16N8K32_S8;
  int bq = 128, bk = 64, warps = 4;

  int q_groups_per_block() const;       // warps * 8
  // keys of one K group lie within one span of k_span() keys (bk for mma.sync, 64 for wgmma)
  int k_span() const { return shape == MmaShape::WGMMA_M64NK32_S8 && bk > 64 ? 64 : bk; }
  int k_groups_per_block() const { return 4 * (bk / k_span()); }
  int q_group(int row_in_block) const;  // 0 .. q_groups_per_block()-1
  int k_group(int key_in_block) const { return (key_in_block % 8) / 2 + 4 * (key_in_block / k_span()); }
  // The fragment owner of query row r / key c, as (warp, lane-group) — used by tests to check
  // groups against the PTX ISA tables written out independently.
  int q_warp(int row_in_block) const;

  // V̂ is stored transposed, [d_v][kv_len_pad]. The wgmma family stores the keys of each 16-key
  // group in the order in which a thread's S accumulator holds them (thread t of a quad: keys
  // 2t, 2t+1, 8+2t, 9+2t), which is the order the P̂·V̂ A fragment reads them (k = 4t..4t+3):
  // P̂ then leaves the QKᵀ accumulator with no register shuffles. The mma family keeps key order
  // for FP8 V̂ (its K rows are permuted instead: templates/attention_mma.cuh). FP16 V̂ (v_fp16,
  // the m16n8k16 B operand, k = 2t, 2t+1 and 8+2t, 9+2t per thread) stores in slot 2t + e the key
  // 4t + e and in slot 8 + 2t + e the key 4t + 2 + e (e = 0, 1): the keys a thread's P fragment
  // holds in the mma family's S accumulator order.
  bool v_fp16 = false;
  // V̂ feeds an fp16 accumulator (KernelSpec::pv_acc16): its scale bound is smaller
  // (kernels/quant_buffers.hpp); the slot order does not change.
  bool v_acc16 = false;
  bool v_permuted() const { return shape == MmaShape::WGMMA_M64NK32_S8 || v_fp16; }
  int v_slot(int key) const;         // stored column of `key` (padded length is a multiple of 16)
  int v_key_of_slot(int slot) const; // its inverse
};

// The layout the attention kernel described by `spec` (or the quantize kernel feeding it) uses.
// For a Quantize or DeltaS spec, the consumer family's mma is used. Both ask the family
// descriptor: defined in kernels/spec_rules.cpp.
MmaShape mma_shape_for(const KernelSpec& spec);
QuantLayout quant_layout(const KernelSpec& spec);

// Table of q_group for every row of a block (emitted verbatim into the generated device source:
// the device never re-derives the layout).
std::vector<int> q_group_table(const QuantLayout& l);

}  // namespace sage2::kernels
