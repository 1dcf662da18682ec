// wgmma attention family (sm_90a Hopper): INT8 QKᵀ on wgmma m64nBKk32 (s8·s8 → s32, Q from
// registers, K from swizzled shared memory), per-thread dequantisation, optional ΔS (smooth-Q),
// online softmax in fp32 (exp2), P̃ → FP8 E4M3 (·448, folded into the exponent), P̂·V̂ on wgmma m64nNk32 (e4m3·e4m3 → f32,
// P̂ from registers, V̂ from swizzled shared memory), two-level accumulation. K/V tiles arrive by
// TMA (cp.async.bulk.tensor) into a ring of STAGES buffers completed on mbarriers; by default a
// producer warpgroup issues the copies (warp specialisation, setmaxnreg) while WARPS/4 consumer
// warpgroups compute. The float-op contract is the one at the top of include/sage2/reference.hpp.
//
// Fragment bookkeeping (PTX ISA, wgmma .m64nNk32 register fragments; warp w of a warpgroup,
// lane = 4g + t):
//  - S accumulator s[i] (i < BK/2): row 16w + g + 8·((i>>1)&1), key 8·(i>>2) + 2t + (i&1) — so
//    a thread's keys all have (key % 8)/2 == t: one K scale per thread and 64-key half of the
//    tile (the quantize stage's per-thread K groups, jit::quant_layout), and one Q scale
//    (group = warp·8 + g).
//  - The A fragment of P̂·V̂ reads k = 4t..4t+3 and 16+4t..19+4t of each k32 chunk, while the S
//    accumulator gives thread t keys {2t, 2t+1, 8+2t, 9+2t} of each 16-key half. The quantize
//    stage stores V̂'s keys in that order (jit::QuantLayout::v_slot: column 4t+i of a 16-key group
//    holds key 2t + (i&1) + 8·(i>>1)), so a thread's own P̂ values are its A fragment: two
//    e4m3x2 conversions and one byte permute per register, no shuffles.
//  - P̂·V̂ accumulates per KV tile from zero (TWO_LEVEL: scale-d = 0 on the tile's first k-step)
//    and is added into the fp32 O as O = O·a + R; without TWO_LEVEL the accumulator is O
//    itself, rescaled by a before the tile.
#pragma once

#include "attention_blocks.cuh"
#include "attention_epilogue.cuh"
#include "attention_params.cuh"
#include "attention_softmax.cuh"
#include "hopper.cuh"
#include "ptx.cuh"
#include "quant_math.cuh"
#include "types.cuh"
#include "wgmma_ops.cuh"
#include "wgmma_params.cuh"

#if !defined(SAGE2_FAMILY) || SAGE2_FAMILY != 3
#error "attention_wgmma.cuh is specialised by the preamble jit::generate_source() writes (attn_wgmma family)"
#endif

