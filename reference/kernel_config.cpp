#include "reference/kernel_config.hpp"

#include <optional>
#include <string>

#include "kernels/attention_family.hpp"
#include "kernels/quant_layout.hpp"
#include "reference/internal.hpp"

namespace sage2::reference {
namespace {

// The fields KernelConfig and kernels::KernelSpec share by name and type, copied either way.
template <class From, class To>
void copy_shared_fields(const From& from, To& to) {
  to.head_dim = from.head_dim;
  to.causal = from.causal;
  to.qk_bits = from.qk_bits;  // KernelConfig is public: its fields are named like QuantOptions'
  to.smooth_q = from.smooth_q;
  to.smooth_k = from.smooth_k;
  to.smooth_v = from.smooth_v;
  to.in_dtype = from.in_dtype;
  to.out_dtype = from.out_dtype;
  to.two_level_accum = from.two_level_accum;
  to.return_lse = from.return_lse;
}

}  // namespace

kernels::KernelSpec kernel_spec(const KernelConfig& c) {
  kernels::KernelSpec s;
  s.arch = kernels::parse_arch(c.arch);
  const int pvp = static_cast<int>(c.pv_precision);
  if (pvp < 0 || pvp > 2) detail::bad_arg("config.pv_precision=" + std::to_string(pvp) + " is not a PvPrecision");
  s.pv_fp16 = kernels::resolve_pv_fp16(s.arch, c.pv_precision);
  const int pva = static_cast<int>(c.pv_accum);
  if (pva < 0 || pva > 3) detail::bad_arg("config.pv_accum=" + std::to_string(pva) + " is not a PvAccum");
  s.pv_acc16 = kernels::resolve_pv_acc16(s.arch, s.pv_fp16, c.pv_accum);
  if (c.family == AttentionFamily::Auto) {
    s.family = kernels::default_attention_family(s.arch, c.qk_bits, c.head_dim, s.pv_fp16);
  } else {
    const std::optional<kernels::KernelFamily> f = kernels::parse_attention_family(attention_family_name(c.family));
    if (!f)
      detail::bad_arg("config.family=" + std::to_string(static_cast<int>(c.family)) + " is not an attention family");
    s.family = *f;
  }
  s.consumer = s.family;
  copy_shared_fields(c, s);
  s.tile = kernels::TileConfig{c.tile.bq, c.tile.bk, c.tile.warps, c.tile.stages};
  return s;
}

KernelConfig kernel_config(const kernels::KernelSpec& s) {
  if (!kernels::find_attention_family(s.family))
    detail::bad_arg(std::string("spec.family=") + kernels::family_name(s.family) + " is not an attention family");
  KernelConfig c;
  for (AttentionFamily f : {AttentionFamily::Mma, AttentionFamily::Wgmma})
    if (kernels::parse_attention_family(attention_family_name(f)) == s.family) c.family = f;
  c.arch = kernels::arch_name(s.arch);
  copy_shared_fields(s, c);
  c.tile = KernelTile{s.tile.bq, s.tile.bk, s.tile.warps, s.tile.stages};
  c.pv_precision = s.pv_fp16 ? PvPrecision::Fp16 : PvPrecision::Fp8;
  c.pv_accum = s.pv_acc16 ? PvAccum::Fp16 : PvAccum::Fp32;
  return c;
}

StageLayout stage_layout(const kernels::QuantBuffers& b, const KernelConfig& config) {
  StageLayout l;
  l.config = config;
  b.p.copy_sizes_to(l);
  l.head_dim = b.p.head_dim;
  l.q_blocks = b.q_blocks;
  l.k_blocks = b.k_blocks;
  l.q_len_pad = b.q_len_pad;
  l.kv_len_pad = b.kv_len_pad;
  l.d_qk = b.d_qk;
  l.row_bytes = b.row_bytes;
  l.d_v = b.d_v;
  l.stats_chunk = b.stats_chunk;
  l.stats_chunks = b.stats_chunks;
  const kernels::QuantLayout& g = b.layout;
  l.q_groups_per_block = g.q_groups_per_block();
  l.k_groups_per_block = g.k_groups_per_block();
  l.q_group_of_row = kernels::q_group_table(g);
  for (int j = 0; j < g.bk; ++j) l.k_group_of_key.push_back(g.k_group(j));
  for (int j = 0; j < 16; ++j) l.v_slot_in_16.push_back(g.v_slot(j));
  l.v_code_bytes = kernels::v_code_bytes(g.v_fp16);
  return l;
}

kernels::QuantBuffers quant_buffers(const StageLayout& l) {
  return kernels::quant_buffers(kernels::QuantProblem{{l.batch, l.q_heads, l.kv_heads, l.q_len, l.kv_len, l.head_dim}},
                            kernel_spec(l.config));
}

namespace detail {

bool same_layout(const StageLayout& a, const StageLayout& b) {
  auto layout_only = [](StageLayout l) {
    KernelConfig& c = l.config;
    c.arch.clear();
    c.causal = CausalMode::None;
    c.tile.stages = 1;
    c.in_dtype = c.out_dtype = DType::F16;
    c.two_level_accum = true;
    c.return_lse = false;
    // the statistics' scratch (its chunks: the sampled stage has one per sampled unit), which no
    // attention reads
    l.stats_chunk = 0;
    l.stats_chunks = 0;
    return l;
  };
  return layout_only(a) == layout_only(b);
}

}  // namespace detail

}  // namespace sage2::reference
