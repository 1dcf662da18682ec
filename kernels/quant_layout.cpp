#include "kernels/quant_layout.hpp"

#include "base/enum_names.hpp"

namespace sage2::kernels {

namespace {
constexpr base::Named<MmaShape> kMmaShapeNames[] = {{MmaShape::M16N8K64_S4, "m16n8k64.s4"},
                                                    {MmaShape::M16N8K32_S8, "m16n8k32.s8"},
                                                    {MmaShape::WGMMA_M64NK32_S8, "wgmma.m64nNk32.s8"}};
}  // namespace

const char* mma_shape_name(MmaShape s) noexcept { return base::name_of(s, kMmaShapeNames); }

int QuantLayout::q_groups_per_block() const { return warps * 8; }

int QuantLayout::q_warp(int r) const {
  if (shape == MmaShape::WGMMA_M64NK32_S8) {
    const int groups = warps / 4;
    const int rows_per_group = bq / groups;
    const int wg = r / rows_per_group;
    const int in_tile = (r % rows_per_group) % 64;
    return wg * 4 + in_tile / 16;
  }
  return r / (bq / warps);
}

int QuantLayout::q_group(int r) const { return q_warp(r) * 8 + r % 8; }

int QuantLayout::v_slot(int key) const {
  if (!v_permuted()) return key;
  const int l = key & 15;
  if (v_fp16) return (key & ~15) + 2 * (l >> 2) + (l & 1) + 8 * ((l >> 1) & 1);
  return (key & ~15) + 4 * ((l & 7) >> 1) + (l & 1) + 2 * (l >> 3);
}

int QuantLayout::v_key_of_slot(int slot) const {
  if (!v_permuted()) return slot;
  const int p = slot & 15;
  if (v_fp16) return (slot & ~15) + 4 * ((p & 7) >> 1) + 2 * (p >> 3) + (p & 1);
  return (slot & ~15) + 2 * (p >> 2) + (p & 1) + 8 * ((p >> 1) & 1);
}

std::vector<int> q_group_table(const QuantLayout& l) {
  std::vector<int> t(static_cast<std::size_t>(l.bq));
  for (int r = 0; r < l.bq; ++r) t[static_cast<std::size_t>(r)] = l.q_group(r);
  return t;
}

}  // namespace sage2::kernels
