// Which summation order gives the GPU's sampled V sum (s26 a5): regenerate the failing case's V,
// take the sampled tiles of one channel, and sum them in candidate orders.
// Build: g++ -std=c++20 -O2 -I include -I . sumorder.cpp build/libsage2.a -o sumorder -ldl -lpthread
// Run:   ./sumorder SEED N D HEAD CHANNEL   (SEED = the test's base seed + the case number)
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <vector>
#include <functional>
#include "sage2/reference.hpp"
#include "kernels/quantize_shape.hpp"
#include "kernels/kernel_spec.hpp"
using namespace sage2;
static unsigned bits(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
int main(int argc, char** argv) {
  const std::uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const int n = atoi(argv[2]), d = atoi(argv[3]), head = atoi(argv[4]), ch = atoi(argv[5]);
  reference::AttentionInputs in = reference::make_activation_like(seed, DType::F16, 1, 2, 2, n, n, d, {}, false);
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionMma; s.arch = kernels::Arch::Sm90a; s.head_dim = d; s.qk_bits = 8;
  s.smooth_q = false; s.smooth_k = true; s.smooth_v = true; s.in_dtype = DType::F16; s.out_dtype = DType::F16;
  s.tile = kernels::TileConfig{128, 64, 4, 1}; s.pv_fp16 = true; s.sampled_stats = true;
  const int P = kernels::quantize_split_stats_rows_per_pass(s);
  const int bk = 64, T = (n + bk - 1) / bk;
  std::vector<float> x;
  for (int i = 0; i < 4; ++i) { int t = i * T / 4; for (int r = 0; r < bk; ++r) x.push_back(in.v.get(0, head, t * bk + r, ch)); }
  printf("P=%d keys=%zu\n", P, x.size());
  auto stage = [&](int Pp, int chunk) {
    float sum = 0.f;
    for (size_t c0 = 0; c0 < x.size(); c0 += chunk) {
      float cs = 0.f;
      for (int s2 = 0; s2 < Pp; ++s2) { float part = 0.f; for (size_t i = c0 + s2; i < c0 + chunk && i < x.size(); i += Pp) part += x[i]; cs = s2 == 0 ? part : cs + part; }
      sum = c0 == 0 ? cs : sum + cs;
    }
    return sum;
  };
  for (int Pp : {1, 2, 4, 8, 16, 32, 64}) printf("P=%2d chunk 64: %08x   chunk 256: %08x\n", Pp, bits(stage(Pp, 64)), bits(stage(Pp, 256)));
  float seq = 0.f; for (float v : x) seq += v; printf("sequential %08x\n", bits(seq));
  double dd = 0; for (float v : x) dd += v; printf("double %08x\n", bits((float)dd));
  // slot sums combined as a tree (pairwise) instead of left to right, per chunk
  for (int Pp : {8, 16}) {
    float sum = 0.f;
    for (size_t c0 = 0; c0 < x.size(); c0 += 64) {
      std::vector<float> parts(Pp, 0.f);
      for (int s2 = 0; s2 < Pp; ++s2) for (size_t i = c0 + s2; i < c0 + 64; i += Pp) parts[s2] += x[i];
      for (int w = Pp / 2; w > 0; w /= 2) for (int s2 = 0; s2 < w; ++s2) parts[s2] += parts[s2 + w];
      sum = c0 == 0 ? parts[0] : sum + parts[0];
    }
    printf("tree P=%d %08x\n", Pp, bits(sum));
  }
  return 0;
}
