// The wgmma attention family's descriptor (jit/attention_family.hpp).
#include "kernels/family_wgmma.hpp"

#include <cstddef>
#include <new>
#include <string>

#include "kernels/attention_family.hpp"
#include "templates/wgmma_params.cuh"

namespace sage2::kernels {
namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }
std::string s(std::int64_t v) { return std::to_string(v); }

const char* const kWho = "attention (wgmma family): ";

// The fp32 O of a 64-row tile must fit the registers of one warpgroup.
constexpr int kMaxHeadDim = 256;

static_assert(sizeof(dev::WgmmaAttentionParams) <= kMaxAttentionParamBytes);
static_assert(sizeof(TmaMap) == sizeof(dev::TmaDesc) && alignof(TmaMap) == alignof(dev::TmaDesc),
              "jit::TmaMap must mirror the kernel's TmaDesc");

class WgmmaFamily final : public AttentionFamilyDesc {
 public:
  constexpr WgmmaFamily()
      : AttentionFamilyDesc(KernelFamily::AttentionWgmma, "attn_wgmma", "wgmma", "attention_wgmma.cuh",
                            "sage2_attention_wgmma", /*preference=*/1,  // the faster family wherever it runs
                            "runs 8-bit QK with FP8 P̃V on sm_90a up to head dim 256",
                            /*reference_tile=*/TileConfig{128, 128, 8, 2}, sizeof(dev::WgmmaAttentionParams)) {
    // Q, K and V codes, read through TMA (tma_specs below)
    tma_maps = 3;
    tma_offsets[0] = offsetof(dev::WgmmaAttentionParams, tm_q);
    tma_offsets[1] = offsetof(dev::WgmmaAttentionParams, tm_k);
    tma_offsets[2] = offsetof(dev::WgmmaAttentionParams, tm_v);
  }

  bool runs(Arch arch, int qk_bits, int head_dim) const override {
    return arch == Arch::Sm90a && qk_bits == 8 && head_dim <= kMaxHeadDim;
  }

  // One 64-row wgmma tile per consumer warpgroup, 8-bit codes, sm_90a.
  void validate(const KernelSpec& spec) const override {
    const TileConfig& t = spec.tile;
    if (spec.arch != Arch::Sm90a)
      bad(std::string("kernel spec: the wgmma family needs sm_90a, got ") + arch_name(spec.arch));
    if (spec.qk_bits != 8) bad("kernel spec: the wgmma family is 8-bit only, got qk_bits=4");
    if (spec.pv_fp16) bad("kernel spec: the wgmma family runs FP8 P̃V only (FP16 P̃V: the mma family)");
    if (spec.pv_acc16) bad("kernel spec: the wgmma family accumulates P̃V in fp32 only (pv_acc16: the mma family off sm_90a)");
    if (t.warps % 4 != 0) bad("kernel spec: the wgmma family needs whole warpgroups, got warps=" + s(t.warps));
    if (t.bq % (64 * (t.warps / 4)) != 0)
      bad("kernel spec: wgmma bq=" + s(t.bq) + " must be a multiple of 64 per warpgroup");
  }

  MmaShape mma_shape(int) const override { return MmaShape::WGMMA_M64NK32_S8; }

  // Every tile: Q̂ goes to the A fragments or to the shared-memory tile the TMA copy would fill.
  // Not with smooth-Q (q̄ is a mean over the block, which no thread holds).
  bool q_in_kernel_ok(const KernelSpec& spec) const override { return !spec.smooth_q; }

  // attention_wgmma.cuh: EARLY_WAIT, or Q quantized before the wait.
  bool waits_for_previous() const override { return true; }

  AttentionKernelConfig kernel_config(const KernelSpec& spec) const override {
    const WgmmaKernelConfig k = wgmma_kernel_config(spec);
    return AttentionKernelConfig{k.threads, k.min_ctas, k.smem};
  }