namespace wga {

// The spec's constants, block coordinates, visibility rules, softmax and epilogue: attn_common.
using namespace attn_common;
using sage2::dev::WgmmaAttentionParams;

constexpr int NWG = sage2::dev::wg_consumer_groups(WARPS);
constexpr bool WS = sage2::dev::wg_producer_wg(WARPS);
constexpr int THREADS = sage2::dev::wg_threads(WARPS);
constexpr int CTHREADS = WARPS * 32;   // consumer threads
constexpr int KSTEPS = RB / 32;        // k32 steps of QKᵀ
constexpr int PANEL = sage2::dev::wg_panel(RB);
constexpr int NPANEL = RB / PANEL;
constexpr int NCH = sage2::dev::wg_pv_chunks(D_V, WARPS);
constexpr int PVN = sage2::dev::wg_pv_n(D_V, WARPS);
constexpr bool PV_RING = sage2::dev::wg_pv_ring(D_V, WARPS);  // wgmma_params.cuh
constexpr int KC = BK / 32;            // k32 chunks of P̂·V̂
constexpr int NS = BK / 2;             // S accumulator registers per thread
constexpr int NT = BK / 8;             // its n8 tiles (4 registers each)
constexpr int KH = BK / 64;            // 64-key halves of a tile: one K scale per thread each
constexpr int KG = 4 * KH;             // K scale groups per tile
// Q̂ as A fragments in registers for the whole KV loop, or A from a TMA-loaded shared-memory tile
// (wgmma SS): wgmma_params.cuh says when.
constexpr bool Q_IN_REGS = !sage2::dev::wg_q_in_smem(RB, D_V, STAGES, WARPS, SMOOTH_Q);
// PIPE: software pipelining inside a consumer warpgroup (consume(); wgmma_params.cuh says when).
constexpr bool PIPE = sage2::dev::wg_pipelined(D_V, STAGES, WARPS, SMOOTH_Q);
// Wide heads: at d_v > 128 O alone takes 128 of the 255 registers, and ptxas (CUDA 13.0) spilled
// (280 bytes at head dim 256) when thread 0 refilled a stage as soon as its own wait showed the
// tile's wgmmas complete (the one-warpgroup default below), and when the block coordinates stayed
// live across the KV loop. So wide heads refill after the stage's "empty" barrier, as with a
// producer, and recompute the coordinates for the epilogue.
constexpr bool WIDE = D_V > 128;
constexpr bool RELEASE_BY_BARRIER = WIDE;
// CTAs per SM the registers must allow (__launch_bounds__): wgmma_params.cuh.
constexpr int MIN_CTAS = sage2::dev::wg_min_ctas(WARPS, D_V, STAGES, SMOOTH_Q, MASK != 0);
constexpr u32 Q_TX_BYTES = static_cast<u32>(BQ * RB);
constexpr sage2::dev::WgSmemLayout SM = sage2::dev::wg_smem_layout(BQ, BK, RB, D_V, STAGES, SMOOTH_Q, WARPS);
constexpr u32 TX_BYTES = static_cast<u32>(sage2::dev::wg_stage_tx_bytes(BK, RB, D_V, SMOOTH_Q));
// Programmatic dependent launch (ptx::pdl_wait): the kernel may start while the quantize stage's
// last kernel finishes. With Q quantized here and neither varlen nor a mask, only the K/V copies
// and the consumers' loop read what that stage wrote, so Q is loaded and quantized before the
// wait; otherwise (Q̂, the varlen table, the mask's tile classes) the CTA waits first.
constexpr bool EARLY_WAIT = !Q_IN_KERNEL || VARLEN || MASK != 0;
// Registers per thread after setmaxnreg (consumers / producer): 2 consumer warpgroups at 240 and
// a producer at 24 use 64512 of the SM's 65536.
constexpr int CONSUMER_REGS = 240;
constexpr int PRODUCER_REGS = 24;

static_assert(WARPS % 4 == 0 && NWG >= 1 && NWG <= 2, "1 or 2 consumer warpgroups");
static_assert(BQ == 64 * NWG, "each consumer warpgroup owns one 64-row wgmma tile");
static_assert(BK == 64 || BK == 128, "BK must be 64 or 128 (wgmma N of QKᵀ, the V panel swizzle)");
static_assert(RB % 32 == 0 && D_V % 32 == 0 && D_V <= 256, "padded dims");
static_assert(PVN % 8 == 0 && PVN * NCH == D_V, "P̂·V̂ chunks");
static_assert(SAGE2_MMA_SHAPE == 2, "the preamble's quant layout must be the wgmma one");
static_assert(SAGE2_QK_BITS == 8, "the wgmma family is 8-bit");
static_assert(SAGE2_K_GROUPS == KG, "per-thread K group count");
static_assert(TX_BYTES < (1u << 20), "mbarrier transaction count");

// The quantize kernels' per-thread groups (preamble tables from jit::quant_layout) are the ones
// this kernel reads: row r of the block is in warp r/16 (warpgroup r/64), group warp·8 + r%8;
// key k of a tile in group (k%8)/2 + 4·(k/64).
static_assert(groups_match(sage2_q_group_table, [](int r) { return (r / 16) * 8 + r % 8; }),
              "Q scale groups differ from the wgmma accumulator rows");
static_assert(groups_match(sage2_k_group_table, [](int k) { return (k % 8) / 2 + 4 * (k / 64); }),
              "K scale groups differ from the wgmma accumulator columns");
// V̂'s stored key order is the accumulator's (see the header comment): pack_p() relies on it.
static_assert(groups_match(sage2_v_key_of_slot, [](int p) { return 2 * (p >> 2) + (p & 1) + 8 * ((p >> 1) & 1); }),
              "V key order differs from the P̂ fragment order");

// TMA rows of this CTA's (batch, kv head): K row of key 0 and the V channel row 0. Computed once:
// the copies of every tile are issued from inside the KV loop (by thread 0 without a producer),
// where recomputing the block coordinates cost 64-bit divisions on the critical path.
struct TileRows {
  i32 k_row0, v_row0, v_col0;  // v_col0: the sequence's first key column (0 unless varlen)
};
// t0: the block's first KV tile (tensor masks skip the leading fully masked tiles; else 0).
__device__ __forceinline__ TileRows tile_rows(const BlockCoords& c, int t0) {
  return TileRows{static_cast<i32>((c.k_blk_base + t0) * BK), static_cast<i32>(c.v_row0),
                  static_cast<i32>(c.v_col0 + static_cast<i64>(t0) * BK)};
}

// Copies of KV tile `tile` into stage `slot`: K panels and V (TMA). The tile's K scales and ΔS
// row are read by the consumers straight from global memory (L2): 16 and BK·4 bytes, where bulk
// copies into the stage made compute-sanitizer racecheck report hazards it could not order.
__device__ __forceinline__ void issue_tile(const WgmmaAttentionParams& P, const TileRows& r, int tile, int slot,
                                           u32 sbase) {
  const u32 st = sbase + static_cast<u32>(SM.stages_off + slot * SM.stage_bytes);
  const u32 full = sbase + SM.bar_off + 8u * static_cast<u32>(slot);
  ptx::mbar_arrive_expect_tx(full, TX_BYTES);
  const i32 krow = r.k_row0 + tile * BK;
#pragma unroll
  for (int pn = 0; pn < NPANEL; ++pn)
    ptx::tma_load_2d(st + SM.k_off + pn * BK * PANEL, &P.tm_k, full, pn * PANEL, krow);
  ptx::tma_load_2d(st + SM.v_off, &P.tm_v, full, (VARLEN || MASK) ? r.v_col0 + tile * BK : tile * BK, r.v_row0);
}

// Q̂ tiles of every consumer warpgroup (wide heads only), completing on the q_full barrier.
__device__ __forceinline__ void issue_q(const WgmmaAttentionParams& P, const BlockCoords& c, u32 sbase) {
  if (Q_IN_REGS || Q_IN_KERNEL) return;
  const u32 bar = sbase + SM.bar_off + 8u * (2 * STAGES);
  ptx::mbar_arrive_expect_tx(bar, Q_TX_BYTES);
#pragma unroll
  for (int wg = 0; wg < NWG; ++wg)
#pragma unroll
    for (int pn = 0; pn < NPANEL; ++pn)
      ptx::tma_load_2d(sbase + SM.q_off + wg * 64 * RB + pn * 64 * PANEL, &P.tm_q, bar, pn * PANEL,
                       static_cast<i32>(c.q_row_base + c.i0 + wg * 64));
}

// Descriptors of the operands in stage `st`. A descriptor's start address is addr >> 4 in its
// low 14 bits and shared addresses stay below 2^18, so the descriptor of base + off is the base
// descriptor + off/16: one base descriptor per tile and compile-time offsets (no per-k-step
// descriptor registers for the compiler to hoist and spill), added to the low word alone (a
// 64-bit add cost a carry instruction per descriptor).
__device__ __forceinline__ void pin(u64& x) { asm volatile("" : "+l"(x)); }
__device__ __forceinline__ u64 desc_add(u64 d, u32 off) {
  u32 lo, hi;
  asm("mov.b64 {%0, %1}, %2;" : "=r"(lo), "=r"(hi) : "l"(d));
  lo += off >> 4;
  u64 r;
  asm("mov.b64 %0, {%1, %2};" : "=l"(r) : "r"(lo), "r"(hi));
  return r;
}
__device__ __forceinline__ u64 k_desc0(u32 st) {
  return ptx::smem_desc(st + SM.k_off, 8 * PANEL, ptx::desc_swizzle_code(PANEL));
}
__device__ __forceinline__ u32 k_off(int ks) { return ((ks * 32) / PANEL) * BK * PANEL + (ks * 32) % PANEL; }
// A operand (Q̂ in shared memory): the warpgroup's 64-row tile `qt`, laid out like a K tile.
__device__ __forceinline__ u64 q_desc0(u32 qt) { return ptx::smem_desc(qt, 8 * PANEL, ptx::desc_swizzle_code(PANEL)); }
__device__ __forceinline__ u32 q_off(int ks) { return ((ks * 32) / PANEL) * 64 * PANEL + (ks * 32) % PANEL; }
__device__ __forceinline__ u64 v_desc0(u32 st) {
  return ptx::smem_desc(st + SM.v_off, 8 * BK, ptx::desc_swizzle_code(BK));
}
__device__ __forceinline__ u32 v_off(int ch, int kc) { return ch * PVN * BK + kc * 32; }
// (ptx::opaque keeps the compiler from precomputing per-stage values outside the KV loop)
using ptx::opaque;

// Q̂ as wgmma A fragments (4 bytes per register: rows g / g+8, channels 4t.. and 16+4t.. of
// each 32-byte k-step), straight from global memory.
__device__ __forceinline__ void load_q_fragments(const i8* q0, u32 (&qf)[Q_IN_REGS ? KSTEPS : 1][4]) {
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    qf[ks][0] = ptx::ld_nc_u32(q0 + ks * 32);
    qf[ks][1] = ptx::ld_nc_u32(q0 + 8 * RB + ks * 32);
    qf[ks][2] = ptx::ld_nc_u32(q0 + ks * 32 + 16);
    qf[ks][3] = ptx::ld_nc_u32(q0 + 8 * RB + ks * 32 + 16);
  }
}

// ---- Q quantized here (Q_IN_KERNEL): the quantize_q kernel's job for the thread's own rows,
// with its float ops (jit/quant_buffers.hpp, templates/quant_math.cuh), so the codes and scales
// are the ones that kernel would have written, and Q makes one trip through memory.

