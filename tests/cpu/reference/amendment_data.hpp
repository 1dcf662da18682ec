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

}  // namespace sage2::test
