// Probes of wgmma on the device (templates/probe_wgmma.cuh), printed for the record:
//  1. conventions: one wgmma m64n64k32 (e4m3 → f32 and s8 → s32) with random A (registers, PTX
//     fragment layout) and B (shared memory, 128/64/32-byte swizzle, descriptor) equals the host
//     product — the fragment, descriptor and swizzle rules the attention kernel relies on;
//  2. the FP8 accumulator width: (a) pass-through of C with A = B = 0, (b) C = 2^e plus one product
//     2^-9: the largest e for which D == C + 2^-9 exactly, (c) products of different magnitudes
//     inside one instruction (1 product 2^e plus 31 products 2^-9): what the internal adder keeps,
//     (d) one product repeated over `steps` back-to-back instructions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_env.hpp"
#include "jit/compiler.hpp"
#include "sage2/reference.hpp"

using namespace sage2;

namespace {

struct WgProbeParams {  // mirrors templates/probe_wgmma.cuh
  const void* a;
  const void* b;
  const void* c;
  void* d;
  int kind;
  int swizzle_bytes;
  int steps;
};

struct ProbeModule {
  runtime::LoadedKernel k;
  ProbeModule() {
    kernels::KernelSpec spec;
    spec.family = kernels::KernelFamily::Probe;
    spec.arch = kernels::Arch::Sm90a;
    const jit::CompiledKernel ck = jit::compile_source(spec, "#include \"probe_wgmma.cuh\"\n");
    base::driver::ScopedContext scope(runtime::context_impl(test::gpu_context()).cu_context());
    base::driver::check(base::driver::api().cuModuleLoadData(&k.module, ck.cubin.data()), "cuModuleLoadData(probe_wgmma)");
    base::driver::check(base::driver::api().cuModuleGetFunction(&k.function, k.module, "sage2_probe_wgmma"),
                  "cuModuleGetFunction(sage2_probe_wgmma)");
    k.key = "probe_wgmma";
  }
};

ProbeModule& probe() {
  static ProbeModule m;
  return m;
}

// Logical A [64][32] bytes → per-thread registers (PTX ISA wgmma .m64nNk32 A fragment).
std::vector<std::uint32_t> a_fragments(const std::vector<std::uint8_t>& A) {
  std::vector<std::uint32_t> r(128 * 4);
  for (int tid = 0; tid < 128; ++tid) {
    const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    for (int reg = 0; reg < 4; ++reg) {
      const int row = 16 * w + g + ((reg & 1) ? 8 : 0);
      const int k0 = 4 * t + ((reg & 2) ? 16 : 0);
      std::uint32_t v = 0;
      for (int j = 0; j < 4; ++j) v |= static_cast<std::uint32_t>(A[row * 32 + k0 + j]) << (8 * j);
      r[tid * 4 + reg] = v;
    }
  }
  return r;
}
// Accumulator register i of thread tid → (row, col) of D [64][64].
void d_coord(int tid, int i, int& row, int& col) {
  const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  row = 16 * w + g + 8 * ((i >> 1) & 1);
  col = 8 * (i >> 2) + 2 * t + (i & 1);
}

// One launch; returns D as [64][64] (bits of f32 or s32).
std::vector<std::uint32_t> run(int kind, int swizzle, const std::vector<std::uint8_t>& A, const std::vector<std::uint8_t>& B,
                               const std::vector<std::uint32_t>& C /*[64][64]*/, int steps = 1) {
  ProbeModule& m = probe();
  const std::vector<std::uint32_t> af = a_fragments(A);
  std::vector<std::uint32_t> cf(128 * 32), df(128 * 32);
  for (int tid = 0; tid < 128; ++tid)
    for (int i = 0; i < 32; ++i) {
      int r, c;
      d_coord(tid, i, r, c);
      cf[tid * 32 + i] = C[r * 64 + c];
    }
  test::DeviceBuffer da(af.size() * 4), db(B.size()), dc(cf.size() * 4), dd(df.size() * 4);
  da.upload(af.data(), af.size() * 4);
  db.upload(B.data(), B.size());
  dc.upload(cf.data(), cf.size() * 4);
  dd.poison();
  WgProbeParams p{da.get(), db.get(), dc.get(), dd.get(), kind, swizzle, steps};
  kernels::LaunchShape s;
  s.block[0] = 128;
  {
    base::driver::ScopedContext scope(runtime::context_impl(test::gpu_context()).cu_context());
    runtime::launch(m.k, s, &p, nullptr);
  }
  test::synchronize();
  dd.download(df.data(), df.size() * 4);
  std::vector<std::uint32_t> D(64 * 64);
  for (int tid = 0; tid < 128; ++tid)
    for (int i = 0; i < 32; ++i) {
      int r, c;
      d_coord(tid, i, r, c);
      D[r * 64 + c] = df[tid * 32 + i];
    }
  return D;
}

float f(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
std::uint32_t u(float x) {
  std::uint32_t v;
  std::memcpy(&v, &x, 4);
  return v;
}
double e4m3(std::uint8_t code) { return reference::fp8_to_float(code, reference::Fp8Format::E4M3); }

}  // namespace

TEST_CASE("gpu probe wgmma: fragment, descriptor and swizzle conventions (e4m3 and s8, 128/64/32-byte swizzle)") {
  if (runtime::context_impl(test::gpu_context()).arch() != kernels::Arch::Sm90a) return;
  std::mt19937 gen(1234);
  for (int swz : {128, 64, 32}) {
    CAPTURE(swz);
    // s8: exact integer product
    std::vector<std::uint8_t> A(64 * 32), B(64 * 32);
    std::uniform_int_distribution<int> i8(-128, 127);
    for (auto& x : A) x = static_cast<std::uint8_t>(i8(gen));
    for (auto& x : B) x = static_cast<std::uint8_t>(i8(gen));
    std::vector<std::uint32_t> C(64 * 64);
    for (auto& x : C) x = static_cast<std::uint32_t>(i8(gen));
    auto D = run(1, swz, A, B, C);
    int bad = 0;
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        std::int64_t e = static_cast<std::int32_t>(C[r * 64 + c]);
        for (int k = 0; k < 32; ++k)
          e += static_cast<std::int64_t>(static_cast<std::int8_t>(A[r * 32 + k])) * static_cast<std::int8_t>(B[c * 32 + k]);
        bad += static_cast<std::int32_t>(D[r * 64 + c]) != e;
      }
    CHECK_MESSAGE(bad == 0, bad << " of 4096 s8 results differ from the host product (swizzle " << swz << ")");
    // e4m3: values ±[1, 3.75] (exponent fields 7..8): products are multiples of 2^-6 below 16,
    // sums of 32 need 15 bits — a layout error shows as O(1) differences, an adder narrower than
    // fp32 as differences below 2^-10 of Σ|products| (reported, tolerated here).
    std::uniform_int_distribution<int> code(0x38, 0x47);
    for (auto& x : A) x = static_cast<std::uint8_t>(code(gen) | (gen() & 0x80));
    for (auto& x : B) x = static_cast<std::uint8_t>(code(gen) | (gen() & 0x80));
    for (auto& x : C) x = u(0.f);
    D = run(0, swz, A, B, C);
    double worst = 0;
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        double e = 0, mag = 0;
        for (int k = 0; k < 32; ++k) {
          const double pr = e4m3(A[r * 32 + k]) * e4m3(B[c * 32 + k]);
          e += pr;
          mag += std::fabs(pr);
        }
        worst = std::max(worst, std::fabs(f(D[r * 64 + c]) - e) / mag);
      }
    CHECK_MESSAGE(worst <= std::ldexp(1.0, -10), "e4m3 worst difference / Σ|products| " << worst << " (swizzle " << swz << ")");
    std::printf("probe wgmma conventions, swizzle %3d B: s8 %d/4096 differ, e4m3 worst |diff|/sum|prod| %.2e\n", swz, bad, worst);
  }
}

