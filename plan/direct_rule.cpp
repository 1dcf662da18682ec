#include "plan/direct_rule.hpp"

#include <string>

#include "kernels/direct.hpp"
#include "plan/attention_problem.hpp"

namespace sage2::plan {

std::int64_t direct_max_rows(kernels::Arch arch) noexcept {
  return arch == kernels::Arch::Sm90a ? kDirectMaxRowsSm90 : kDirectMaxRowsOther;
}

bool auto_prefers_direct(std::int64_t rows, std::int64_t kv_len, double work, std::int64_t q_rows,
                         kernels::Arch arch) noexcept {
  if (rows > direct_max_rows(arch)) return false;
  if (arch != kernels::Arch::Sm90a) return true;
  return rows <= kDirectAnyKeysRowsSm90 || (rows <= kDirectLongKeysRowsSm90 && kv_len >= 2 * rows) ||
         (work <= kDirectSmallWorkSm90 && q_rows <= kDirectSmallWorkQRowsSm90);
}

bool choose_direct_path(const AttentionProblem& p, SmallQPath path, kernels::Arch arch) {
  if (path == SmallQPath::Quantized) return false;
  const std::int64_t rows = p.q_len * (p.q_heads / p.kv_heads);
  if (path == SmallQPath::Direct) {
    if (p.mask != 0)
      throw Error(ErrorCode::InvalidArgument,
                  "params.small_q_path=direct cannot be combined with params.mask (the direct path has no masks)");
    if (p.head_dim > kernels::kDirectMaxHeadDim)
      throw Error(ErrorCode::Unsupported, "params.small_q_path=direct runs head dims up to " +
                                              std::to_string(kernels::kDirectMaxHeadDim) + ", got " +
                                              std::to_string(p.head_dim));
    return true;
  }
  const std::int64_t q_rows = p.batch * p.q_heads * p.q_len;  // B·Hq·Nq (exact in a double: < 2^53)
  const double work = static_cast<double>(q_rows) * static_cast<double>(p.kv_len) * p.head_dim;
  return p.mask == 0 && !p.varlen && p.head_dim <= kDirectAutoMaxHeadDim &&
         auto_prefers_direct(rows, p.kv_len, work, q_rows, arch);
}

}  // namespace sage2::plan
