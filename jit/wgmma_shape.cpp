#include "jit/wgmma_shape.hpp"

#include <string>

namespace sage2::jit {
namespace {

constexpr std::int64_t kMaxGridX = 2147483647;
constexpr std::int64_t kMaxGridYZ = 65535;

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }
std::string s(std::int64_t v) { return std::to_string(v); }

}  // namespace

WgmmaKernelConfig wgmma_kernel_config(const KernelSpec& spec) {
  WgmmaKernelConfig k;
  const int rb = qk_row_bytes(spec.head_dim, 8);
  const int dv = v_dim_padded(spec.head_dim);
  k.threads = dev::wg_threads(spec.tile.warps);
  k.consumer_groups = dev::wg_consumer_groups(spec.tile.warps);
  k.producer_group = dev::wg_producer_wg(spec.tile.warps);
  k.min_ctas = dev::wg_min_ctas(spec.tile.warps, dv, spec.tile.stages, spec.smooth_q);
  k.pipelined = dev::wg_pipelined(dv, spec.tile.stages, spec.tile.warps, spec.smooth_q);
  k.panel = dev::wg_panel(rb);
  k.pv_chunks = dev::wg_pv_chunks(dv);
  k.pv_n = dev::wg_pv_n(dv);
  k.smem = static_cast<std::size_t>(
      dev::wg_smem_layout(spec.tile.bq, spec.tile.bk, rb, dv, spec.tile.stages, spec.smooth_q, spec.tile.warps).total);
  k.q_in_smem = dev::wg_q_in_smem(rb, dv, spec.tile.stages, spec.tile.warps, spec.smooth_q);
  return k;
}

void check_wgmma_config(const KernelSpec& spec, int max_smem_optin) {
  const std::string who = "attention (wgmma family): ";
  if (spec.family != KernelFamily::AttentionWgmma) bad(who + "spec family is " + family_name(spec.family));
  spec.validate();  // sm_90a, 8-bit, whole warpgroups
  const TileConfig& t = spec.tile;
  if (t.warps != 4 && t.warps != 8) bad(who + "warps=" + s(t.warps) + " (1 or 2 consumer warpgroups: 4 or 8)");
  if (t.bq != 16 * t.warps)
    bad(who + "bq=" + s(t.bq) + " must be 16*warps=" + s(16 * t.warps) + " (one 64-row tile per warpgroup)");
  if (t.bk != 64 && t.bk != 128) bad(who + "bk=" + s(t.bk) + " (must be 64 or 128)");
  if (t.stages < 1 || t.stages > 4) bad(who + "stages=" + s(t.stages) + " outside 1..4");
  if (spec.head_dim > 256)
    throw Error(ErrorCode::Unsupported, who + "head_dim=" + s(spec.head_dim) +
                                            " > 256 (the fp32 O of a 64-row tile does not fit the registers; "
                                            "use the mma family)");
  const WgmmaKernelConfig k = wgmma_kernel_config(spec);
  if (k.smem > static_cast<std::size_t>(max_smem_optin))
    throw Error(ErrorCode::Unsupported, who + "tile bq=" + s(t.bq) + " bk=" + s(t.bk) + " warps=" + s(t.warps) +
                                            " stages=" + s(t.stages) + " at head_dim=" + s(spec.head_dim) + " needs " +
                                            s(static_cast<std::int64_t>(k.smem)) +
                                            " bytes of shared memory per block; this device allows " +
                                            s(max_smem_optin) + " (use fewer stages or bk 64)");
}

TileConfig default_wgmma_tile(const KernelSpec& attention_spec, int max_smem_optin) {
  if (attention_spec.head_dim > 256)
    throw Error(ErrorCode::Unsupported,
                "attention (wgmma family): head_dim=" + s(attention_spec.head_dim) + " > 256; use the mma family");
  KernelSpec k = attention_spec;
  k.family = KernelFamily::AttentionWgmma;
  // One warpgroup per CTA (several CTAs per SM), serial loop with 2 stages; bk 128 up to head
  // dim 128, 64 above (the stages of two CTAs per SM fit). Then the stages, then bk, lowered until
  // the shared memory fits `max_smem_optin`.
  const int bk0 = attention_spec.head_dim <= 128 ? 128 : 64;
  for (int bk : {bk0, 64}) {
    for (int stages = 2; stages >= 1; --stages) {
      k.tile = TileConfig{64, bk, 4, stages};
      if (wgmma_kernel_config(k).smem <= static_cast<std::size_t>(max_smem_optin)) return k.tile;
    }
  }
  throw Error(ErrorCode::Unsupported, "attention (wgmma family): no tile fits " + s(max_smem_optin) +
                                          " bytes of shared memory at head_dim=" + s(attention_spec.head_dim));
}

