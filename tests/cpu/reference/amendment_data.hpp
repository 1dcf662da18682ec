// The three data kinds the amendment studies measure accuracy on (gaussian, activation-like,
// heavy-tailed Student-t with 3 degrees of freedom): B 1, 2 heads, n queries and keys, head dim d.
#pragma once

#include <array>
#include <cstdint>

#include "sage2/reference.hpp"

namespace sage2::test {

struct DataKind {
  const char* name;
  reference::AttentionInputs in;
};

inline std::array<DataKind, 3> data_kinds(std::uint64_t seed, std::int64_t n, int d) {
  using namespace sage2::reference;
  return {DataKind{"gaussian", make_gaussian(seed, DType::F16, 1, 2, 2, n, n, d)},
          DataKind{"activation-like", make_activation_like(seed, DType::F16, 1, 2, 2, n, n, d)},
          DataKind{"student-t 3", make_student_t(seed, DType::F16, 1, 2, 2, n, n, d)}};
}

// The mma.sync kernel config the amendment studies emulate: 8-bit QK (or `bits` with `smooth_q`),
// tile 128×64, 4 warps; arch "sm_80" gives FP16 P̃V, "sm_89" FP8.
inline reference::KernelConfig mma_amendment_spec(const char* arch, int d, CausalMode causal, int bits = 8,
                                                  bool smooth_q = false) {
  reference::KernelConfig s;
  s.family = AttentionFamily::Mma;
  s.arch = arch;
  s.qk_bits = bits;
  s.smooth_q = smooth_q;
  s.head_dim = d;
  s.tile = reference::KernelTile{128, 64, 4, 1};
  s.causal = causal;
  return s;
}

// The wgmma family's spec for the same (sm_90a, its default bq128.bk128.w8.s2 tile): its contract
// keeps the unamended forms, which the amendments' tests check against.
inline reference::KernelConfig wgmma_amendment_spec(int d, CausalMode causal) {
  reference::KernelConfig s = mma_amendment_spec("sm_90a", d, causal);
  s.family = AttentionFamily::Wgmma;
  s.tile = reference::KernelTile{128, 128, 8, 2};
  return s;
}

}  // namespace sage2::test
