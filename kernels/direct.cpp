#include "kernels/direct.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace sage2::kernels {
namespace {

[[noreturn]] void bad_spec(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "kernel spec: " + what); }

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

constexpr std::int64_t kMaxGridX = 2147483647;  // 2^31 - 1
constexpr std::int64_t kMaxGridYZ = 65535;
constexpr std::int64_t kMaxInt32 = 2147483647;

struct TileChoice {
  int warps, bk, stages;
};

}  // namespace

void validate_direct_spec(const KernelSpec& s) {
  if (s.head_dim < 1 || s.head_dim > kDirectMaxHeadDim)
    bad_spec("the direct path runs head dims 1.." + std::to_string(kDirectMaxHeadDim) + ", got head_dim=" +
             std::to_string(s.head_dim));
  if (s.varlen || s.mask != 0) bad_spec("the direct path takes no varlen or mask specs");
  if (s.in_dtype != s.out_dtype) bad_spec("the direct path writes its input dtype");
  if (s.family != KernelFamily::DirectSplit) return;
  const TileConfig& t = s.tile;
  if (t.bq != 16 && t.bq != 32 && t.bq != 64 && t.bq != 128)
    bad_spec("direct path bq=" + std::to_string(t.bq) + " (16, 32, 64 or 128 rows: whole 16-row warps)");
  const int wr = dev::direct_row_warps(t.bq);
  if (t.warps < wr || t.warps % wr != 0 || t.warps > 8)
    bad_spec("direct path warps=" + std::to_string(t.warps) + " must be a multiple of bq/16=" + std::to_string(wr) +
             ", at most 8");
  const int wk = dev::direct_key_warps(t.bq, t.warps);
  if (t.bk % (16 * wk) != 0)
    bad_spec("direct path bk=" + std::to_string(t.bk) + " must be a multiple of 16 keys per key warp (" +
             std::to_string(wk) + " key warps)");
  if (t.stages < 2) bad_spec("direct path stages=" + std::to_string(t.stages) + " (at least 2)");
}

std::size_t direct_smem_bytes(const KernelSpec& s) {
  return static_cast<std::size_t>(dev::direct_smem(s.tile.bq, s.tile.bk, s.head_dim, s.tile.stages).total);
}

TileConfig direct_default_tile(int head_dim, std::int64_t rows, int max_smem_optin) {
  if (head_dim < 1 || head_dim > kDirectMaxHeadDim)
    throw Error(ErrorCode::Unsupported, "the direct (unquantized) path runs head dims up to " +
                                            std::to_string(kDirectMaxHeadDim) + ", got " + std::to_string(head_dim));
  // Preferred first: 16 rows per row warp, 4 warps (8 for 128 rows), 64 keys per tile, 3 stages in
  // flight; devices with less shared memory drop a stage, then keys (and key warps, which need 16
  // keys each), then rows per CTA.
  int bq = rows <= 16 ? 16 : rows <= 32 ? 32 : rows <= 64 ? 64 : 128;
  for (; bq >= 16; bq /= 2) {
    std::vector<TileChoice> list;
    switch (bq) {
      case 16: list = {{4, 64, 3}, {4, 64, 2}, {2, 32, 2}, {1, 16, 2}}; break;
      case 32: list = {{4, 64, 3}, {4, 64, 2}, {2, 32, 2}, {2, 16, 2}}; break;
      case 64: list = {{4, 64, 3}, {4, 64, 2}, {4, 32, 2}, {4, 16, 2}}; break;
      default: list = {{8, 64, 3}, {8, 64, 2}, {8, 32, 2}, {8, 16, 2}}; break;
    }
    for (const TileChoice& c : list) {
      const int smem = dev::direct_smem(bq, c.bk, head_dim, c.stages).total;
      if (smem <= max_smem_optin) return TileConfig{bq, c.bk, c.warps, c.stages};
    }
  }
  throw Error(ErrorCode::Unsupported,
              "the direct path needs " + std::to_string(dev::direct_smem(16, 16, head_dim, 2).total) +
                  " bytes of shared memory per block at head dim " + std::to_string(head_dim) + "; the device allows " +
                  std::to_string(max_smem_optin));
}