  void check(const KernelSpec& spec, int max_smem_optin) const override {
    if (spec.family != family) bad(kWho + std::string("spec family is ") + family_name(spec.family));
    spec.validate();  // sm_90a, 8-bit, whole warpgroups
    const TileConfig& t = spec.tile;
    if (t.warps != 4 && t.warps != 8) bad(kWho + std::string("warps=") + s(t.warps) + " (1 or 2 consumer warpgroups: 4 or 8)");
    if (t.bq != 16 * t.warps)
      bad(kWho + std::string("bq=") + s(t.bq) + " must be 16*warps=" + s(16 * t.warps) + " (one 64-row tile per warpgroup)");
    if (t.bk != 64 && t.bk != 128) bad(kWho + std::string("bk=") + s(t.bk) + " (must be 64 or 128)");
    if (t.stages < 1 || t.stages > 4) bad(kWho + std::string("stages=") + s(t.stages) + " outside 1..4");
    if (spec.head_dim > kMaxHeadDim)
      throw Error(ErrorCode::Unsupported, kWho + std::string("head_dim=") + s(spec.head_dim) +
                                              " > 256 (the fp32 O of a 64-row tile does not fit the registers; "
                                              "use the mma family)");
    check_shared_memory(spec, wgmma_kernel_config(spec).smem, max_smem_optin, kWho, "use fewer stages or bk 64");
  }

  // 1 or 2 consumer warpgroups of 64 rows, bk 64/128, 2..4 stages (1 stage cannot overlap copies
  // with compute).
  const std::vector<TileConfig>& candidates() const override {
    static const std::vector<TileConfig> v = [] {
      std::vector<TileConfig> t;
      for (int warps : {8, 4})
        for (int bk : {128, 64})
          for (int stages : {2, 3, 4}) t.push_back(TileConfig{16 * warps, bk, warps, stages});
      return t;
    }();
    return v;
  }

  // Up to head dim 128: one warpgroup per CTA (three CTAs per SM hide each other's softmax),
  // serial loop, bk 128, 2 stages. Wider: the producer design (two consumer warpgroups with 240
  // registers each, bk 128, 2 stages), where one warpgroup per CTA gets only two CTAs per SM and
  // bk 64 (measured on the H200, hd 136–256: +9–19 % at 4K, +19–43 % at 16K; bench/NOTES.md,
  // session 11). Then the stages, then bk, lowered until the shared memory fits `max_smem_optin`.
  TileConfig default_tile(const KernelSpec& attention_spec, int max_smem_optin) const override {
    if (attention_spec.head_dim > kMaxHeadDim)
      throw Error(ErrorCode::Unsupported,
                  kWho + std::string("head_dim=") + s(attention_spec.head_dim) + " > 256; use the mma family");
    KernelSpec k = attention_spec;
    k.family = family;
    if (attention_spec.head_dim > 128) {
      k.tile = TileConfig{128, 128, 8, 2};
      if (wgmma_kernel_config(k).smem <= static_cast<std::size_t>(max_smem_optin)) return k.tile;
    }
    const int bk0 = attention_spec.head_dim <= 128 ? 128 : 64;
    for (int bk : {bk0, 64}) {
      for (int stages = 2; stages >= 1; --stages) {
        k.tile = TileConfig{64, bk, 4, stages};
        if (wgmma_kernel_config(k).smem <= static_cast<std::size_t>(max_smem_optin)) return k.tile;
      }
    }
    throw Error(ErrorCode::Unsupported, kWho + std::string("no tile fits ") + s(max_smem_optin) +
                                            " bytes of shared memory at head_dim=" + s(attention_spec.head_dim));
  }

