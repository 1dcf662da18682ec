// The sequence table of a variable-length call (include/sage2/sage2.hpp SeqLens), written on the
// device by the first CTA of sage2_channel_stats (templates/quantize_stats.cuh) from the caller's cu_seqlens / kv_lens and
// read by every later kernel of the call. Plain C++: included by device and host code.
//
// Layout of the quantize workspace in a varlen call (kernels/quant_buffers.hpp): every per-token and
// per-block buffer is laid out as ONE packed sequence per head, [H][blocks bound][...], where
// sequence s owns the blocks [q_blk, q_blk + ceil(q_len / bq)) (K/V likewise with bk). Blocks
// never straddle two sequences, so every quantization group, like every KV tile, belongs to one
// sequence; the per-(sequence, head) buffers (K/V statistics, K mean, V scale and mean, the
// first-bad flags) keep the dense [B][H] layout with B = sequences.
#pragma once

#include "types.cuh"

namespace sage2 {
namespace dev {

struct SeqEntry {
  i32 q_start, q_len;  // the sequence's first token in the Q/O rows of its batch entry, its length
  i32 k_start, k_len;  // the same for K and V
  i32 q_blk, k_blk;    // its first Q block / KV block in the packed buffers
  i32 pad0, pad1;
};
static_assert(sizeof(SeqEntry) == 32, "SeqEntry is 32 bytes (one load of two 16-byte vectors)");

// The block maps hold the sequence of each packed block, or kNoSeq for blocks past the last
// sequence's (the launch covers the bound, kernels::QuantBuffers::q_blocks / k_blocks).
constexpr i32 kNoSeq = -1;

}  // namespace dev
}  // namespace sage2