// Where the thread's Q values of query row `row` lie: channels 32·ks + 16·h + 4t .. +3 of each
// k-step ks and half h (the A fragment's). Loaded as 8 bytes when the base, the strides and the
// head dim keep every 4-channel run aligned, else element by element; 0 past the head dim or
// the sequence.
struct QSource {
  const u16* row_ptr;
  bool live, vec;
  __device__ __forceinline__ QSource(const AttentionParams& p, const BlockCoords& c, i64 row) {
    live = row < seq_q_len(p, c);
    row_ptr = static_cast<const u16*>(p.q_in) + c.b * p.q_stride_batch + c.h * p.q_stride_head +
              (c.q_start + row) * p.q_stride_seq;
    vec = HD % 4 == 0 && (reinterpret_cast<u64>(p.q_in) & 7u) == 0 &&
          ((p.q_stride_batch | p.q_stride_head | p.q_stride_seq) & 3) == 0;
  }
  __device__ __forceinline__ ptx::u32x2 load4(int ch) const {
    if (!live || ch >= HD) return ptx::u32x2{0u, 0u};
    if (vec) return ptx::ld_nc_v2(row_ptr + ch);
    u32 h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) h[e] = ch + e < HD ? static_cast<u32>(ptx::ld_nc_u16(row_ptr + ch + e)) : 0u;
    return ptx::u32x2{h[0] | (h[1] << 16), h[2] | (h[3] << 16)};
  }
};

// Four consecutive 16-bit inputs with every non-finite one replaced by +0 (what reading it as 0
// gives), on the bits and without a branch; `bad` becomes nonzero when one was. Branch-free
// because the prologue and the epilogue apply it to every word of the thread's Q rows: a
// per-word branch there gave ptxas 56 small blocks to schedule (head dim 200: 8,040 → 7,264 SASS
// instructions, NVRTC ~1.25 → ~1.15 s; bench/NOTES.md, session 25).
__device__ __forceinline__ ptx::u32x2 q_sane4(ptx::u32x2 w, u32& bad) {
  const u32 nx = quant_math::nonfinite_bits<IN_BF16>(w.x), ny = quant_math::nonfinite_bits<IN_BF16>(w.y);
  bad |= nx | ny;
  // bits 15 / 31 → the whole half: (n >> 15) is 0, 1, 0x10000 or 0x10001; times 0xffff its mask
  w.x &= ~((nx >> 15) * 0xffffu);
  w.y &= ~((ny >> 15) * 0xffffu);
  return w;
}
__device__ __forceinline__ void q_floats4(const ptx::u32x2& w, float (&v)[4]) {
  quant_math::unpack2<IN_BF16>(w.x, v[0], v[1]);
  quant_math::unpack2<IN_BF16>(w.y, v[2], v[3]);
}

// The epilogue's facts of the thread's rows g (r = 0) and g + 8 (r = 1) (attention_epilogue.cuh
// QRowsFromStage's interface): the non-finite flags the prologue found (bit r), and q·k̄ for the
// LSE (smooth-K), recomputed from the caller's Q at the end rather than kept in registers across
// the KV loop (where two more live registers spilled at head dim 128): the thread's channels in
// k-step order, then the quad — every lane of the warp must call it (shuffles).
struct QRowsHere {
  const AttentionParams* p;
  const BlockCoords* c;
  int t;
  u32 bad_bits;
  __device__ __forceinline__ bool bad(int r, i64) const { return ((bad_bits >> r) & 1u) != 0u; }
  __device__ __forceinline__ float kbias(int, i64 row) const {
    const QSource src(*p, *c, row);
    float part = 0.f;
    u32 unused = 0u;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ch = 32 * ks + 16 * h + 4 * t;
        float v[4];
        q_floats4(q_sane4(src.load4(ch), unused), v);
        const ptx::u32x4 kb = ptx::ld_nc_v4(p->k_mean + c->bhk * RB + ch);
        part += v[0] * ptx::bits_f32(kb.x);
        part += v[1] * ptx::bits_f32(kb.y);
        part += v[2] * ptx::bits_f32(kb.z);
        part += v[3] * ptx::bits_f32(kb.w);
      }
    return ptx::group_sum<4>(part);
  }
};

// The epilogue's source of the Q rows' facts: the registers (Q_IN_KERNEL) or the stage's buffers.
template <bool HERE>
struct QRowsOf {
  static __device__ __forceinline__ QRowsHere get(u32 bad_bits, int t, const AttentionParams& p, const BlockCoords& c) {
    return QRowsHere{&p, &c, t, bad_bits};
  }
};
template <>
struct QRowsOf<false> {
  static __device__ __forceinline__ QRowsFromStage get(u32, int, const AttentionParams& p, const BlockCoords& c) {
    return QRowsFromStage{&p, c.q_row_base};
  }
};

// Q̂ of the thread's query rows `row` (g of its warp) and row + 8, from the caller's Q: word i of
// k-step ks holds row + 8·(i & 1), channels 32·ks + 16·(i >> 1) + 4t .. +3 (lowest byte first),
// i.e. the wgmma A fragment. The two rows are one scale group (jit::quant_layout: group warp·8 +
// g), spread over the quad: amax over the quad's channels of both rows (rows past the sequence
// and channels past the head dim read as 0). Returns the group's scale; bit r of `bad_bits` says
// whether row + 8r holds a non-finite value.
__device__ __forceinline__ float quantize_q_here(const AttentionParams& p, const BlockCoords& c, i64 row, int t,
                                                 u32 (&qw)[KSTEPS][4], u32& bad_bits) {
  const QSource src[2] = {QSource(p, c, row), QSource(p, c, row + 8)};
  ptx::u32x2 raw[KSTEPS][4];
  if (src[0].vec) {
    // 8-byte loads at constant offsets from the thread's two row pointers (one predicate per
    // load, no per-chunk address arithmetic): the prologue runs in lockstep on every CTA of a
    // wave, so its instructions are the kernel's at short sequences (bench/NOTES.md, session 31).
    const u16* const at[2] = {src[0].row_ptr + 4 * t, src[1].row_ptr + 4 * t};
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int ch0 = 32 * ks + 16 * (i >> 1);  // the chunk's first channel, less 4t
        const bool in_head = HD % 16 == 0 ? ch0 < HD : ch0 + 4 * t < HD;
        raw[ks][i] = in_head && src[i & 1].live ? ptx::ld_nc_v2(at[i & 1] + ch0) : ptx::u32x2{0u, 0u};
      }
  } else {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) raw[ks][i] = src[i & 1].load4(32 * ks + 16 * (i >> 1) + 4 * t);
  }
  // The largest |value| of each row on the packed 16-bit words (NaN-propagating): a non-finite
  // value makes it non-finite, and only then do the words need sanitising (the checked form).
  u32 m2[2] = {0u, 0u};
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      m2[i & 1] = ptx::max_abs_nan_x2<IN_BF16>(ptx::max_abs_nan_x2<IN_BF16>(m2[i & 1], raw[ks][i].x), raw[ks][i].y);
  u32 amax, bad[2] = {0u, 0u};
  if ((quant_math::nonfinite_bits<IN_BF16>(m2[0]) | quant_math::nonfinite_bits<IN_BF16>(m2[1])) == 0u) {
    // (|x| >= 0: the larger half of the two rows' maxima, as a float — the float amax exactly)
    const u32 r = ptx::max_nan_x2<IN_BF16>(m2[0], m2[1]);
    const u32 m = ptx::max_nan_x2<IN_BF16>(r, r >> 16);
    float lo, hi;
    quant_math::unpack2<IN_BF16>(m & 0xffffu, lo, hi);
    amax = ptx::abs_bits(lo);
  } else {
    // non-finite values read as 0 (flags per row), amax over the thread's values
    amax = 0u;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        raw[ks][i] = q_sane4(raw[ks][i], bad[i & 1]);
        float v[4];
        q_floats4(raw[ks][i], v);
#pragma unroll
        for (int e = 0; e < 4; ++e) amax = ptx::max_u32(amax, ptx::abs_bits(v[e]));
      }
  }
  amax = ptx::group_max_u32<4>(amax);  // over the quad
  const float am = ptx::bits_f32(amax);
  const float inv = quant_math::group_inv<127>(am);
  bad_bits = (bad[0] != 0u ? 1u : 0u) | (bad[1] != 0u ? 2u : 0u);
  bad_bits |= ptx::shfl_xor(bad_bits, 2);  // either row's flag over the quad
  bad_bits |= ptx::shfl_xor(bad_bits, 1);
  // codes: every value is finite and |x| <= amax, so with a finite inv the code byte comes from a
  // multiply and an add (quant_math::code_byte_finite), four bytes packed by three byte permutes;
  // an infinite inv (a tiny bf16 amax) takes quant_int itself
  if (quant_math::group_inv_finite(inv)) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v[4];
        q_floats4(raw[ks][i], v);
        const u32 lo = ptx::prmt(quant_math::code_byte_finite(v[0], inv), quant_math::code_byte_finite(v[1], inv), 0x0040u);
        const u32 hi = ptx::prmt(quant_math::code_byte_finite(v[2], inv), quant_math::code_byte_finite(v[3], inv), 0x0040u);
        qw[ks][i] = ptx::prmt(lo, hi, 0x5410u);
      }
  } else {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v[4];
        q_floats4(raw[ks][i], v);
        u32 w = 0u;
#pragma unroll
        for (int e = 0; e < 4; ++e) w |= (static_cast<u32>(quant_math::quant_int<127>(v[e], inv)) & 0xffu) << (8 * e);
        qw[ks][i] = w;
      }
  }
  return quant_math::group_scale<127>(am);
}

