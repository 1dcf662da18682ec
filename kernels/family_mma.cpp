// The mma.sync attention family's descriptor (kernels/attention_family.hpp).
#include "kernels/family_mma.hpp"

#include <new>
#include <string>

#include "kernels/attention_family.hpp"
#include "templates/attention_params.cuh"

namespace sage2::kernels {
namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }
std::string s(std::int64_t v) { return std::to_string(v); }

const char* const kWho = "attention (mma family): ";

static_assert(sizeof(dev::AttentionParams) <= kMaxAttentionParamBytes);

class MmaFamily final : public AttentionFamilyDesc {
 public:
  constexpr MmaFamily()
      : AttentionFamilyDesc(KernelFamily::AttentionMma, "attn_mma", "mma", "attention_mma.cuh", "sage2_attention_mma",
                            /*preference=*/0,
                            "runs 8-bit QK on every arch (4-bit where the arch has INT4 mma: not on Blackwell), "
                            "FP8 or FP16 P̃V, at every head dim",
                            /*reference_tile=*/TileConfig{128, 64, 4, 1}, sizeof(dev::AttentionParams)) {}

  bool runs(Arch arch, int qk_bits, int) const override {
    const ArchInfo* i = find_arch_info(arch);
    return i && (qk_bits != 4 || i->int4);
  }
  bool runs_pv_fp16() const override { return true; }

  MmaShape mma_shape(int qk_bits) const override {
    return qk_bits == 4 ? MmaShape::M16N8K64_S4 : MmaShape::M16N8K32_S8;
  }

  // Whole 16-row tiles per warp (the quantize kernels' Q groups follow the warps' rows).
  void validate(const KernelSpec& spec) const override {
    const TileConfig& t = spec.tile;
    if (t.bq % (16 * t.warps) != 0)
      bad("kernel spec: bq=" + s(t.bq) + " must be a multiple of 16*warps=" + s(16 * t.warps));
    if (spec.qk_bits == 4 && !arch_info(spec.arch).int4)
      bad(std::string("kernel spec: qk_bits=4 needs INT4 tensor-core mma, which ") + arch_name(spec.arch) +
          " does not have (use qk_bits=8)");
  }

  void check(const KernelSpec& spec, int max_smem_optin) const override {
    if (spec.family != family) bad(kWho + std::string("spec family is ") + family_name(spec.family));
    spec.validate();
    const TileConfig& t = spec.tile;
    if (t.bk % 32 != 0) bad(kWho + std::string("bk=") + s(t.bk) + " must be a multiple of 32 (k32 FP8 P·V chunks)");
    if (t.bq % (16 * t.warps) != 0)
      bad(kWho + std::string("bq=") + s(t.bq) + " must be a multiple of 16*warps=" + s(16 * t.warps));
    if (t.stages < 1 || t.stages > 4) bad(kWho + std::string("stages=") + s(t.stages) + " outside 1..4");
    if (dev::attn_m_tiles(t.bq, t.warps) > 4)
      bad(kWho + std::string("bq/warps=") + s(t.bq / t.warps) + " query rows per warp (at most 64)");
    check_shared_memory(spec, mma_kernel_config(spec).smem, max_smem_optin, kWho, "use fewer stages, a smaller bq or bk");
  }

  AttentionKernelConfig kernel_config(const KernelSpec& spec) const override {
    const MmaKernelConfig k = mma_kernel_config(spec);
    return AttentionKernelConfig{k.threads, /*min_ctas=*/1, k.smem};
  }

  // The heuristic's preference list (most preferred first). {64,64,4,2}: no spills at head dims
  // 64/128 on sm_89 and sm_90a and the fastest tile measured on the H100 before tuning existed
  // (tests/gpu/test_attention.cpp perf case); then fewer stages, 8 warps × 16 rows, a smaller bk.
  TileConfig default_tile(const KernelSpec& attention_spec, int max_smem_optin) const override {
    static const TileConfig kPreferred[] = {{64, 64, 4, 2}, {64, 64, 4, 1}, {128, 64, 8, 2}, {64, 32, 4, 1}};
    KernelSpec k = attention_spec;
    std::string last;
    for (const TileConfig& t : kPreferred) {
      k.tile = t;
      try {
        check(k, max_smem_optin);
        return t;
      } catch (const Error& e) {
        last = e.what();
      }
    }
    throw Error(ErrorCode::Unsupported, std::string("no tile configuration of the ") + family_name(k.family) +
                                            " family fits head dim " + s(k.head_dim) + " in " + s(max_smem_optin) +
                                            " bytes of shared memory" + (last.empty() ? std::string() : ": " + last));
  }

  // (bq, warps) ∈ {(64,4), (128,4), (128,8), (256,8)} × bk ∈ {32, 64, 128} × stages ∈ {1, 2, 3}:
  // 16-row and 32-row warps, 4 and 8 warps per CTA.
  const std::vector<TileConfig>& candidates() const override {
    static const std::vector<TileConfig> v = [] {
      std::vector<TileConfig> t;
      const int shapes[][2] = {{64, 4}, {128, 4}, {128, 8}, {256, 8}};  // (bq, warps)
      for (const auto& sh : shapes)
        for (int bk : {32, 64, 128})
          for (int stages : {1, 2, 3}) t.push_back(TileConfig{sh[0], bk, sh[1], stages});
      return t;
    }();
    return v;
  }

  // The kernel takes the AttentionParams every family shares, nothing else.
  void write_params(const KernelSpec& spec, const QuantBuffers& b, const AttentionArgs& args,
                    const AttentionChunk& chunk, void* out) const override {
    new (out) dev::AttentionParams(make_attention_params(spec, b, args, chunk));  // built in place
  }
};

constinit const MmaFamily kMmaFamily;

}  // namespace

const AttentionFamilyDesc& mma_family() noexcept { return kMmaFamily; }

MmaKernelConfig mma_kernel_config(const KernelSpec& spec) {
  MmaKernelConfig k;
  const int rb = qk_row_bytes(spec.head_dim, spec.qk_bits);
  const int dv = v_dim_padded(spec.head_dim);
  const TileConfig& t = spec.tile;
  k.threads = dev::attn_threads(t.warps);
  k.m_tiles = dev::attn_m_tiles(t.bq, t.warps);
  if (k.m_tiles < 1) return k;
  k.v_slices = dev::attn_v_slices(dv, k.m_tiles);
  k.v_slice = dev::attn_v_slice(dv, k.m_tiles);
  k.smem = static_cast<std::size_t>(
      dev::attn_smem_layout(t.bq, t.bk, t.warps, rb, dv, t.stages, spec.smooth_q, v_code_bytes(spec.pv_fp16)).total);
  return k;
}

}  // namespace sage2::kernels