  // The shared AttentionParams behind three tensor-map slots the runtime fills.
  void write_params(const KernelSpec& spec, const QuantBuffers& b, const AttentionArgs& args,
                    const AttentionChunk& chunk, void* out) const override {
    if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(args.delta_s) & 15u) != 0)
      bad("wgmma attention params: the ΔS workspace must be 16-byte aligned (bulk copies)");
    auto* p = new (out) dev::WgmmaAttentionParams{};  // built in place: maps zero until the runtime adds them
    p->a = make_attention_params(spec, b, args, chunk);
  }

  // ([B] is QuantBuffers::token_batch(): 1 for varlen's packed rows)
  // Q codes {row_bytes, B·Hq·q_len_pad} box {panel, 64} (read when Q̂ stays in shared memory);
  // K codes {row_bytes, B·Hkv·kv_len_pad} box {panel, bk}; V codes {kv_len_pad, B·Hkv·d_v} box
  // {bk, d_v}. Throws InvalidArgument when the buffers do not match the spec or exceed TMA's limits.
  void tma_specs(const KernelSpec& spec, const QuantBuffers& b, const void* workspace, TmaMapSpec* out) const override {
    check_buffers_match(spec, b, "wgmma tensor maps");
    if (!workspace) bad("wgmma tensor maps: workspace is null");
    if ((reinterpret_cast<std::uintptr_t>(workspace) & 255u) != 0)
      bad("wgmma tensor maps: the workspace must be 256-byte aligned");
    const QuantBuffers::Offsets o = b.offsets();
    const auto* base = static_cast<const char*>(workspace);
    const std::int64_t q_rows = b.token_batch() * b.p.q_heads * b.q_len_pad;
    const std::int64_t k_rows = b.token_batch() * b.p.kv_heads * b.kv_len_pad;
    const std::int64_t v_rows = b.token_batch() * b.p.kv_heads * b.d_v;
    // TMA coordinates are int32: the row of the last tile must fit.
    constexpr std::int64_t kLimit = std::int64_t(1) << 31;
    if (q_rows >= kLimit || k_rows >= kLimit || v_rows >= kLimit || b.kv_len_pad >= kLimit)
      bad("wgmma tensor maps: " + s(k_rows) + " K rows / " + s(v_rows) + " V rows exceed the 2^31 TMA coordinate range");
    auto map = [](const char* at, std::int64_t inner, std::int64_t rows, int swizzle, int box_rows) {
      TmaMapSpec m;
      m.base = at;
      m.dims[0] = static_cast<std::uint64_t>(inner);
      m.dims[1] = static_cast<std::uint64_t>(rows);
      m.row_stride = static_cast<std::uint64_t>(inner);
      m.swizzle_bytes = swizzle;
      m.box[0] = static_cast<std::uint32_t>(swizzle);
      m.box[1] = static_cast<std::uint32_t>(box_rows);
      return m;
    };
    const int panel = dev::wg_panel(b.row_bytes);
    out[0] = map(base + o.q_codes, b.row_bytes, q_rows, panel, 64);
    out[1] = map(base + o.k_codes, b.row_bytes, k_rows, panel, spec.tile.bk);
    out[2] = map(base + o.v_codes, b.kv_len_pad, v_rows, spec.tile.bk, b.d_v);
  }
};

constinit const WgmmaFamily kWgmmaFamily;

}  // namespace

WgmmaKernelConfig wgmma_kernel_config(const KernelSpec& spec) {
  WgmmaKernelConfig k;
  const int rb = qk_row_bytes(spec.head_dim, 8);
  const int dv = v_dim_padded(spec.head_dim);
  const TileConfig& t = spec.tile;
  k.threads = dev::wg_threads(t.warps);
  k.consumer_groups = dev::wg_consumer_groups(t.warps);
  k.producer_group = dev::wg_producer_wg(t.warps);
  k.min_ctas = dev::wg_min_ctas(t.warps, dv, t.stages, spec.smooth_q, spec.mask != 0);
  k.pipelined = dev::wg_pipelined(dv, t.stages, t.warps, spec.smooth_q);
  k.panel = dev::wg_panel(rb);
  k.pv_chunks = dev::wg_pv_chunks(dv, t.warps);
  k.pv_n = dev::wg_pv_n(dv, t.warps);
  k.smem = static_cast<std::size_t>(dev::wg_smem_layout(t.bq, t.bk, rb, dv, t.stages, spec.smooth_q, t.warps).total);
  k.q_in_smem = dev::wg_q_in_smem(rb, dv, t.stages, t.warps, spec.smooth_q);
  return k;
}

const AttentionFamilyDesc& wgmma_family() noexcept { return kWgmmaFamily; }

}  // namespace sage2::kernels