// Writes the thread's Q̂ words (quantize_q_here) into its warpgroup's shared-memory Q̂ tile `qt`
// (1024-aligned), where the TMA copy of issue_q() would have put them: panel pn = column / PANEL
// of [64 rows][PANEL bytes], each 16-byte chunk swizzled like the map (address bits 4.. xor the
// row bits 7..: the 128/64/32-byte swizzle modes).
__device__ __forceinline__ void store_q_tile(u32 qt, int tile_row, int t, const u32 (&qw)[KSTEPS][4]) {
  constexpr u32 SWZ = PANEL / 16 - 1;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = tile_row + 8 * (i & 1), col = 32 * ks + 16 * (i >> 1) + 4 * t;
      const u32 off = static_cast<u32>((col / PANEL) * 64 * PANEL + r * PANEL + col % PANEL);
      ptx::st_shared_u32(qt + (off ^ (((off >> 7) & SWZ) << 4)), qw[ks][i]);
    }
}

// Per-thread constants of the consumer loop.
struct RowCtx {
  float qs;          // Q scale of the thread's group (rows g and g+8 share it)
  float c2;          // sm_scale · log2 e
  int diag;          // causal: last visible key of row g before the kv_len clamp (row g+8: diag + 8)
  int kv_last;       // kv_len - 1
  int mask_from;     // first tile that needs the mask
  int t;             // lane % 4
  const float* k_scale;  // this (batch, kv head)'s K scales: [k_blocks][KG], from the block's first tile
  const float* ds;       // smooth Q: this block's ΔS row [kv_len_pad], from the block's first tile
  // Tensor masks: the block's first tile t0 (loop tile i is KV tile t0 + i) and the class of each
  // tile (from t0). The mask rows themselves are recomputed in the tiles that read them.
  int t0;
  const u8* cls;
};

// The thread's K scales of tile `tile`: one per 64-key half (group t of each half).
__device__ __forceinline__ void load_k_scales(const RowCtx& rc, int tile, float (&dk)[KH]) {
#pragma unroll
  for (int h = 0; h < KH; ++h) dk[h] = rc.k_scale[tile * KG + 4 * h + rc.t];
}

// Issues S = Q̂ K̂ᵀ of the tile in stage `st` as one committed wgmma batch (not waited for).
__device__ __forceinline__ void issue_qk(i32 (&s)[NS], const u32 (&qf)[Q_IN_REGS ? KSTEPS : 1][4], u32 st, u32 zero,
                                         u32 sbase, int wg) {
  const u64 kd = k_desc0(st);
  if (Q_IN_REGS) {
    // Fresh copies of the Q̂ fragments for this tile's batch: ptxas (CUDA 13.0) treated the A
    // registers of the register-sourced wgmma as dead after the batch although the next
    // iteration reads them again, and reused them for P̂ (SASS: the QGMMA's A registers were
    // the IGMMA's; on the H100 every tile after the first saw garbage Q̂ at head dim 128 / bk
    // 128). With per-tile copies (xor with `zero`: 0 at run time, unknown to the compilers and
    // different per iteration) the wgmma operands are per-iteration values and qf is only read by
    // ordinary instructions.
    // The copies are pinned before the fence: an input register of a wgmma defined between the
    // fence and the batch makes ptxas serialise every wgmma of the kernel (info C7513).
    u32 qa[KSTEPS][4];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        qa[ks][i] = qf[ks][i] ^ zero;
        ptx::fence_operand(qa[ks][i]);
      }
    u64 kds[KSTEPS];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      kds[ks] = desc_add(kd, k_off(ks));
      pin(kds[ks]);
    }
    ptx::wgmma_fence();
    ptx::wgmma_s8_rs_z<BK>(s, qa[0], kds[0]);
#pragma unroll
    for (int ks = 1; ks < KSTEPS; ++ks) ptx::wgmma_s8_rs<BK>(s, qa[ks], kds[ks], 1u);
  } else {
    const u64 qd = q_desc0(opaque(sbase + SM.q_off + static_cast<u32>(wg * 64 * RB)));
    ptx::wgmma_fence();
    ptx::wgmma_s8_ss_z<BK>(s, qd, kd);
#pragma unroll
    for (int ks = 1; ks < KSTEPS; ++ks) ptx::wgmma_s8_ss<BK>(s, desc_add(qd, q_off(ks)), desc_add(kd, k_off(ks)), 1u);
  }
  ptx::wgmma_commit();
}

