// A kernel's output against a reference output of the same [batch][heads][q_len][dim] order (the
// emulation's), and the worst element described against the exact result too: when a bound
// fails, whether the kernel or the emulation's model sits farther from fp64 says which is off.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sage2/reference.hpp"

namespace sage2::test {

// EmulationOptions::p_boundary_rel for the attention tests. A P̂ code is decided by the kernel's
// exp2(arg) with ex2.approx (relative error ~2^-22) and fp32 scores summed in another order than
// the emulation's (a few ulps of |arg| <= ~2^6: ~2^-16 of P̃): 2^-14 leaves a 4x margin. About
// one P̂ in a thousand then counts as undecided; its flip moves O by up to ~1/16 of that key's
// share, which the max-abs bounds (a few ulps of max |O|) cannot absorb on sharp inputs.
constexpr float kPBoundaryRel = 1.f / 16384;

struct OutputDiff {
  double max_abs = 0, rel_l1 = 0, ref_max = 0;
  double max_excess = 0;       // max of |out − ref| − slack (slack 0 where none is given)
  std::int64_t nonfinite = 0;  // non-finite outputs (left out of the other figures)
  std::size_t worst = 0;       // index of the largest |out − ref| − slack
};

// `slack` (EmulationResult::o_slack, or empty): how far each element may move at P̂ rounding
// boundaries.
inline OutputDiff output_diff(const std::vector<float>& ref_o, const std::vector<float>& out,
                              const std::vector<float>& slack = {}) {
  OutputDiff d;
  double num = 0, den = 0;
  d.max_excess = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++d.nonfinite;
      continue;
    }
    const double e = std::fabs(static_cast<double>(out[i]) - ref_o[i]);
    d.max_abs = std::max(d.max_abs, e);
    const double x = e - (slack.empty() ? 0.0 : slack[i]);
    if (x > d.max_excess) {
      d.max_excess = x;
      d.worst = i;
    }
    d.ref_max = std::max(d.ref_max, std::fabs(static_cast<double>(ref_o[i])));
    num += e;
    den += std::fabs(static_cast<double>(ref_o[i]));
  }
  d.rel_l1 = den > 0 ? num / den : num;
  d.max_excess = std::max(d.max_excess, 0.0);
  return d;
}

// "(b, h, row, col): kernel X, emulation Y (slack S), exact Z; the row's max |Δ| vs exact: kernel A,
// emulation B" for element i of the outputs.
inline std::string describe_element(const reference::ExactResult& ex, const reference::EmulationResult& emu,
                                    const std::vector<float>& out, std::size_t i) {
  const std::int64_t dim = ex.dim, row = static_cast<std::int64_t>(i) / dim;
  const std::int64_t q = row % ex.q_len, h = row / ex.q_len % ex.heads, b = row / ex.q_len / ex.heads;
  double row_out = 0, row_emu = 0;
  for (std::int64_t c = 0; c < dim; ++c) {
    const std::size_t j = static_cast<std::size_t>(row * dim + c);
    row_out = std::max(row_out, std::fabs(out[j] - ex.o[j]));
    row_emu = std::max(row_emu, std::fabs(emu.o[j] - ex.o[j]));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "(b %lld, h %lld, row %lld, col %lld): kernel %.6g, emulation %.6g (slack %.3g), exact %.6g; the "
                "row's max |Δ| vs exact: kernel %.4g, emulation %.4g",
                static_cast<long long>(b), static_cast<long long>(h), static_cast<long long>(q),
                static_cast<long long>(i % static_cast<std::size_t>(dim)), static_cast<double>(out[i]),
                static_cast<double>(emu.o[i]), emu.o_slack.empty() ? 0.0 : static_cast<double>(emu.o_slack[i]), ex.o[i],
                row_out, row_emu);
  return buf;
}

}  // namespace sage2::test
