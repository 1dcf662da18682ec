#include "kernels/attention_shape.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/params_fields.hpp"
#include "kernels/quant_layout.hpp"

namespace sage2::kernels {
namespace {

constexpr std::int64_t kMaxGridX = 2147483647;
constexpr std::int64_t kMaxGridYZ = 65535;

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

std::string s(std::int64_t v) { return std::to_string(v); }

}  // namespace

void check_buffers_match(const KernelSpec& spec, const QuantBuffers& b, const char* who) {
  std::string mismatch;
  if (spec.tile.bq != b.layout.bq || spec.tile.bk != b.layout.bk || spec.tile.warps != b.layout.warps)
    mismatch += " tile";
  if (spec.head_dim != b.p.head_dim) mismatch += " head_dim";
  if (spec.qk_bits != b.qk_bits) mismatch += " qk_bits";
  if (mma_shape_for(spec) != b.layout.shape) mismatch += " family";
  if (spec.smooth_q != b.smooth_q) mismatch += " smooth_q";
  if (spec.smooth_k != b.smooth_k) mismatch += " smooth_k";
  if (spec.smooth_v != b.smooth_v) mismatch += " smooth_v";
  if (spec.q_in_kernel != b.q_in_kernel) mismatch += " q_in_kernel";
  if (!mismatch.empty())
    bad(std::string(who) + ": the spec (" + spec.key() + ") does not match the quantize buffers in:" + mismatch);
}

void check_shared_memory(const KernelSpec& spec, std::size_t smem, int max_smem_optin, const char* who,
                         const char* remedy) {
  if (smem <= static_cast<std::size_t>(max_smem_optin)) return;
  const TileConfig& t = spec.tile;
  throw Error(ErrorCode::Unsupported, std::string(who) + "tile bq=" + s(t.bq) + " bk=" + s(t.bk) + " warps=" +
                                          s(t.warps) + " stages=" + s(t.stages) + " at head_dim=" + s(spec.head_dim) +
                                          " int" + s(spec.qk_bits) + " needs " + s(static_cast<std::int64_t>(smem)) +
                                          " bytes of shared memory per block; this device allows " +
                                          s(max_smem_optin) + " (" + remedy + ")");
}

KernelSpec delta_s_spec_for(const KernelSpec& attention) {
  KernelSpec d = attention;
  d.family = KernelFamily::DeltaS;
  d.op = QuantOp::None;
  d.consumer = attention.family;
  return d.canonical();
}

std::size_t delta_s_workspace_bytes(const QuantBuffers& b, std::size_t cap) {
  if (!b.smooth_q) return 0;
  const std::size_t row = static_cast<std::size_t>(b.kv_len_pad) * 4;
  const std::size_t per_pair = row * static_cast<std::size_t>(b.q_blocks);
  const std::size_t pairs = static_cast<std::size_t>(b.p.batch * b.p.q_heads);
  if (per_pair * pairs <= cap) return per_pair * pairs;
  if (per_pair <= cap) return cap / per_pair * per_pair;
  return std::max<std::size_t>(1, cap / row) * row;
}

std::vector<AttentionChunk> attention_chunks(const QuantBuffers& b, std::size_t delta_s_bytes) {
  // Varlen: one launch, y = q heads, x = the packed query blocks (no smooth-Q, so no ΔS).
  const std::int64_t pairs = b.token_batch() * b.p.q_heads;
  std::int64_t pairs_per = kMaxGridYZ, qb_per = b.q_blocks;
  if (b.smooth_q) {
    const std::size_t row = static_cast<std::size_t>(b.kv_len_pad) * 4;
    const std::int64_t rows = static_cast<std::int64_t>(delta_s_bytes / row);
    if (rows < 1)
      bad("attention: the ΔS workspace of " + s(static_cast<std::int64_t>(delta_s_bytes)) +
          " bytes cannot hold one query block's row (" + s(static_cast<std::int64_t>(row)) +
          " bytes); size it with delta_s_workspace_bytes()");
    if (rows >= b.q_blocks) {
      pairs_per = std::min<std::int64_t>(kMaxGridYZ, rows / b.q_blocks);
    } else {
      pairs_per = 1;
      qb_per = rows;
    }
  }
  qb_per = std::min<std::int64_t>(qb_per, kMaxGridX);
  std::vector<AttentionChunk> chunks;
  for (std::int64_t p0 = 0; p0 < pairs; p0 += pairs_per) {
    for (std::int64_t q0 = 0; q0 < b.q_blocks; q0 += qb_per) {
      AttentionChunk c;
      c.bh_offset = p0;
      c.bh_count = std::min(pairs_per, pairs - p0);
      c.qb_offset = q0;
      c.qb_count = std::min(qb_per, b.q_blocks - q0);
      chunks.push_back(c);
    }
  }
  return chunks;
}

LaunchShape chunk_launch_shape(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& c,
                               const AttentionKernelConfig& k) {
  check_buffers_match(spec, b, "attention_launch_shape");
  if (c.bh_count < 1 || c.bh_count > kMaxGridYZ || c.qb_count < 1 || c.qb_count > kMaxGridX ||
      c.bh_offset < 0 || c.bh_offset + c.bh_count > b.token_batch() * b.p.q_heads || c.qb_offset < 0 ||
      c.qb_offset + c.qb_count > b.q_blocks)
    bad("attention_launch_shape: chunk pairs [" + s(c.bh_offset) + ", +" + s(c.bh_count) + ") blocks [" +
        s(c.qb_offset) + ", +" + s(c.qb_count) + ") outside the problem or the grid limits");
  LaunchShape ls;
  ls.grid[0] = static_cast<unsigned>(c.qb_count);
  ls.grid[1] = static_cast<unsigned>(c.bh_count);
  ls.grid[2] = 1;
  ls.block[0] = static_cast<unsigned>(k.threads);
  ls.dynamic_smem = k.smem;
  return ls;
}

LaunchShape delta_s_launch_shape(const KernelSpec& ds, const QuantBuffers& b, const AttentionChunk& c) {
  if (ds.family != KernelFamily::DeltaS)
    bad(std::string("delta_s_launch_shape: spec family is ") + family_name(ds.family));
  if (ds.tile.bq != b.layout.bq || ds.tile.bk != b.layout.bk || ds.head_dim != b.p.head_dim)
    bad("delta_s_launch_shape: the spec (" + ds.key() + ") does not match the quantize buffers (tile/head_dim)");
  if (!b.smooth_q) bad("delta_s_launch_shape: the buffers have no smooth-Q (no ΔS)");
  if (c.bh_count < 1 || c.bh_count > kMaxGridYZ || c.qb_count < 1)
    bad("delta_s_launch_shape: chunk of " + s(c.bh_count) + " pairs × " + s(c.qb_count) + " blocks");
  const std::int64_t key_tiles = (b.kv_len_pad + dev::ds_keys() - 1) / dev::ds_keys();
  const std::int64_t qb_tiles = (c.qb_count + dev::ds_qblocks() - 1) / dev::ds_qblocks();
  if (key_tiles > kMaxGridX || qb_tiles > kMaxGridYZ)
    bad("delta_s_launch_shape: " + s(key_tiles) + " key tiles × " + s(qb_tiles) + " block tiles exceed the grid");
  LaunchShape ls;
  ls.grid[0] = static_cast<unsigned>(key_tiles);
  ls.grid[1] = static_cast<unsigned>(qb_tiles);
  ls.grid[2] = static_cast<unsigned>(c.bh_count);
  ls.block[0] = static_cast<unsigned>(dev::ds_threads());
  ls.dynamic_smem = 0;
  return ls;
}

std::int64_t causal_band_pairs(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& c) {
  if (spec.family != KernelFamily::AttentionWgmma || spec.causal == CausalMode::None || spec.varlen || spec.mask ||
      c.bh_count < 1 || c.qb_count < 1 ||
      c.bh_count * c.qb_count >= (std::int64_t(1) << 31))
    return 0;
  const std::int64_t group = b.p.q_heads / std::max<std::int64_t>(1, b.p.kv_heads);
  const std::int64_t kv_head_bytes = b.kv_len_pad * (b.row_bytes + b.d_v * v_code_bytes(spec.pv_fp16));
  const std::int64_t kv_heads = std::max<std::int64_t>(1, kCausalBandBytes / std::max<std::int64_t>(1, kv_head_bytes));
  return std::min(c.bh_count, kv_heads * group);
}

dev::AttentionParams make_attention_params(const KernelSpec& spec, const QuantBuffers& b, const AttentionArgs& args,
                                           const AttentionChunk& c) {
  check_buffers_match(spec, b, "attention params");
  const TensorRef& out = args.out;
  const float sm_scale = args.sm_scale;
  if (!args.workspace) bad("attention params: workspace is null");
  if (!out.data) bad("attention params: out is null");
  if (out.dtype != spec.out_dtype)
    bad(std::string("attention params: out dtype ") + dtype_name(out.dtype) + " != spec out_dtype " +
        dtype_name(spec.out_dtype));
  if (out.stride_dim != 1) bad("attention params: out stride_dim=" + s(out.stride_dim) + " (must be 1)");
  if (spec.varlen != b.p.varlen) bad("attention params: spec varlen=" + s(spec.varlen) + " but the buffers' is " + s(b.p.varlen));
  const bool packed = b.p.varlen && b.p.packed;  // out is a batch-1 view of the packed rows
  const std::int64_t out_batch = packed ? 1 : b.p.batch, out_rows = packed ? b.p.total_q : b.p.q_len;
  if (out.batch != out_batch || out.heads != b.p.q_heads || out.seq != out_rows || out.dim != b.p.head_dim)
    bad("attention params: out shape [" + s(out.batch) + "," + s(out.heads) + "," + s(out.seq) + "," + s(out.dim) +
        "] != expected [" + s(out_batch) + "," + s(b.p.q_heads) + "," + s(out_rows) + "," + s(b.p.head_dim) + "]");
  if (b.p.varlen && (b.p.total_q >= (std::int64_t(1) << 31) - 1024 || b.p.total_k >= (std::int64_t(1) << 31) - 1024 ||
                     b.q_blocks * b.layout.bq >= (std::int64_t(1) << 31) || b.k_blocks * b.layout.bk >= (std::int64_t(1) << 31)))
    bad("attention params: varlen totals q=" + s(b.p.total_q) + " k=" + s(b.p.total_k) +
        " (token offsets and packed rows are 32-bit: < 2^31 - 1024)");
  if (b.p.kv_len >= (std::int64_t(1) << 31) - 1024 || b.p.q_len >= (std::int64_t(1) << 31) - 1024)
    bad("attention params: q_len=" + s(b.p.q_len) + " kv_len=" + s(b.p.kv_len) +
        " (the kernel indexes keys and rows with 32-bit offsets inside a head: < 2^31 - 1024)");
  // the block coordinates divide (batch·q head) pair indices in 31 bits (dev::DivU31)
  if (b.p.batch * b.p.q_heads >= (std::int64_t(1) << 31) || b.p.kv_heads < 1 || b.p.q_heads % b.p.kv_heads != 0)
    bad("attention params: batch=" + s(b.p.batch) + " q_heads=" + s(b.p.q_heads) + " kv_heads=" + s(b.p.kv_heads) +
        " (batch·q_heads must be < 2^31, q_heads a multiple of kv_heads)");
  if (spec.return_lse && !args.lse) bad("attention params: return_lse is set but lse is null");
  if (spec.smooth_q && !args.delta_s) bad("attention params: smooth_q is set but the ΔS workspace is null");
  if (!(std::isfinite(sm_scale) && sm_scale != 0.f))
    bad("attention params: sm_scale=" + std::to_string(sm_scale) + " must be finite and non-zero");
  const QuantBuffers::Offsets o = b.offsets();
  const auto* base = static_cast<const char*>(args.workspace);
  dev::AttentionParams p{};
  p.q_codes = reinterpret_cast<const dev::i8*>(base + o.q_codes);
  p.q_scale = reinterpret_cast<const float*>(base + o.q_scale);
  p.q_kbias = b.q_kbias() ? reinterpret_cast<const float*>(base + o.q_kbias) : nullptr;
  p.k_codes = reinterpret_cast<const dev::i8*>(base + o.k_codes);
  p.k_scale = reinterpret_cast<const float*>(base + o.k_scale);
  p.v_codes = reinterpret_cast<const dev::u8*>(base + o.v_codes);
  p.v_scale = reinterpret_cast<const float*>(base + o.v_scale);
  p.v_mean = reinterpret_cast<const float*>(base + o.v_mean);
  p.q_bad = reinterpret_cast<const dev::u8*>(base + o.q_bad);
  p.k_first_bad = reinterpret_cast<const dev::i32*>(base + o.k_first_bad);
  p.v_first_bad = reinterpret_cast<const dev::i32*>(base + o.v_first_bad);
  p.delta_s = spec.smooth_q ? static_cast<const float*>(args.delta_s) : nullptr;
  set_output(out, p);
  p.lse = spec.return_lse ? args.lse : nullptr;
  b.p.copy_sizes_to(p);
  p.q_heads_div = dev::div_u31_of(static_cast<dev::u32>(b.p.q_heads));
  p.group_div = dev::div_u31_of(static_cast<dev::u32>(b.p.q_heads / b.p.kv_heads));
  p.bh_offset = c.bh_offset;
  p.bh_count = c.bh_count;
  p.qb_offset = c.qb_offset;
  p.qb_count = c.qb_count;
  p.band_pairs = static_cast<dev::u32>(causal_band_pairs(spec, b, c));
  p.sm_scale = sm_scale;
  p.c2 = sm_scale * 1.44269504088896340736f;  // fp32(sm_scale) · fp32(log2 e), as the contract says
  if (spec.mask != b.p.mask || (spec.mask && (static_cast<int>(args.mask.type) != spec.mask || !args.mask.data)))
    bad("attention params: spec mask=" + s(spec.mask) + ", buffers' " + s(b.p.mask) + ", the call's mask type " +
        s(static_cast<int>(args.mask.type)) + (args.mask.data ? "" : " (null data)"));
  if (spec.mask) {
    set_mask(args.mask, p);
    p.mask_tiles = reinterpret_cast<const dev::u8*>(base + o.mask_tiles);
    p.mask_bias = b.mask_bias() ? reinterpret_cast<const float*>(base + o.mask_bias) : nullptr;
    const std::int64_t table = b.q_blocks * b.k_blocks;
    p.mask_tiles_stride_head = b.p.mask_heads > 1 ? table : 0;
    p.mask_tiles_stride_batch = b.p.mask_batch > 1 ? b.p.mask_heads * table : 0;
  }
  if (spec.q_in_kernel) {
    const TensorRef& q = args.q;
    const std::int64_t q_batch = packed ? 1 : b.p.batch, q_rows = packed ? b.p.total_q : b.p.q_len;
    if (!q.data) bad("attention params: q_in_kernel is set but q is null");
    if (q.dtype != spec.in_dtype)
      bad(std::string("attention params: q dtype ") + dtype_name(q.dtype) + " != spec in_dtype " + dtype_name(spec.in_dtype));
    if (q.stride_dim != 1) bad("attention params: q stride_dim=" + s(q.stride_dim) + " (must be 1)");
    if (q.batch != q_batch || q.heads != b.p.q_heads || q.seq != q_rows || q.dim != b.p.head_dim)
      bad("attention params: q shape [" + s(q.batch) + "," + s(q.heads) + "," + s(q.seq) + "," + s(q.dim) +
          "] != expected [" + s(q_batch) + "," + s(b.p.q_heads) + "," + s(q_rows) + "," + s(b.p.head_dim) + "]");
    p.q_in = q.data;
    p.q_stride_batch = packed ? 0 : q.stride_batch;  // every sequence's rows are in batch entry 0
    p.q_stride_head = q.stride_head;
    p.q_stride_seq = q.stride_seq;
    p.k_mean = reinterpret_cast<const float*>(base + o.k_mean);
  }
  if (b.p.varlen) {
    p.seqs = reinterpret_cast<const dev::SeqEntry*>(base + o.seqs);
    p.q_map = reinterpret_cast<const dev::i32*>(base + o.q_map);
    p.q_map_len = b.q_blocks;
    p.k_map_len = b.k_blocks;
    if (packed) {
      p.o_stride_batch = 0;                // every sequence's rows are in batch entry 0
      p.lse_stride_batch = 0;              // LSE [Hq][total_q]
      p.lse_stride_head = b.p.total_q;
    } else {
      p.lse_stride_batch = b.p.q_heads * b.p.q_len;  // LSE [B][Hq][Nq]
      p.lse_stride_head = b.p.q_len;
    }
  }
  return p;
}

dev::DeltaSParams make_delta_s_params(const QuantBuffers& b, const void* workspace, const TensorRef& k,
                                      void* delta_s, const AttentionChunk& c) {
  if (!b.smooth_q) bad("delta_s params: the buffers have no smooth-Q");
  if (!workspace || !delta_s || !k.data) bad("delta_s params: null workspace, ΔS workspace or k");
  if (k.dtype != DType::F16 && k.dtype != DType::BF16) bad(std::string("delta_s params: k dtype ") + dtype_name(k.dtype));
  if (k.stride_dim != 1) bad("delta_s params: k stride_dim=" + s(k.stride_dim) + " (must be 1)");
  if (k.batch != b.p.batch || k.heads != b.p.kv_heads || k.seq != b.p.kv_len || k.dim != b.p.head_dim)
    bad("delta_s params: k shape [" + s(k.batch) + "," + s(k.heads) + "," + s(k.seq) + "," + s(k.dim) +
        "] != expected [" + s(b.p.batch) + "," + s(b.p.kv_heads) + "," + s(b.p.kv_len) + "," + s(b.p.head_dim) + "]");
  const QuantBuffers::Offsets o = b.offsets();
  const auto* base = static_cast<const char*>(workspace);
  dev::DeltaSParams p{};
  p.k = k.data;
  p.k_stride_batch = k.stride_batch;
  p.k_stride_head = k.stride_head;
  p.k_stride_seq = k.stride_seq;
  p.q_mean = reinterpret_cast<const float*>(base + o.q_mean);
  p.k_mean = reinterpret_cast<const float*>(base + o.k_mean);
  p.delta_s = static_cast<float*>(delta_s);
  p.d_qk = b.d_qk;
  b.p.copy_sizes_to(p);
  p.bh_offset = c.bh_offset;
  p.bh_count = c.bh_count;
  p.qb_offset = c.qb_offset;
  p.qb_count = c.qb_count;
  return p;
}

}  // namespace sage2::kernels