// The completed S tile → P̂ as P̂·V̂ A fragments: dequantise (+ΔS), log2 units, mask, online
// softmax (m and l updated, alpha = exp2(m_old − m_new) returned for O), P̂ = e4m3(P̃·448).
// MASKED: the tile holds keys some rows may not see (causal diagonal, padding past kv_len).
// Per score, without smooth-Q: one conversion, one max, one FFMA, one ex2, one add, half a pack.
// TMASK: a tensor mask's tile of class `cls` (MASK_CLASS_SOME: per element; MASK_CLASS_NONE: an
// interior tile that is all masked out) — the scores take the mask's term.
template <bool MASKED, bool TMASK = false>
__device__ __forceinline__ void softmax_tile(i32 (&s)[NS], const float (&dk)[KH], int tile, const RowCtx& rc, float (&m)[2],
                                             float (&l)[2], float (&alpha)[2], u32 (&pa)[KC][4], int cls = 0,
                                             const AttentionParams* p = nullptr, int cut = BK, float shift = 0.f) {
  const int t = rc.t;
  const float c2 = rc.c2;
  // Read S through volatile copies that stay after the wait: the compilers may not hoist the reads
  // above it, and (unlike pinning s itself) a copy does not redefine a register the next QKᵀ batch
  // accumulates into while P̂·V̂ is in flight (which makes ptxas serialise every wgmma, C7513).
  i32 sv[NS];
#pragma unroll
  for (int i = 0; i < NS; ++i) asm volatile("mov.b32 %0, %1;" : "=r"(sv[i]) : "r"(s[i]));
  // dot → fp32 with cvt.rn.f32.s32: exact (|dot| <= 127²·256 < 2^24), one instruction.
  float x[NT][4];
#pragma unroll
  for (int i = 0; i < NS; ++i) asm("cvt.rn.f32.s32 %0, %1;" : "=f"(x[i / 4][i % 4]) : "r"(sv[i]));
  // The contract's s = dot·((δq·δk)·c2) (+ ΔS·c2); dqk >= 0.
  float dqk[KH];
#pragma unroll
  for (int h = 0; h < KH; ++h) dqk[h] = score_scale(rc.qs, dk[h], c2);
  // Visibility of key 8j + 2t + (e&1) to row g + 8·(e>>1) (MASKED tiles only).
  int rel[2] = {BK, BK};
  const int kbase = (MASK ? rc.t0 + tile : tile) * BK;
  if (MASKED) {
    const int l0 = last_visible(rc.kv_last, rc.diag), l1 = last_visible(rc.kv_last, rc.diag + 8);
    rel[0] = tile_last_visible(l0, kbase);
    rel[1] = tile_last_visible(l1, kbase);
    if (MASK) {  // a tensor mask's prefix tile: keys [0, cut) at most
      rel[0] = min_(rel[0], cut - 1);
      rel[1] = min_(rel[1], cut - 1);
    }
  }
  auto visible = [&](int j, int e) { return !MASKED || 8 * j + 2 * t + (e & 1) <= rel[e >> 1]; };
  const float ninf = neg_inf();

  // Tensor mask: the mask rows of the thread's rows g and g+8 (null past q_len: no row to read).
  const char* mrow[2] = {nullptr, nullptr};
  const float cterm = TMASK && (cls == MASK_CLASS_CONST || cls >= MASK_CLASS_PREFIX) ? mask_const(*p, rc.cls + tile) : 0.f;
  const int cut_t = cls == MASK_CLASS_CONST ? 0 : (cls >= MASK_CLASS_PREFIX ? cls - MASK_CLASS_PREFIX : BK);
  if (TMASK && cls == MASK_CLASS_SOME) {
    const BlockCoords c = block_coords(*p);
    const i64 row = c.i0 + static_cast<i64>(tid_x() >> 5) * 16 + ((tid_x() & 31u) >> 2);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) mrow[hf] = row + 8 * hf < seq_q_len(*p, c) ? mask_row(*p, c, row + 8 * hf) : nullptr;
  }
  // A bool mask only hides keys: the fast path below, with the mask's visibility. Additive masks
  // (a term per key) take the generic path.
  constexpr bool GENERIC = SMOOTH_Q || (TMASK && MASK >= 2);
  constexpr bool HIDE = MASKED || (TMASK && MASK == 1);
  auto shown = [&](int j, int e) {
    bool vis = visible(j, e);
    if (TMASK && MASK == 1) {
      const char* mr = mrow[e >> 1];
      if (cls == MASK_CLASS_NONE)
        vis = false;
      else if (vis && mr)
        vis = mask_term(mr, kbase + 8 * j + 2 * t + (e & 1), p->mask_stride_k) == 0.f;
    }
    return vis;
  };
  float mx[2];
  if (GENERIC) {
    // s = dot·dqk (+ ΔS·c2) (+ the mask's term) per key, then the max over s.
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float2 d2 = make_float2(0.f, 0.f);
      if (SMOOTH_Q) d2 = *reinterpret_cast<const float2*>(rc.ds + static_cast<i64>(tile) * BK + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float S = x[j][e] * dqk[j / 8];
        if (SMOOTH_Q) S = S + ((e & 1) ? d2.y : d2.x) * c2;
        bool vis = visible(j, e);
        if (TMASK && MASK >= 2) {
          // the tile's term: cterm from key `cut_t` on (constant and prefix tiles), else the
          // element's (keys past kv_len: not visible, no load; rows past q_len: no mask row)
          const int krel = 8 * j + 2 * t + (e & 1);
          float term = krel >= cut_t ? cterm : 0.f;
          if (cls == MASK_CLASS_SOME && vis && mrow[e >> 1]) term = mask_term(mrow[e >> 1], kbase + krel, p->mask_stride_k);
          vis = vis && cls != MASK_CLASS_NONE;
          S = S + term;
        }
        x[j][e] = vis ? S : ninf;
      }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float v = ninf;
#pragma unroll
      for (int j = 0; j < NT; ++j) v = ptx::max_f32(v, ptx::max_f32(x[j][2 * hf], x[j][2 * hf + 1]));
      mx[hf] = v;
    }
  } else {
    // max_j(dot_j·dqk) = max_j(dot_j)·dqk within a 64-key half (dqk >= 0 and rounding is
    // monotone), so the max runs on the converted dots and costs one multiply per half. A masked
    // key's dot becomes -inf once: its product, the max and the exponent follow from it. dqk is
    // raised to FLT_MIN so that -inf·dqk stays -inf: dqk = 0 only where every dot is 0 (a Q or K
    // group of zero codes), whose products stay 0.
    if (HIDE) {
#pragma unroll
      for (int h = 0; h < KH; ++h) dqk[h] = ptx::max_f32(dqk[h], 1.17549435e-38f);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!shown(j, e)) x[j][e] = ninf;
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float v = ninf;
#pragma unroll
      for (int h = 0; h < KH; ++h) {
        float vh = ninf;
#pragma unroll
        for (int j = 8 * h; j < 8 * h + 8; ++j)
#pragma unroll
          for (int e = 2 * hf; e < 2 * hf + 2; ++e) vh = ptx::max_f32(vh, x[j][e]);
        v = ptx::max_f32(v, vh * dqk[h]);  // a fully masked half: -inf
      }
      mx[hf] = MASK ? v + shift : v;  // a tensor mask's constant tile: + its term
    }
  }

  float m_sh[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) m_sh[hf] = update_max(mx[hf], m[hf], alpha[hf], ninf);
  // without smooth-Q the exponent is one FFMA: dot·dqk − m_sh (a masked key: -inf·dqk − m_sh =
  // -inf, weight 0)
  float sub[2] = {-m_sh[0], -m_sh[1]};
  if (MASK && !GENERIC) {
    sub[0] = shift - m_sh[0];
    sub[1] = shift - m_sh[1];
  }
  exp2_rowsum(x, alpha, l, [&](int j, int e) {
    return GENERIC ? x[j][e] - m_sh[e >> 1] : fmaf(x[j][e], dqk[j / 8], sub[e >> 1]);
  });
  pack_p(x, pa);
}

// True on every consumer thread when `v` is true on all of them (a named barrier with a reduction;
// the producer warpgroup, if any, does not take part).
__device__ __forceinline__ bool consumers_all(bool v) {
  u32 r;
  asm volatile(
      "{\n .reg .pred a, b;\n setp.ne.u32 a, %1, 0;\n bar.red.and.pred b, 1, %2, a;\n selp.u32 %0, 1, 0, b;\n}"
      : "=r"(r)
      : "r"(static_cast<u32>(v)), "n"(CTHREADS)
      : "memory");
  return r != 0;
}