namespace {
void check_match(const KernelSpec& spec, const QuantBuffers& b, const char* who) {
  std::string mismatch;
  if (spec.tile.bq != b.layout.bq || spec.tile.bk != b.layout.bk || spec.tile.warps != b.layout.warps)
    mismatch += " tile";
  if (spec.head_dim != b.p.head_dim) mismatch += " head_dim";
  if (spec.qk_bits != b.qk_bits) mismatch += " qk_bits";
  if (b.layout.shape != MmaShape::WGMMA_M64NK32_S8) mismatch += " family";
  if (spec.smooth_q != b.smooth_q) mismatch += " smooth_q";
  if (spec.smooth_k != b.smooth_k) mismatch += " smooth_k";
  if (spec.smooth_v != b.smooth_v) mismatch += " smooth_v";
  if (!mismatch.empty())
    bad(std::string(who) + ": the spec (" + spec.key() + ") does not match the quantize buffers in:" + mismatch);
}
}  // namespace

LaunchShape wgmma_launch_shape(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& c) {
  check_match(spec, b, "wgmma_launch_shape");
  if (c.bh_count < 1 || c.bh_count > kMaxGridYZ || c.qb_count < 1 || c.qb_count > kMaxGridX || c.bh_offset < 0 ||
      c.bh_offset + c.bh_count > b.p.batch * b.p.q_heads || c.qb_offset < 0 || c.qb_offset + c.qb_count > b.q_blocks)
    bad("wgmma_launch_shape: chunk pairs [" + s(c.bh_offset) + ", +" + s(c.bh_count) + ") blocks [" + s(c.qb_offset) +
        ", +" + s(c.qb_count) + ") outside the problem or the grid limits");
  const WgmmaKernelConfig k = wgmma_kernel_config(spec);
  LaunchShape ls;
  ls.grid[0] = static_cast<unsigned>(c.qb_count);
  ls.grid[1] = static_cast<unsigned>(c.bh_count);
  ls.grid[2] = 1;
  ls.block[0] = static_cast<unsigned>(k.threads);
  ls.dynamic_smem = k.smem;
  return ls;
}

WgmmaTmaSpecs wgmma_tma_specs(const KernelSpec& spec, const QuantBuffers& b, const void* workspace) {
  check_match(spec, b, "wgmma tensor maps");
  if (!workspace) bad("wgmma tensor maps: workspace is null");
  if ((reinterpret_cast<std::uintptr_t>(workspace) & 255u) != 0)
    bad("wgmma tensor maps: the workspace must be 256-byte aligned");
  const QuantBuffers::Offsets o = b.offsets();
  const auto* base = static_cast<const char*>(workspace);
  const std::int64_t q_rows = b.p.batch * b.p.q_heads * b.q_len_pad;
  const std::int64_t k_rows = b.p.batch * b.p.kv_heads * b.kv_len_pad;
  const std::int64_t v_rows = b.p.batch * b.p.kv_heads * b.d_v;
  // TMA coordinates are int32: the row of the last tile must fit.
  if (q_rows >= (std::int64_t(1) << 31) || k_rows >= (std::int64_t(1) << 31) || v_rows >= (std::int64_t(1) << 31) || b.kv_len_pad >= (std::int64_t(1) << 31))
    bad("wgmma tensor maps: " + s(k_rows) + " K rows / " + s(v_rows) + " V rows exceed the 2^31 TMA coordinate range");
  WgmmaTmaSpecs t;
  t.q.base = base + o.q_codes;
  t.q.dims[0] = static_cast<std::uint64_t>(b.row_bytes);
  t.q.dims[1] = static_cast<std::uint64_t>(q_rows);
  t.q.row_stride = static_cast<std::uint64_t>(b.row_bytes);
  t.q.swizzle_bytes = dev::wg_panel(b.row_bytes);
  t.q.box[0] = static_cast<std::uint32_t>(t.q.swizzle_bytes);
  t.q.box[1] = 64;
  t.k.base = base + o.k_codes;
  t.k.dims[0] = static_cast<std::uint64_t>(b.row_bytes);
  t.k.dims[1] = static_cast<std::uint64_t>(k_rows);
  t.k.row_stride = static_cast<std::uint64_t>(b.row_bytes);
  t.k.swizzle_bytes = dev::wg_panel(b.row_bytes);
  t.k.box[0] = static_cast<std::uint32_t>(t.k.swizzle_bytes);
  t.k.box[1] = static_cast<std::uint32_t>(spec.tile.bk);
  t.v.base = base + o.v_codes;
  t.v.dims[0] = static_cast<std::uint64_t>(b.kv_len_pad);
  t.v.dims[1] = static_cast<std::uint64_t>(v_rows);
  t.v.row_stride = static_cast<std::uint64_t>(b.kv_len_pad);
  t.v.swizzle_bytes = spec.tile.bk;
  t.v.box[0] = static_cast<std::uint32_t>(spec.tile.bk);
  t.v.box[1] = static_cast<std::uint32_t>(b.d_v);
  return t;
}

dev::WgmmaAttentionParams make_wgmma_params(const KernelSpec& spec, const QuantBuffers& b, const void* workspace,
                                            const TensorRef& out, float* lse, float sm_scale, const void* delta_s,
                                            const AttentionChunk& c) {
  check_match(spec, b, "wgmma attention params");
  dev::WgmmaAttentionParams p{};
  p.a = make_attention_params(spec, b, workspace, out, lse, sm_scale, delta_s, c);
  if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(delta_s) & 15u) != 0)
    bad("wgmma attention params: the ΔS workspace must be 16-byte aligned (bulk copies)");
  return p;
}

}  // namespace sage2::jit
