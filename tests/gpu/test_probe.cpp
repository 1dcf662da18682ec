// Probe of the FP8 tensor-core accumulator (mma.sync m16n8k32 e4m3 → f32), printed for the
// record: the paper found 13 mantissa bits on Ada; two-level accumulation is kept or dropped on
// this evidence. Two measurements:
//  1. pass-through: A = B = 0 and C with all 23 mantissa bits set; count the bits D keeps;
//  2. accumulate: C = 2^e and one product 2^-9 (the smallest E4M3); the largest e for which
//     D == C + 2^-9 exactly gives the adder's width in bits (e + 9).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "gpu_env.hpp"
#include "kernels/attention_family.hpp"

using namespace sage2;

namespace {

struct ProbeParams {  // mirrors templates/probe.cuh
  const void* a;
  const void* b;
  const float* c;
  float* d;
};

std::vector<float> run_probe(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                             const std::vector<float>& c) {
  Context& ctx = test::gpu_context();
  kernels::KernelSpec spec;
  spec.family = kernels::KernelFamily::Probe;
  runtime::LoadedKernel& k = runtime::context_impl(ctx).kernels().get(spec);
  test::DeviceBuffer da(a.size() * 4), db(b.size() * 4), dc(c.size() * 4), dd(c.size() * 4);
  da.upload(a.data(), a.size() * 4);
  db.upload(b.data(), b.size() * 4);
  dc.upload(c.data(), c.size() * 4);
  dd.poison();
  ProbeParams p{da.get(), db.get(), static_cast<const float*>(dc.get()), static_cast<float*>(dd.get())};
  kernels::LaunchShape s;
  s.block[0] = 32;
  {
    base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
    runtime::launch(k, s, &p, nullptr);
  }
  test::synchronize();
  std::vector<float> d(c.size());
  dd.download(d.data(), d.size() * 4);
  return d;
}

int leading_mantissa_ones(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  int n = 0;
  for (int bit = 22; bit >= 0 && ((u >> bit) & 1u); --bit) ++n;
  return n;
}

}  // namespace

TEST_CASE("gpu probe: mma.sync e4m3 accumulator width") {
  // (a Context on a target without FP8, SAGE2_TARGET_ARCH=sm_80: nothing to probe)
  if (!kernels::arch_info(runtime::context_impl(test::gpu_context()).arch()).fp8_pv) {
    MESSAGE("skipped: the Context's target has no FP8 mma");
    return;
  }
  std::vector<std::uint32_t> a(32 * 4, 0), b(32 * 2, 0);
  std::vector<float> c(32 * 4);
  std::uint32_t all_ones = 0x3FFFFFFFu;  // 1.99999988: every mantissa bit set
  float full;
  std::memcpy(&full, &all_ones, 4);
  for (float& x : c) x = full;
  const std::vector<float> d = run_probe(a, b, c);
  const int kept = leading_mantissa_ones(d[0]);
  for (float x : d) CHECK(leading_mantissa_ones(x) == kept);  // every lane behaves alike

  // Accumulate: lane 0 holds A[0][0] (a0 byte 0) and B[0][0] (b0 byte 0); D[0][0] is lane 0's c0.
  a[0] = 0x38u;  // E4M3 1.0
  b[0] = 0x01u;  // E4M3 2^-9 (smallest subnormal)
  int widest = -1;
  for (int e = 0; e <= 24; ++e) {
    std::fill(c.begin(), c.end(), std::ldexp(1.0f, e));
    const std::vector<float> r = run_probe(a, b, c);
    // Compared in double: 2^e + 2^-9 is exact there for every e probed (float would round it).
    if (static_cast<double>(r[0]) == std::ldexp(1.0, e) + std::ldexp(1.0, -9)) widest = e;
  }
  std::printf("probe mma.sync.m16n8k32.e4m3.f32 on %s: pass-through keeps %d of 23 mantissa bits; "
              "C + 2^-9 kept exactly up to C = 2^%d, i.e. %d bits (fp32 holds 23 below the leading bit)\n",
              test::gpu_context().device().name.c_str(), kept, widest, widest + 9);
  CHECK(kept >= 10);     // the probe ran and read something sensible
  CHECK(widest >= 10);
}