// A tensor mask's tile the serial loop may skip without computing it, exactly: a tile with
// nothing visible (its scores are all -inf: m, l and O stay as they are), or a constant tile whose
// term T is so negative that every score of it stays 160 below each row's running max — then every
// exp2 of it is 0 in fp32 (below the smallest subnormal), P̂ is 0, m does not move and alpha is 1,
// so skipping gives the same bits. The bound on a score is 127²·HD·dqk (int8 codes; dqk of each of
// the thread's K groups; the vote covers every row and group of the warpgroup). Not with smooth-Q
// (its ΔS term has no such bound here).
__device__ __forceinline__ bool skip_tile(const RowCtx& rc, int tile, const float (&dk)[KH], const float (&m)[2],
                                          const AttentionParams& p) {
  const int cls = rc.cls[tile];
  if (cls == MASK_CLASS_NONE) return true;  // the same class on every thread: no vote
  if (MASK < 2 || SMOOTH_Q || cls != MASK_CLASS_CONST) return false;
  const float term = mask_const(p, rc.cls + tile);
  float dmax = 0.f;
#pragma unroll
  for (int h = 0; h < KH; ++h) dmax = ptx::max_f32(dmax, score_scale(rc.qs, dk[h], rc.c2));
  const float bound = 16129.f * static_cast<float>(HD) * dmax + term;  // >= every score + term
  return consumers_all(bound < m[0] - 160.f && bound < m[1] - 160.f);
}

// The softmax of tile `tile`, with the mask where the tile needs it.
__device__ __forceinline__ void softmax_any(i32 (&s)[NS], const float (&dk)[KH], int tile, const RowCtx& rc, float (&m)[2],
                                            float (&l)[2], float (&alpha)[2], u32 (&pa)[KC][4],
                                            const AttentionParams& p) {
  if (MASK) {
    // Tiles that read no mask element take the masked fast path (one instantiation with the causal
    // one: its kv_len / causal test also holds where nothing is cut): a prefix cut (an interior
    // tile with nothing visible: cut 0) or a constant term.
    const int cls = rc.cls[tile];
    // a prefix tile's tail term: -inf for bool masks, from the bias table for additive ones
    const bool cut = cls == MASK_CLASS_NONE ||
                     (cls >= MASK_CLASS_PREFIX && (MASK == 1 || mask_const(p, rc.cls + tile) == neg_inf()));
    if (cut) {
      softmax_tile<true>(s, dk, tile, rc, m, l, alpha, pa, 0, nullptr, cls == MASK_CLASS_NONE ? 0 : cls - MASK_CLASS_PREFIX);
      return;
    }
    if (cls == MASK_CLASS_CONST) {
      softmax_tile<true>(s, dk, tile, rc, m, l, alpha, pa, 0, nullptr, BK, mask_const(p, rc.cls + tile));
      return;
    }
    if (cls != MASK_CLASS_ALL) {
      softmax_tile<true, true>(s, dk, tile, rc, m, l, alpha, pa, cls, &p);
      return;
    }
  }
  if (tile >= rc.mask_from)
    softmax_tile<true>(s, dk, tile, rc, m, l, alpha, pa);
  else
    softmax_tile<false>(s, dk, tile, rc, m, l, alpha, pa);
}

// Descriptors of the V̂ k-chunks of channel chunk `ch` in stage `st`, pinned: computed before any
// batch they could land inside. ptxas serialises every wgmma of the kernel (info C7513) when a
// register a wgmma reads is defined while an earlier batch is in flight or after the batch's
// fence; so the pipelined loop computes all of P̂·V̂ (j−1)'s operands before issuing QKᵀ (j).
struct VDescs {
  u64 d[KC];
};
__device__ __forceinline__ VDescs pv_descs(u32 st, int ch) {
  VDescs v;
  const u64 vd = v_desc0(opaque(st));
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    v.d[kc] = desc_add(vd, v_off(ch, kc));
    pin(v.d[kc]);
  }
  return v;
}

// Issues acc (+)= P̂ V̂ of one channel chunk (descriptors `vd`) as one committed batch.
// zero_first: the tile's two-level accumulator starts from 0 (scale-d = 0 on the first k-step).
__device__ __forceinline__ void issue_pv(float (&acc)[PVN / 2], const u32 (&pa)[KC][4], const VDescs& vd,
                                         bool zero_first) {
  ptx::wgmma_fence();
  if (zero_first)
    ptx::wgmma_e4m3_rs_z<PVN>(acc, pa[0], vd.d[0]);
  else
    ptx::wgmma_e4m3_rs<PVN>(acc, pa[0], vd.d[0], 1u);
#pragma unroll
  for (int kc = 1; kc < KC; ++kc) ptx::wgmma_e4m3_rs<PVN>(acc, pa[kc], vd.d[kc], 1u);
  ptx::wgmma_commit();
}

// A use of the P̂ fragments after the wait that completes the batch reading them. ptxas (CUDA 13.0)
// ends a register-sourced wgmma operand's life at the instruction that issues it, so without a
// later use it hands those registers to the next tile's P̂ — written by the softmax while the batch
// is still reading them — and then serialises every wgmma of the kernel (info C7513). The use is
// a shared store predicated on `never` (0 at run time, unknown to the compilers), of the fragments'
// xor: a few integer ops per tile, no memory traffic.
__device__ __forceinline__ void keep_live(const u32 (&pa)[KC][4], u32 never, u32 saddr) {
  u32 x = 0;
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int i = 0; i < 4; ++i) x ^= pa[kc][i];
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n @p st.shared.u32 [%2], %0;\n}" ::"r"(x), "r"(never), "r"(saddr)
      : "memory");
}

// Two-level accumulation: O = O·a + R (the contract's order), after R's batch completed.
__device__ __forceinline__ void add_tile(float (&o)[PVN / 2], float (&r)[PVN / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < PVN / 2; ++i) {
    ptx::fence_operand(r[i]);
    o[i] = o[i] * alpha[(i >> 1) & 1] + r[i];
    ptx::fence_operand(o[i]);  // r dies here, before the next batch writes it
  }
}
__device__ __forceinline__ void rescale(float (&o)[NCH][PVN / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int ch = 0; ch < NCH; ++ch)
#pragma unroll
    for (int i = 0; i < PVN / 2; ++i) o[ch][i] *= alpha[(i >> 1) & 1];
}

// Releases the stage of tile `tile`: every wgmma that read it has completed (this warp's wait, and
// a warpgroup's wgmma completes for all of its warps at once). With a producer warpgroup each
// consumer warp arrives on the stage's "empty" barrier (after a proxy fence) for the producer to
// refill it. Without one, thread 0 refills the stage at once: only wgmma (async proxy) read it,
// so no other warp's arrival is needed — no per-tile round trip through a barrier.
__device__ __forceinline__ void release_stage(const WgmmaAttentionParams& P, const TileRows& rows, u32 sbase, int tile,
                                              int n_tiles, int lane, int tid) {
  const int slot = STAGES == 1 ? 0 : tile % STAGES;
  if (WS || RELEASE_BY_BARRIER) {
    ptx::fence_proxy_async_smem();
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(sbase + SM.bar_off + 8u * static_cast<u32>(STAGES + slot));
  }
  if (!WS) {
    if (tid == 0 && tile + STAGES < n_tiles) {
      if (RELEASE_BY_BARRIER)
        ptx::mbar_wait(sbase + SM.bar_off + 8u * static_cast<u32>(STAGES + slot), static_cast<u32>((tile / STAGES) & 1));
      issue_tile(P, rows, tile + STAGES, slot, sbase);
    }
    __syncwarp();
  }
}