TEST_CASE("gpu probe wgmma: e4m3 → f32 accumulator width") {
  if (runtime::context_impl(test::gpu_context()).arch() != kernels::Arch::Sm90a) return;
  std::vector<std::uint8_t> A(64 * 32, 0), B(64 * 32, 0);
  std::vector<std::uint32_t> C(64 * 64);
  // (a) pass-through: A = B = 0, C = 1.99999988 (all 23 mantissa bits set)
  for (auto& x : C) x = 0x3FFFFFFFu;
  auto D = run(0, 128, A, B, C);
  int kept = 0;
  for (int bit = 22; bit >= 0 && ((D[0] >> bit) & 1u); --bit) ++kept;
  bool uniform = true;
  for (auto x : D) uniform &= x == D[0];
  // (b) C = 2^e, one product 1.0 · 2^-9 at D[0][0]
  A[0] = 0x38;  // 1.0
  B[0] = 0x01;  // 2^-9
  int widest = -1;
  for (int e = 0; e <= 24; ++e) {
    for (auto& x : C) x = u(std::ldexp(1.0f, e));
    D = run(0, 128, A, B, C);
    if (static_cast<double>(f(D[0])) == std::ldexp(1.0, e) + std::ldexp(1.0, -9)) widest = e;
  }
  // (c) inside one instruction: row 0 of A = 1.0, column 0 of B = {2^e, 2^-9 × 31}, C = 0
  std::string intra;
  for (auto& x : C) x = u(0.f);
  for (int k = 0; k < 32; ++k) A[k] = 0x38;
  int intra_widest = -1;
  for (int e = 0; e <= 8; ++e) {
    B[0] = static_cast<std::uint8_t>((e + 7) << 3);  // 2^e
    for (int k = 1; k < 32; ++k) B[k] = 0x01;
    D = run(0, 128, A, B, C);
    const double exact = std::ldexp(1.0, e) + 31 * std::ldexp(1.0, -9);
    const double got = f(D[0]);
    char buf[96];
    std::snprintf(buf, sizeof buf, " 2^%d+31·2^-9: %.9g (exact %.9g)", e, got, exact);
    intra += buf;
    if (got == exact) intra_widest = e;
  }
  // (d) one product 2^-9 added by `steps` back-to-back instructions onto C = 1
  for (int k = 1; k < 32; ++k) A[k] = 0;
  B[0] = 0x01;
  for (auto& x : C) x = u(1.0f);
  D = run(0, 128, A, B, C, 64);
  const double chained = f(D[0]);
  std::printf(
      "probe wgmma.m64n64k32.f32.e4m3.e4m3 on %s: pass-through keeps %d of 23 mantissa bits (uniform %d); "
      "C + 2^-9 exact up to C = 2^%d, i.e. %d bits; one instruction, 2^e + 31 products 2^-9 exact up to e = %d "
      "(%d bits):%s; 1 + 64 instructions × 2^-9 = %.9g (exact %.9g)\n",
      test::gpu_context().device().name.c_str(), kept, uniform, widest, widest + 9, intra_widest, intra_widest + 9,
      intra.c_str(), chained, 1.0 + 64 * std::ldexp(1.0, -9));
  std::fflush(stdout);
  CHECK(kept >= 10);          // the probe ran and read something sensible
  CHECK(widest + 9 >= 10);
}
