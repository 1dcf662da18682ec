#include "jit/attention_shape.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "jit/wgmma_shape.hpp"

namespace sage2::jit {
namespace {

constexpr std::int64_t kMaxGridX = 2147483647;
constexpr std::int64_t kMaxGridYZ = 65535;

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

std::string s(std::int64_t v) { return std::to_string(v); }

// The buffers must have been laid out for this attention spec.
void check_match(const KernelSpec& spec, const QuantBuffers& b, const char* who) {
  std::string mismatch;
  if (spec.tile.bq != b.layout.bq || spec.tile.bk != b.layout.bk || spec.tile.warps != b.layout.warps)
    mismatch += " tile";
  if (spec.head_dim != b.p.head_dim) mismatch += " head_dim";
  if (spec.qk_bits != b.qk_bits) mismatch += " qk_bits";
  if (mma_shape_for(spec) != b.layout.shape) mismatch += " family";
  if (spec.smooth_q != b.smooth_q) mismatch += " smooth_q";
  if (spec.smooth_k != b.smooth_k) mismatch += " smooth_k";
  if (spec.smooth_v != b.smooth_v) mismatch += " smooth_v";
  if (!mismatch.empty())
    bad(std::string(who) + ": the spec (" + spec.key() + ") does not match the quantize buffers in:" + mismatch);
}

}  // namespace

AttentionKernelConfig attention_kernel_config(const KernelSpec& spec) {
  const KernelSpec& c = spec;
  AttentionKernelConfig k;
  const int rb = qk_row_bytes(c.head_dim, c.qk_bits);
  const int dv = v_dim_padded(c.head_dim);
  k.threads = dev::attn_threads(c.tile.warps);
  k.m_tiles = dev::attn_m_tiles(c.tile.bq, c.tile.warps);
  if (k.m_tiles < 1) return k;
  k.v_slices = dev::attn_v_slices(dv, k.m_tiles);
  k.v_slice = dev::attn_v_slice(dv, k.m_tiles);
  k.smem = static_cast<std::size_t>(
      dev::attn_smem_layout(c.tile.bq, c.tile.bk, c.tile.warps, rb, dv, c.tile.stages, c.smooth_q).total);
  return k;
}

void check_attention_config(const KernelSpec& spec, int max_smem_optin) {
  if (spec.family == KernelFamily::AttentionWgmma) return check_wgmma_config(spec, max_smem_optin);
  if (spec.family != KernelFamily::AttentionMma)
    bad(std::string("attention (mma family): spec family is ") + family_name(spec.family));
  spec.validate();
  const TileConfig& t = spec.tile;
  if (t.bk % 32 != 0)
    bad("attention (mma family): bk=" + s(t.bk) + " must be a multiple of 32 (k32 FP8 P·V chunks)");
  if (t.bq % (16 * t.warps) != 0)
    bad("attention (mma family): bq=" + s(t.bq) + " must be a multiple of 16*warps=" + s(16 * t.warps));
  if (t.stages < 1 || t.stages > 4) bad("attention (mma family): stages=" + s(t.stages) + " outside 1..4");
  const int mt = dev::attn_m_tiles(t.bq, t.warps);
  if (mt > 4)
    bad("attention (mma family): bq/warps=" + s(t.bq / t.warps) + " query rows per warp (at most 64)");
  const AttentionKernelConfig k = attention_kernel_config(spec);
  if (k.smem > static_cast<std::size_t>(max_smem_optin))
    throw Error(ErrorCode::Unsupported,
                "attention (mma family) tile bq=" + s(t.bq) + " bk=" + s(t.bk) + " warps=" + s(t.warps) +
                    " stages=" + s(t.stages) + " at head_dim=" + s(spec.head_dim) + " int" + s(spec.qk_bits) +
                    " needs " + s(static_cast<std::int64_t>(k.smem)) +
                    " bytes of shared memory per block; this device allows " + s(max_smem_optin) +
                    " (use fewer stages, a smaller bq or bk)");
}

TileConfig default_attention_tile(const KernelSpec& attention_spec, int max_smem_optin) {
  KernelSpec k = attention_spec;
  k.family = KernelFamily::AttentionMma;
  for (int bk : {64, 32}) {
    for (int stages = 2; stages >= 1; --stages) {
      k.tile = TileConfig{64, bk, 4, stages};
      if (attention_kernel_config(k).smem <= static_cast<std::size_t>(max_smem_optin)) return k.tile;
    }
  }
  throw Error(ErrorCode::Unsupported, "attention (mma family): no tile fits " + s(max_smem_optin) +
                                          " bytes of shared memory at head_dim=" + s(attention_spec.head_dim));
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
  const std::int64_t pairs = b.p.batch * b.p.q_heads;
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

LaunchShape attention_launch_shape(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& c) {
  check_match(spec, b, "attention_launch_shape");
  if (c.bh_count < 1 || c.bh_count > kMaxGridYZ || c.qb_count < 1 || c.qb_count > kMaxGridX ||
      c.bh_offset < 0 || c.bh_offset + c.bh_count > b.p.batch * b.p.q_heads || c.qb_offset < 0 ||
      c.qb_offset + c.qb_count > b.q_blocks)
    bad("attention_launch_shape: chunk pairs [" + s(c.bh_offset) + ", +" + s(c.bh_count) + ") blocks [" +
        s(c.qb_offset) + ", +" + s(c.qb_count) + ") outside the problem or the grid limits");
  const AttentionKernelConfig k = attention_kernel_config(spec);
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

dev::AttentionParams make_attention_params(const KernelSpec& spec, const QuantBuffers& b, const void* workspace,
                                           const TensorRef& out, float* lse, float sm_scale,
                                           const void* delta_s, const AttentionChunk& c) {
  check_match(spec, b, "attention params");
  if (!workspace) bad("attention params: workspace is null");
  if (!out.data) bad("attention params: out is null");
  if (out.dtype != spec.out_dtype)
    bad(std::string("attention params: out dtype ") + dtype_name(out.dtype) + " != spec out_dtype " +
        dtype_name(spec.out_dtype));
  if (out.stride_dim != 1) bad("attention params: out stride_dim=" + s(out.stride_dim) + " (must be 1)");
  if (out.batch != b.p.batch || out.heads != b.p.q_heads || out.seq != b.p.q_len || out.dim != b.p.head_dim)
    bad("attention params: out shape [" + s(out.batch) + "," + s(out.heads) + "," + s(out.seq) + "," + s(out.dim) +
        "] != expected [" + s(b.p.batch) + "," + s(b.p.q_heads) + "," + s(b.p.q_len) + "," + s(b.p.head_dim) + "]");
  if (b.p.kv_len >= (std::int64_t(1) << 31) - 1024 || b.p.q_len >= (std::int64_t(1) << 31) - 1024)
    bad("attention params: q_len=" + s(b.p.q_len) + " kv_len=" + s(b.p.kv_len) +
        " (the kernel indexes keys and rows with 32-bit offsets inside a head: < 2^31 - 1024)");
  if (spec.return_lse && !lse) bad("attention params: return_lse is set but lse is null");
  if (spec.smooth_q && !delta_s) bad("attention params: smooth_q is set but the ΔS workspace is null");
  if (!(std::isfinite(sm_scale) && sm_scale != 0.f))
    bad("attention params: sm_scale=" + std::to_string(sm_scale) + " must be finite and non-zero");
  const QuantBuffers::Offsets o = b.offsets();
  const auto* base = static_cast<const char*>(workspace);
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
  p.delta_s = spec.smooth_q ? static_cast<const float*>(delta_s) : nullptr;
  p.out = const_cast<void*>(out.data);
  p.o_stride_batch = out.stride_batch;
  p.o_stride_head = out.stride_head;
  p.o_stride_seq = out.stride_seq;
  p.lse = spec.return_lse ? lse : nullptr;
  p.batch = b.p.batch;
  p.q_heads = b.p.q_heads;
  p.kv_heads = b.p.kv_heads;
  p.q_len = b.p.q_len;
  p.kv_len = b.p.kv_len;
  p.bh_offset = c.bh_offset;
  p.bh_count = c.bh_count;
  p.qb_offset = c.qb_offset;
  p.qb_count = c.qb_count;
  p.sm_scale = sm_scale;
  p.c2 = sm_scale * 1.44269504088896340736f;  // fp32(sm_scale) · fp32(log2 e), as the contract says
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
  p.batch = b.p.batch;
  p.q_heads = b.p.q_heads;
  p.kv_heads = b.p.kv_heads;
  p.q_len = b.p.q_len;
  p.kv_len = b.p.kv_len;
  p.bh_offset = c.bh_offset;
  p.bh_count = c.bh_count;
  p.qb_offset = c.qb_offset;
  p.qb_count = c.qb_count;
  return p;
}

}  // namespace sage2::jit