// Stage address of tile `tile`, after waiting for its copies.
__device__ __forceinline__ u32 acquire_stage(u32 sbase, int tile) {
  const int slot = STAGES == 1 ? 0 : tile % STAGES;
  const u32 parity = static_cast<u32>((tile / STAGES) & 1);
  const u32 st = opaque(sbase + static_cast<u32>(SM.stages_off + slot * SM.stage_bytes));
  ptx::mbar_wait(sbase + SM.bar_off + 8u * static_cast<u32>(slot), parity);
  __syncwarp();
  return st;
}

// The consumer warpgroups: QKᵀ, softmax, P̂·V̂ for every tile, then the epilogue.
__device__ __forceinline__ void consume(const WgmmaAttentionParams& P, const BlockCoords& cta, const TileRows& rows, u32 sbase,
                                        int n_tiles, int t0) {
  const AttentionParams& p = P.a;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;

  float o[NCH][PVN / 2];
  float m[2], l[2];
  u32 qf[Q_IN_REGS ? KSTEPS : 1][4];
  u32 q_bad_bits = 0u;  // Q_IN_KERNEL: bit r = row g + 8r holds a non-finite value
  RowCtx rc;
  const int wg = warp >> 2;
  {
    const BlockCoords& c = cta;
    const i64 row = c.i0 + warp * 16 + g;
    if (Q_IN_KERNEL) {
      u32 qw[KSTEPS][4];
      rc.qs = quantize_q_here(p, c, row, t, qw, q_bad_bits);
      if (Q_IN_REGS) {
#pragma unroll
        for (int ks = 0; ks < (Q_IN_REGS ? KSTEPS : 1); ++ks)
#pragma unroll
          for (int i = 0; i < 4; ++i) qf[ks][i] = qw[ks][i];
      } else {
        store_q_tile(sbase + SM.q_off + static_cast<u32>(wg * 64 * RB), (warp & 3) * 16 + g, t, qw);
        // the stores (generic proxy) before the warpgroup's wgmmas (async proxy) read the tile
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(2u + static_cast<u32>(wg), 128u);
      }
    } else {
      if (Q_IN_REGS) load_q_fragments(p.q_codes + (c.q_row_base + row) * RB + 4 * t, qf);
      rc.qs = q_scale(p, c, warp, g);
    }
    if (!EARLY_WAIT) ptx::pdl_wait();  // the K scales, ΔS and the mask classes below
    rc.k_scale = k_scales<KG>(p, c);
    rc.ds = SMOOTH_Q ? delta_s_row(p, c) : nullptr;
    const i64 off = causal_offset(p, c);
    const i64 kv_last = seq_kv_len(p, c) - 1;
    rc.kv_last = static_cast<int>(kv_last);
    // clamped below at -9 (rows before the first visible key), so diag + 8 stays in int range
    rc.diag = static_cast<int>(CAUSAL ? max_<i64>(-9, last_visible(kv_last, row + off)) : kv_last);
    rc.mask_from = static_cast<int>(mask_from(p, c, off));
    if (MASK) {
      // loop tile i is KV tile t0 + i: the per-tile pointers start at t0
      rc.t0 = t0;
      rc.mask_from -= t0;
      rc.k_scale += t0 * KG;
      if (SMOOTH_Q) rc.ds += static_cast<i64>(t0) * BK;
      rc.cls = mask_class_row(p, c) + t0;
    }
  }
#pragma unroll
  for (int ch = 0; ch < NCH; ++ch)
#pragma unroll
    for (int i = 0; i < PVN / 2; ++i) o[ch][i] = 0.f;
  m[0] = m[1] = neg_inf();
  l[0] = l[1] = 0.f;
  rc.c2 = p.c2;
  rc.t = t;
  if (!Q_IN_REGS && !Q_IN_KERNEL) ptx::mbar_wait(sbase + SM.bar_off + 8u * (2 * STAGES), 0u);  // Q̂ tiles landed
  // 0 at run time (kv_len < 2^31), opaque to the compilers: see issue_qk.
  const u32 zero_base = static_cast<u32>(p.kv_len >> 40);

  if (PIPE) {
    // Software pipeline inside the warpgroup: the QKᵀ of tile j and the P̂·V̂ of tile j−1 are
    // issued back to back, then the softmax of tile j runs while P̂·V̂ (j−1) is still on the
    // tensor cores. Float ops and their order are those of the serial loop (alpha of tile j−1
    // is applied when its R is added), so the results are identical.
    if (n_tiles > 0) {
      i32 s[NS];
      u32 pa[KC][4];
      float alpha_prev[2];
      u32 st_prev = acquire_stage(sbase, 0);
      issue_qk(s, qf, st_prev, zero_base, sbase, wg);
      float dk[KH], dk_next[KH];
      load_k_scales(rc, 0, dk);
      load_k_scales(rc, min_(1, n_tiles - 1), dk_next);
      ptx::wgmma_wait<0>();
      softmax_any(s, dk, 0, rc, m, l, alpha_prev, pa, p);
      // R of P̂·V̂ (declared once: re-declared per tile, the compiler zeroes it before every batch)
      float r[PVN / 2];
#pragma unroll 1
      for (int tile = 1; tile < n_tiles; ++tile) {
        const u32 st = acquire_stage(sbase, tile);
        const VDescs vd = pv_descs(st_prev, 0);  // P̂·V̂ (j−1) operands ready before QKᵀ (j) is in flight
#pragma unroll
        for (int kc = 0; kc < KC; ++kc)
#pragma unroll
          for (int i = 0; i < 4; ++i) ptx::fence_operand(pa[kc][i]);
        if (!TWO_LEVEL) rescale(o, alpha_prev);
        issue_qk(s, qf, st, zero_base & static_cast<u32>(tile), sbase, wg);
        if (TWO_LEVEL)
          issue_pv(r, pa, vd, true);
        else
          issue_pv(o[0], pa, vd, false);
        // K scales one tile ahead: a load issued here and used after the wait stalled the warp
        // (ncu: the scale multiply waited on it, ~4% of the consumers' samples)
#pragma unroll
        for (int h = 0; h < KH; ++h) dk[h] = dk_next[h];
        load_k_scales(rc, min_(tile + 1, n_tiles - 1), dk_next);
        ptx::wgmma_wait<1>();  // S of tile j (the older batch) is complete
        u32 pa_next[KC][4];
        float alpha[2];
        softmax_any(s, dk, tile, rc, m, l, alpha, pa_next, p);
        ptx::wgmma_wait<0>();
        keep_live(pa, zero_base, sbase);
        if (TWO_LEVEL) {
          add_tile(o[0], r, alpha_prev);
        } else {
#pragma unroll
          for (int i = 0; i < PVN / 2; ++i) ptx::fence_operand(o[0][i]);
        }
        release_stage(P, rows, sbase, tile - 1, n_tiles, lane, tid);
        // An opaque copy after the wait: with a plain copy the compilers merge P̂ (j) into the
        // registers P̂·V̂ (j−1) is still reading (they do not know wgmma reads them asynchronously)
        // and ptxas serialises every wgmma (C7513).
#pragma unroll
        for (int kc = 0; kc < KC; ++kc)
#pragma unroll
          for (int i = 0; i < 4; ++i) asm volatile("mov.b32 %0, %1;" : "=r"(pa[kc][i]) : "r"(pa_next[kc][i]));
        alpha_prev[0] = alpha[0];
        alpha_prev[1] = alpha[1];
        st_prev = st;
      }
      if (TWO_LEVEL) {
        issue_pv(r, pa, pv_descs(st_prev, 0), true);
        ptx::wgmma_wait<0>();
        add_tile(o[0], r, alpha_prev);
      } else {
        rescale(o, alpha_prev);
        issue_pv(o[0], pa, pv_descs(st_prev, 0), false);
        ptx::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < PVN / 2; ++i) ptx::fence_operand(o[0][i]);
      }
      release_stage(P, rows, sbase, n_tiles - 1, n_tiles, lane, tid);
    }
  } else {
    float dk_next[KH];
    load_k_scales(rc, 0, dk_next);
#pragma unroll 1
    for (int tile = 0; tile < n_tiles; ++tile) {
      const u32 st = acquire_stage(sbase, tile);
      if (MASK && skip_tile(rc, tile, dk_next, m, p)) {  // dk_next: this tile's K scales
        load_k_scales(rc, min_(tile + 1, n_tiles - 1), dk_next);
        release_stage(P, rows, sbase, tile, n_tiles, lane, tid);
        continue;
      }
      i32 s[NS];
      issue_qk(s, qf, st, zero_base & static_cast<u32>(tile), sbase, wg);
      // K scales one tile ahead (loaded before the loop for tile 0): an L2 load issued beside
      // the batch still stalled the softmax at short sequences (ncu, 1K: L1TEX waits 34%)
      float dk[KH];
#pragma unroll
      for (int h = 0; h < KH; ++h) dk[h] = dk_next[h];
      load_k_scales(rc, min_(tile + 1, n_tiles - 1), dk_next);
      ptx::wgmma_wait<0>();
      u32 pa[KC][4];
      float alpha[2];
      softmax_any(s, dk, tile, rc, m, l, alpha, pa, p);

      if (!TWO_LEVEL) rescale(o, alpha);
      if (TWO_LEVEL && PV_RING) {
        // Chunk ch+1's batch is on the tensor cores while chunk ch's R is added (two R buffers:
        // S is dead by now, so they take its registers). Same ops, same order: same results.
        float r[2][PVN / 2];
        issue_pv(r[0], pa, pv_descs(st, 0), true);
#pragma unroll
        for (int ch = 0; ch < NCH; ++ch) {
          if (ch + 1 < NCH) {
            issue_pv(r[(ch + 1) & 1], pa, pv_descs(st, ch + 1), true);
            ptx::wgmma_wait<1>();
          } else {
            ptx::wgmma_wait<0>();
            keep_live(pa, zero_base, sbase);
          }
          add_tile(o[ch], r[ch & 1], alpha);
        }
      } else {
#pragma unroll
        for (int ch = 0; ch < NCH; ++ch) {
          if (TWO_LEVEL) {
            float r[PVN / 2];
            issue_pv(r, pa, pv_descs(st, ch), true);
            ptx::wgmma_wait<0>();
            add_tile(o[ch], r, alpha);
          } else {
            issue_pv(o[ch], pa, pv_descs(st, ch), false);
            ptx::wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < PVN / 2; ++i) ptx::fence_operand(o[ch][i]);
          }
        }
      }
      release_stage(P, rows, sbase, tile, n_tiles, lane, tid);
    }
  }

  // ---- epilogue (attention_epilogue.cuh): the thread's rows g, g+8 of its warp; pair n of a row
  // is channels 8n + 2t, +1 = O registers 4·(n % (PVN/8)) + 2·half + {0, 1} of chunk n / (PVN/8).
  // Wide heads recompute the block coordinates (see WIDE) and load δV/μ at each use.
  const BlockCoords c = WIDE ? block_coords(p) : cta;
  epilogue<1, NCH, PVN / 8, D_V, !WIDE, true>(
      p, c, lane, c.i0 + warp * 16 + g, 2 * t, c.bhk * D_V + 2 * t, t == 0, [&](int hf) { return l[hf]; }, [&](int hf) { return m[hf]; },
      [&](int hf, int n, int e) { return o[n / (PVN / 8)][4 * (n % (PVN / 8)) + 2 * hf + e]; },
      QRowsOf<Q_IN_KERNEL>::get(q_bad_bits, t, p, c));
}

