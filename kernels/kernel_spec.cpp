#include "kernels/kernel_spec.hpp"

#include <sstream>

namespace sage2::kernels {

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

int qk_dim_padded(int head_dim, int qk_bits) { return round_up(head_dim, qk_bits == 4 ? 64 : 32); }
int qk_row_bytes(int head_dim, int qk_bits) {
  return qk_bits == 4 ? qk_dim_padded(head_dim, 4) / 2 : qk_dim_padded(head_dim, 8);
}
int v_dim_padded(int head_dim) { return round_up(head_dim, 32); }
int v_code_bytes(bool pv_fp16) { return pv_fp16 ? 2 : 1; }


KernelSpec quantize_spec_for(const KernelSpec& attention, QuantOp op) {
  KernelSpec q = attention;
  q.family = KernelFamily::Quantize;
  q.op = op;
  q.consumer = attention.family;
  return q.canonical();
}

}  // namespace sage2::kernels