namespace {

// The spec of one of the direct path's two kernels: the problem's fields that reach the code
// (canonical() drops what does not, e.g. the merge kernel's tile).
KernelSpec direct_spec(KernelFamily family, const DirectProblem& p, Arch arch, const TileConfig& tile) {
  KernelSpec s;
  s.family = family;
  s.consumer = family;
  s.arch = arch;
  s.head_dim = p.head_dim;
  s.causal = p.causal;
  s.tile = tile;
  s.in_dtype = s.out_dtype = p.dtype;
  s.return_lse = p.return_lse;
  return s.canonical();
}

}  // namespace

KernelSpec direct_split_spec(const DirectProblem& p, Arch arch, const TileConfig& tile) {
  return direct_spec(KernelFamily::DirectSplit, p, arch, tile);
}

KernelSpec direct_merge_spec(const DirectProblem& p, Arch arch) {
  return direct_spec(KernelFamily::DirectMerge, p, arch, TileConfig{});
}

DirectLayout direct_layout(const DirectProblem& p, Arch arch, const DirectDevice& device) {
  auto fail = [](ErrorCode c, const std::string& what) { throw Error(c, "direct path: " + what); };
  if (p.batch < 1 || p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_len < 1 || p.kv_len < 1)
    fail(ErrorCode::InvalidArgument, "bad problem shape");
  DirectLayout l;
  const std::int64_t rows = p.rows();
  const std::int64_t out_rows = p.batch * p.q_heads * p.q_len;
  if (rows > kMaxInt32 || p.kv_len > kMaxInt32 || p.q_len > kMaxInt32 || out_rows > kMaxInt32)
    fail(ErrorCode::Unsupported, "q_len · group = " + std::to_string(rows) + ", kv_len = " + std::to_string(p.kv_len) +
                                     ", batch · q heads · q_len = " + std::to_string(out_rows) +
                                     ": each must stay below 2^31 (32-bit row and key indices)");
  const TileConfig tile = direct_default_tile(p.head_dim, rows, device.max_smem_optin);
  l.split_spec = direct_split_spec(p, arch, tile);
  l.merge_spec = direct_merge_spec(p, arch);
  l.group = static_cast<int>(p.group());
  l.rows = rows;
  l.row_blocks = static_cast<int>((rows + tile.bq - 1) / tile.bq);
  l.key_warps = dev::direct_key_warps(tile.bq, tile.warps);
  l.threads = dev::direct_threads(tile.warps);
  l.smem = direct_smem_bytes(l.split_spec);
  // CTAs per SM: shared memory (1 KB reserved per CTA), and the register bound the kernel's
  // __launch_bounds__ guarantees (2 CTAs of <= 128 threads, else 1).
  const int by_smem = std::max(1, device.max_smem_per_sm / static_cast<int>(l.smem + 1024));
  l.ctas_per_sm = std::min(by_smem, l.threads <= 128 ? 2 : 1);

  // Keys: [0, kv_limit) are visible to some row.
  std::int64_t off = 0;
  if (p.causal == CausalMode::BottomRight) off = p.kv_len - p.q_len;
  l.causal_offset = static_cast<int>(off);
  l.kv_limit = p.causal == CausalMode::None ? static_cast<int>(p.kv_len)
                                            : static_cast<int>(std::clamp<std::int64_t>(p.q_len + off, 1, p.kv_len));
  const std::int64_t tiles = (l.kv_limit + tile.bk - 1) / tile.bk;
  // Splits: fill the device once (one wave), at least kDirectMinTilesPerSplit tiles per split.
  const int parts = dev::direct_o_parts(dev::direct_d_pad(p.head_dim));
  const std::int64_t base = p.batch * p.kv_heads * l.row_blocks * parts;
  const std::int64_t slots = static_cast<std::int64_t>(std::max(1, device.sm_count)) * l.ctas_per_sm;
  std::int64_t splits = 1;
  if (base < slots) splits = std::min<std::int64_t>(slots / base, std::max<std::int64_t>(1, tiles / kDirectMinTilesPerSplit));
  const std::int64_t tps = (tiles + splits - 1) / splits;
  splits = (tiles + tps - 1) / tps;
  l.splits = static_cast<int>(splits);
  l.tiles_per_split = static_cast<int>(tps);
  l.partials = l.splits * l.key_warps;

  const std::int64_t grid_x = static_cast<std::int64_t>(l.row_blocks) * l.splits * parts;
  if (grid_x > kMaxGridX || p.kv_heads > kMaxGridYZ || p.batch > kMaxGridYZ)
    fail(ErrorCode::Unsupported, "grid (" + std::to_string(grid_x) + ", " + std::to_string(p.kv_heads) + ", " +
                                     std::to_string(p.batch) + ") exceeds the launch limits (2^31-1, 65535, 65535)");
  l.split_shape.grid[0] = static_cast<unsigned>(grid_x);
  l.split_shape.grid[1] = static_cast<unsigned>(p.kv_heads);
  l.split_shape.grid[2] = static_cast<unsigned>(p.batch);
  l.split_shape.block[0] = static_cast<unsigned>(l.threads);
  l.split_shape.dynamic_smem = l.smem;
  l.split_shape.max_shared_carveout = true;
  if (l.merge()) {
    const std::size_t parts = static_cast<std::size_t>(p.batch * p.kv_heads) * static_cast<std::size_t>(l.partials) *
                              static_cast<std::size_t>(rows);
    l.ml_offset = align256(parts * static_cast<std::size_t>(p.head_dim) * 4);
    l.workspace_bytes = align256(l.ml_offset + parts * 8);
    const std::int64_t mw = dev::direct_merge_warps();
    l.merge_shape.grid[0] = static_cast<unsigned>((out_rows + mw - 1) / mw);
    l.merge_shape.block[0] = static_cast<unsigned>(mw * 32);
  }
  return l;
}