__device__ __forceinline__ void attention(const WgmmaAttentionParams& P) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const AttentionParams& p = P.a;
  if (EARLY_WAIT) ptx::pdl_wait();
  if (!block_exists(p)) return;
  const u32 sbase = (ptx::smem_addr(smem) + 1023u) & ~1023u;
  const int tid = static_cast<int>(threadIdx.x);
  // The block coordinates (u32 divisions by the head counts) once, for every later step.
  const BlockCoords c = block_coords(p);
  int n_tiles = tile_count(p, c), t0 = 0;
  if (MASK) {  // from the first to the last tile the tensor mask leaves anything visible in
    int t1;
    mask_tile_range(p, c, n_tiles, t0, t1);
    n_tiles = t1 - t0;
  }
  const TileRows rows = tile_rows(c, t0);

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      ptx::mbar_init(sbase + SM.bar_off + 8u * s, 1);                         // full: the producer
      ptx::mbar_init(sbase + SM.bar_off + 8u * (STAGES + s), WARPS);          // empty: consumer warps
    }
    ptx::mbar_init(sbase + SM.bar_off + 8u * (2 * STAGES), 1);  // q_full
    ptx::fence_mbar_init();
    if (!Q_IN_REGS && !Q_IN_KERNEL) ptx::prefetch_tensormap(&P.tm_q);
    ptx::prefetch_tensormap(&P.tm_k);
    ptx::prefetch_tensormap(&P.tm_v);
  }
  __syncthreads();

  if (WS) {
    if (tid >= CTHREADS) {
      // producer warpgroup: one thread issues every copy, the stage's previous use released first
      ptx::setmaxnreg_dec<PRODUCER_REGS>();
      if (tid == CTHREADS) {
        if (!EARLY_WAIT) ptx::pdl_wait();
        issue_q(P, c, sbase);
#pragma unroll 1
        for (int tile = 0; tile < n_tiles; ++tile) {
          const int slot = STAGES == 1 ? 0 : tile % STAGES;
          if (tile >= STAGES)
            ptx::mbar_wait(sbase + SM.bar_off + 8u * static_cast<u32>(STAGES + slot),
                           static_cast<u32>((tile / STAGES - 1) & 1));
          issue_tile(P, rows, tile, slot, sbase);
        }
      }
    } else {
      ptx::setmaxnreg_inc<CONSUMER_REGS>();
      consume(P, c, rows, sbase, n_tiles, t0);
    }
  } else {
    if (tid == 0) {
      if (!EARLY_WAIT) ptx::pdl_wait();
      issue_q(P, c, sbase);
      for (int tile = 0; tile < min_(STAGES, n_tiles); ++tile) issue_tile(P, rows, tile, tile, sbase);
    }
    __syncwarp();
    consume(P, c, rows, sbase, n_tiles, t0);
  }
}

}  // namespace wga

extern "C" __global__ void __launch_bounds__(wga::THREADS, wga::MIN_CTAS)
    sage2_attention_wgmma(const __grid_constant__ sage2::dev::WgmmaAttentionParams p) {
  attn_common::check_block_dim<wga::THREADS>();
  wga::attention(p);
}
