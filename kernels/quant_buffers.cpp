#include "kernels/quant_buffers.hpp"

#include <algorithm>


namespace sage2::kernels {

int quantize_stats_chunk(const KernelSpec& spec) {
  // About 64 KiB of fp16/bf16 input per chunk, 256 to 2048 tokens (256 from head dim 128): one CTA's
  // statistics of a chunk must stream long enough to outweigh its combine and arrival (256 tokens
  // at head dim 64 measured 2.3x the one-CTA-per-head walk at 8K on the H200, session 12 r2).
  // A power of two, from the spec alone, so the sum order never depends on the device or the batch.
  const int row_bytes = 2 * ((spec.head_dim + 7) / 8 * 8);
  int t = 256;
  while (t < 2048 && t * row_bytes < 64 * 1024) t *= 2;
  return t;
}

QuantBuffers quant_buffers(const QuantProblem& p, const KernelSpec& s) {
  QuantBuffers b;
  b.p = p;
  b.layout = quant_layout(s);
  b.quant() = s.quant();
  b.q_in_kernel = s.q_in_kernel;
  b.sampled_stats = s.sampled_stats;
  if (p.varlen) {
    b.q_blocks = (p.total_q + s.tile.bq - 1) / s.tile.bq + p.batch;
    b.k_blocks = (p.total_k + s.tile.bk - 1) / s.tile.bk + p.batch;
  } else {
    b.q_blocks = (p.q_len + s.tile.bq - 1) / s.tile.bq;
    b.k_blocks = (p.kv_len + s.tile.bk - 1) / s.tile.bk;
  }
  b.q_len_pad = b.q_blocks * s.tile.bq;
  b.kv_len_pad = b.k_blocks * s.tile.bk;
  b.d_qk = qk_dim_padded(p.head_dim, s.qk_bits);
  b.row_bytes = qk_row_bytes(p.head_dim, s.qk_bits);
  b.d_v = v_dim_padded(p.head_dim);
  b.stats_chunk = quantize_stats_chunk(s);
  // (sampled statistics over more than kSampleTiles units: one chunk of kSampleUnit keys per sampled unit)
  b.stats_chunks = stats_sampled(b) ? kSampleTiles : (p.kv_len + b.stats_chunk - 1) / b.stats_chunk;
  return b;
}

std::int64_t QuantBuffers::q_codes() const { return q_in_kernel ? 0 : token_batch() * p.q_heads * q_len_pad * row_bytes; }
std::int64_t QuantBuffers::q_scale() const {
  return q_in_kernel ? 0 : token_batch() * p.q_heads * q_blocks * layout.q_groups_per_block();
}
std::int64_t QuantBuffers::q_mean() const { return smooth_q ? token_batch() * p.q_heads * q_blocks * d_qk : 0; }
std::int64_t QuantBuffers::q_kbias() const { return smooth_k && !q_in_kernel ? token_batch() * p.q_heads * q_len_pad : 0; }
std::int64_t QuantBuffers::k_codes() const { return token_batch() * p.kv_heads * kv_len_pad * row_bytes; }
std::int64_t QuantBuffers::k_scale() const {
  return token_batch() * p.kv_heads * k_blocks * layout.k_groups_per_block();
}
std::int64_t QuantBuffers::k_mean() const { return p.batch * p.kv_heads * d_qk; }
std::int64_t QuantBuffers::k_stats() const { return p.batch * p.kv_heads * 3 * d_qk; }
std::int64_t QuantBuffers::v_codes() const {
  return token_batch() * p.kv_heads * d_v * kv_len_pad * v_code_bytes(layout.v_fp16);
}
std::int64_t QuantBuffers::v_scale() const { return p.batch * p.kv_heads * d_v; }
std::int64_t QuantBuffers::v_mean() const { return p.batch * p.kv_heads * d_v; }
std::int64_t QuantBuffers::v_stats() const { return p.batch * p.kv_heads * 3 * d_v; }
std::int64_t QuantBuffers::q_bad() const { return q_in_kernel ? 0 : token_batch() * p.q_heads * q_len_pad; }
std::int64_t QuantBuffers::k_first_bad() const { return p.batch * p.kv_heads; }
std::int64_t QuantBuffers::v_first_bad() const { return p.batch * p.kv_heads * d_v; }
// The fused stage's scratch: none for varlen calls (they run the split path).
std::int64_t QuantBuffers::stats_part() const {
  // Varlen: per (kv head, K|V) the slots of every sequence's chunks, sequence b from slot
  // b + (its first row) / T (templates/quantize_stats.cuh channel_stats): B + ceil(total_k / T) + 1.
  if (p.varlen) return p.kv_heads * 2 * (p.batch + (p.total_k + stats_chunk - 1) / stats_chunk + 1) * 4 * d_v;
  return p.batch * p.kv_heads * 2 * stats_chunks * 4 * d_v;
}
namespace {
// The sync words every stage has (work ticket, arrivals, ready flags); the sampled stage's overflow
// maxima follow them.
std::int64_t stage_sync_words(const QuantProblem& p) { return 1 + 4 * p.batch * p.kv_heads; }
}  // namespace
std::int64_t QuantBuffers::sync_words() const {
  return stage_sync_words(p) + (sampled_stats ? p.batch * p.kv_heads * d_v : 0);
}
std::int64_t QuantBuffers::v_amax() const { return sampled_stats ? p.batch * p.kv_heads * d_v : 0; }
std::int64_t QuantBuffers::seqs() const { return p.varlen ? p.batch * 8 : 0; }
std::int64_t QuantBuffers::q_map() const { return p.varlen ? q_blocks : 0; }
std::int64_t QuantBuffers::k_map() const { return p.varlen ? k_blocks : 0; }
std::int64_t QuantBuffers::mask_tiles() const { return p.mask ? p.mask_batch * p.mask_heads * q_blocks * k_blocks : 0; }
std::int64_t QuantBuffers::mask_bias() const { return p.mask >= 2 ? mask_tiles() : 0; }  // additive types only

QuantBuffers::Offsets QuantBuffers::offsets() const {
  Offsets o{};
  std::size_t at = 0;
  auto place = [&](std::int64_t count, std::size_t elem) {
    const std::size_t here = at;
    at += (static_cast<std::size_t>(count) * elem + 255) / 256 * 256;
    return here;
  };
  o.q_codes = place(q_codes(), 1);
  o.q_scale = place(q_scale(), 4);
  o.q_mean = place(q_mean(), 4);
  o.q_kbias = place(q_kbias(), 4);
  o.k_codes = place(k_codes(), 1);
  o.k_scale = place(k_scale(), 4);
  o.k_mean = place(k_mean(), 4);
  o.k_stats = place(k_stats(), 4);
  o.v_codes = place(v_codes(), 1);
  o.v_scale = place(v_scale(), 4);
  o.v_mean = place(v_mean(), 4);
  o.v_stats = place(v_stats(), 4);
  o.q_bad = place(q_bad(), 1);
  o.k_first_bad = place(k_first_bad(), 4);
  o.v_first_bad = place(v_first_bad(), 4);
  o.stats_part = place(stats_part(), 4);
  o.sync = place(sync_words(), 4);
  o.sync_bytes = static_cast<std::size_t>(sync_words()) * 4;
  o.seqs = place(seqs(), 4);
  o.q_map = place(q_map(), 4);
  o.k_map = place(k_map(), 4);
  o.mask_tiles = place(mask_tiles(), 1);
  o.mask_bias = place(mask_bias(), 4);
  o.v_amax = place(v_amax(), 4);
  o.v_over = o.sync + static_cast<std::size_t>(stage_sync_words(p)) * 4;
  o.total = at;
  return o;
}

bool stats_sampled(const QuantBuffers& b) {
  return b.sampled_stats && (b.p.kv_len + kSampleUnit - 1) / kSampleUnit > kSampleTiles;
}

bool stats_whole_head(const KernelSpec& s) {
  return s.family == KernelFamily::Quantize && s.op == QuantOp::ChannelStats && s.sampled_stats && !s.varlen;
}

namespace {
// (one 8-channel chunk per thread; from 2 chunks on the walk's row slots, at most 64, divide a unit)
bool stats_units_fit(const KernelSpec& s) {
  const int chunks = (s.head_dim + 7) / 8;
  return stats_whole_head(s) && chunks >= 2 && chunks <= 32;
}
}  // namespace

bool stats_units_at_once(const KernelSpec& s) { return stats_units_fit(s) && s.stats_at_once; }

int stats_units_groups(const KernelSpec& s) {
  if (!stats_units_fit(s)) return 0;
  return s.stats_at_once ? kSampleTiles : 1;
}

bool quantize_clears_sync(const std::vector<QuantOp>& ops, const KernelSpec& attention_spec, const QuantBuffers& b) {
  for (QuantOp op : ops) {
    if (op == QuantOp::Fused || op == QuantOp::QuantizeKV) return true;
    if (op == QuantOp::ChannelStats) {
      KernelSpec s = attention_spec;
      s.family = KernelFamily::Quantize;
      s.op = op;
      if (!(stats_whole_head(s) && (stats_sampled(b) || b.stats_chunks == 1))) return true;
    }
  }
  return false;
}

}  // namespace sage2::kernels