bool direct_rows_16b_aligned(const TensorRef& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.stride_batch % 8 == 0 && t.stride_head % 8 == 0 &&
         t.stride_seq % 8 == 0;
}

dev::DirectParams make_direct_params(const DirectProblem& p, const DirectLayout& l, const TensorRef& q,
                                     const TensorRef& k, const TensorRef& v, const TensorRef& out, float* lse,
                                     void* workspace) {
  if (l.merge() && !workspace)
    throw Error(ErrorCode::InvalidArgument, "direct path: the merge of " + std::to_string(l.partials) +
                                                " partials needs a workspace of " +
                                                std::to_string(l.workspace_bytes) + " bytes");
  if (p.return_lse && !lse) throw Error(ErrorCode::InvalidArgument, "direct path: a plan with LSE run without params.lse");
  dev::DirectParams d{};
  d.q = q.data;
  d.k = k.data;
  d.v = v.data;
  d.out = const_cast<void*>(out.data);
  d.lse = p.return_lse ? lse : nullptr;
  if (l.merge()) {
    d.part_o = static_cast<float*>(workspace);
    d.part_ml = reinterpret_cast<float*>(static_cast<char*>(workspace) + l.ml_offset);
  }
  d.q_sb = q.stride_batch;
  d.q_sh = q.stride_head;
  d.q_sn = q.stride_seq;
  d.k_sb = k.stride_batch;
  d.k_sh = k.stride_head;
  d.k_sn = k.stride_seq;
  d.v_sb = v.stride_batch;
  d.v_sh = v.stride_head;
  d.v_sn = v.stride_seq;
  d.o_sb = out.stride_batch;
  d.o_sh = out.stride_head;
  d.o_sn = out.stride_seq;
  d.batch = static_cast<std::int32_t>(p.batch);
  d.q_heads = static_cast<std::int32_t>(p.q_heads);
  d.kv_heads = static_cast<std::int32_t>(p.kv_heads);
  d.group = l.group;
  d.q_len = static_cast<std::int32_t>(p.q_len);
  d.kv_len = static_cast<std::int32_t>(p.kv_len);
  d.rows = static_cast<std::int32_t>(l.rows);
  d.row_blocks = l.row_blocks;
  d.splits = l.splits;
  d.tiles_per_split = l.tiles_per_split;
  d.kv_limit = l.kv_limit;
  d.causal_offset = l.causal_offset;
  d.partials = l.partials;
  d.vec_mask = (direct_rows_16b_aligned(q) ? 1u : 0u) | (direct_rows_16b_aligned(k) ? 2u : 0u) |
               (direct_rows_16b_aligned(v) ? 4u : 0u);
  d.scale_log2 = p.sm_scale * 1.4426950408889634f;
  return d;
}

}  // namespace sage2::kernels
