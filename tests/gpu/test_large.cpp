// Specification: Context::attention on tensors of MORE than 2^31 elements each (issue #8, "large
// tensors") has no 32-bit index overflow anywhere — input and output offsets, quantized codes,
// scales, ΔS, LSE, and the split of more than 65535 (batch, head) pairs over several grids:
//  - every output element and LSE entry is written and finite; nothing past them is written;
//  - sampled (batch, head) pairs — the first one, and ones whose elements lie beyond element 2^31
//    — hold bit for bit the output and LSE that a small call computes for the same heads' data
//    (a head's result does not depend on where it sits), and are close to exact fp64 attention;
//  - for both attention families: SAGE2_ATTENTION_FAMILY=mma, and =wgmma on sm_90a (skipped
//    with a message elsewhere); each with a fresh Context, since the variable is read then.
// Two shapes, fp16, d = 128, each tensor ~4.3 GB (4 tensors + ~7 GB workspace < 25 GB):
//  A: B=2, H=33000, N=256, HND, non-causal, defaults — 66000 pairs: two attention grids, a
//     quantize grid with gridDim.z = 2; heads >= 65536 lie wholly beyond element 2^31;
//  B: B=2, H=8448, N=1024, NHD, causal, smooth Q (ΔS) and smooth V — in NHD the last ~62 tokens
//     of every batch-1 head lie beyond element 2^31.
// Inputs: a bank of R = 1031 token rows (prime, > N) is repeated through each tensor — row r of a
// tensor (memory order) holds bank row r mod R — by doubling device-to-device copies, so host
// memory stays small, every head holds N distinct tokens, and an offset wrapped by 2^31 elements
// (2^24 rows, not a multiple of R) reads other rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpu_env.hpp"
#include "runtime/attention_plan.hpp"
#include "plan/attention_validate.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

constexpr std::int64_t kTwo31 = std::int64_t(1) << 31;
constexpr std::int64_t kBankRows = 1031;  // prime, larger than every sequence below
constexpr std::size_t kGuard = 4096;      // poisoned bytes after the output and the LSE

struct Head {
  std::int64_t b, h;
};

struct Shape {
  const char* name;
  std::int64_t batch, heads, seq, dim;
  bool nhd;
  CausalMode causal;
  Toggle smooth_q;
  bool smooth_v;
  std::vector<Head> sampled;
  // vs exact fp64 attention of the sampled heads (test_attention_api.cpp's bounds: "sharp" for
  // 256 keys, "diffuse" at 1024 keys)
  double cos_min, rel_l1_max, lse_max;
  std::int64_t numel() const { return batch * heads * seq * dim; }
};

std::vector<Shape> shapes() {
  return {
      {"A: B=2 H=33000 N=256 d=128 HND none (66000 pairs)", 2, 33000, 256, 128, false, CausalMode::None, Toggle::Auto,
       false, {{0, 0}, {0, 32999}, {1, 0}, {1, 32535}, {1, 32536}, {1, 32999}}, 0.9995, 0.03, 0.5},
      {"B: B=2 H=8448 N=1024 d=128 NHD top-left smooth Q+V", 2, 8448, 1024, 128, true, CausalMode::TopLeft, Toggle::On,
       true, {{0, 0}, {0, 8447}, {1, 0}, {1, 4224}, {1, 8447}}, 0.9999, 0.011, 0.1},
  };
}

// Row (a run of `dim` contiguous elements) of element (b, h, n, ·) in memory order.
std::int64_t row_of(const Shape& s, std::int64_t b, std::int64_t h, std::int64_t n) {
  return s.nhd ? (b * s.seq + n) * s.heads + h : (b * s.heads + h) * s.seq + n;
}

TensorRef view(const Shape& s, const void* data) {
  return s.nhd ? TensorRef::nhd(data, DType::F16, s.batch, s.heads, s.seq, s.dim)
               : TensorRef::hnd(data, DType::F16, s.batch, s.heads, s.seq, s.dim);
}

// Sets SAGE2_ATTENTION_FAMILY for the scope, restoring the previous value.
class FamilyEnv {
 public:
  explicit FamilyEnv(const char* value) {
    if (const char* old = std::getenv("SAGE2_ATTENTION_FAMILY")) old_ = old;
    ::setenv("SAGE2_ATTENTION_FAMILY", value, 1);
  }
  ~FamilyEnv() {
    if (old_) ::setenv("SAGE2_ATTENTION_FAMILY", old_->c_str(), 1);
    else ::unsetenv("SAGE2_ATTENTION_FAMILY");
  }

 private:
  std::optional<std::string> old_;
};

// Row r of the first `rows` rows of `buf` := bank row r mod R (bank: R rows of row_bytes).
void fill_periodic(test::DeviceBuffer& buf, const std::vector<std::uint16_t>& bank, std::size_t row_bytes,
                   std::int64_t rows) {
  const std::size_t total = static_cast<std::size_t>(rows) * row_bytes;
  std::size_t have = std::min(bank.size() * 2, total);
  buf.upload(bank.data(), have);
  base::driver::ScopedContext scope(runtime::context_impl(test::gpu_context()).cu_context());
  // `have` stays a multiple of the bank's size until the last (partial) copy, so the copy to
  // offset `have` continues the period.
  while (have < total) {
    const std::size_t n = std::min(have, total - have);
    base::driver::check(base::driver::api().cuMemcpyDtoD_v2(buf.ptr() + have, buf.ptr(), n), "cuMemcpyDtoD (fill)");
    have += n;
  }
}

struct Scan {
  std::int64_t nonfinite = 0;
  bool guard_ok = true;
};

// Counts non-finite f16 elements (the 0xFF poison is a NaN) in the first `bytes` bytes, in
// chunks, and checks that the kGuard bytes after them still hold the poison.
Scan scan_f16(const test::DeviceBuffer& buf, std::size_t bytes) {
  Scan r;
  std::vector<std::uint16_t> h(std::size_t(128) << 20);
  for (std::size_t off = 0; off < bytes; off += h.size() * 2) {
    const std::size_t n = std::min(h.size() * 2, bytes - off);
    buf.download(h.data(), n, off);
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < n / 2; ++i) bad += (h[i] & 0x7C00u) == 0x7C00u;
    r.nonfinite += bad;
  }
  std::vector<unsigned char> g(kGuard);
  buf.download(g.data(), kGuard, bytes);
  for (unsigned char c : g) r.guard_ok &= c == 0xFF;
  return r;
}

Scan scan_f32(const test::DeviceBuffer& buf, std::size_t count) {
  Scan r;
  std::vector<float> h(count);
  buf.download(h.data(), count * 4);
  for (float x : h) r.nonfinite += !std::isfinite(x);
  std::vector<unsigned char> g(kGuard);
  buf.download(g.data(), kGuard, count * 4);
  for (unsigned char c : g) r.guard_ok &= c == 0xFF;
  return r;
}

double gib(std::size_t b) { return static_cast<double>(b) / (1024.0 * 1024 * 1024); }

void run_shape(const Shape& s) {
  CAPTURE(s.name);
  REQUIRE(s.numel() > kTwo31);  // the point of the test: every tensor is beyond int32 indexing
  const Context& base = test::gpu_context();
  const kernels::Arch arch = runtime::context_impl(test::gpu_context()).arch();
  const std::size_t bytes = static_cast<std::size_t>(s.numel()) * 2;
  const std::size_t lse_count = static_cast<std::size_t>(s.batch * s.heads * s.seq);
  if (base.device().total_memory < (std::size_t(48) << 30)) {
    MESSAGE("skipped: " << s.name << " needs ~25 GB of device memory; " << base.device().name << " has "
                        << gib(base.device().total_memory) << " GiB");
    return;
  }

  // The bank and the host copies of the sampled heads ([1][S][N][d], HND).
  const std::uint64_t seed = 20260808;
  ref::ActivationModel model;
  model.latent_scale = 0.5;  // "diffuse" inputs of test_attention_api.cpp
  model.qk_noise = 0.3;
  ref::AttentionInputs bank =
      ref::make_activation_like(seed, DType::F16, 1, 1, 1, kBankRows, kBankRows, s.dim, model);
  const std::int64_t S = static_cast<std::int64_t>(s.sampled.size());
  ref::HostTensor hq(DType::F16, 1, S, s.seq, s.dim), hk(DType::F16, 1, S, s.seq, s.dim),
      hv(DType::F16, 1, S, s.seq, s.dim);
  for (std::int64_t i = 0; i < S; ++i)
    for (std::int64_t n = 0; n < s.seq; ++n) {
      const std::int64_t r = row_of(s, s.sampled[i].b, s.sampled[i].h, n) % kBankRows;
      const std::size_t to = static_cast<std::size_t>((i * s.seq + n) * s.dim), from = static_cast<std::size_t>(r * s.dim);
      std::memcpy(&hq.bits()[to], &bank.q.bits()[from], s.dim * 2);
      std::memcpy(&hk.bits()[to], &bank.k.bits()[from], s.dim * 2);
      std::memcpy(&hv.bits()[to], &bank.v.bits()[from], s.dim * 2);
    }
  ref::AttentionOptions xo;
  xo.causal = s.causal;
  const ref::ExactResult exact = ref::exact_attention(hq.ref(), hk.ref(), hv.ref(), xo);

  // The large tensors.
  const auto t_fill0 = std::chrono::steady_clock::now();
  test::DeviceBuffer dq(bytes), dk(bytes), dv(bytes), dout(bytes + kGuard), dlse(lse_count * 4 + kGuard);
  const std::size_t row_bytes = static_cast<std::size_t>(s.dim) * 2;
  fill_periodic(dq, bank.q.bits(), row_bytes, s.numel() / s.dim);
  fill_periodic(dk, bank.k.bits(), row_bytes, s.numel() / s.dim);
  fill_periodic(dv, bank.v.bits(), row_bytes, s.numel() / s.dim);
  test::synchronize();
  const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill0).count();
  const TensorRef Q = view(s, dq.get()), K = view(s, dk.get()), V = view(s, dv.get()), O = view(s, dout.get());

  // The sampled heads' data alone, on the device, for the small call.
  const std::size_t small_bytes = static_cast<std::size_t>(S * s.seq * s.dim) * 2;
  test::DeviceBuffer sq(small_bytes), sk(small_bytes), sv(small_bytes), sout(small_bytes), slse(S * s.seq * 4);
  sq.upload(hq.bits().data(), small_bytes);
  sk.upload(hk.bits().data(), small_bytes);
  sv.upload(hv.bits().data(), small_bytes);
  auto small_view = [&](const test::DeviceBuffer& b) { return TensorRef::hnd(b.get(), DType::F16, 1, S, s.seq, s.dim); };

  for (const char* family : {"mma", "wgmma"}) {
    CAPTURE(family);
    const bool wg = std::strcmp(family, "wgmma") == 0;
    if (wg && arch != kernels::Arch::Sm90a) {
      MESSAGE("skipped: the wgmma family needs sm_90a; device 0 is " << std::string(kernels::arch_name(arch)));
      continue;
    }
    FamilyEnv env(family);
    Context ctx(0);  // reads SAGE2_ATTENTION_FAMILY now
    AttentionParams p;
    p.causal = s.causal;
    p.smooth_q = s.smooth_q;
    p.small_q_path = SmallQPath::Quantized;  // this suite specifies the quantized path (few rows: test_direct.cpp)
    p.smooth_v = s.smooth_v;
    p.lse = static_cast<float*>(dlse.get());
    const plan::AttentionProblem prob = plan::validate_attention(Q, K, V, O, p, runtime::context_impl(ctx).arch());
    const kernels::KernelSpec spec = runtime::plan_attention(prob, runtime::context_impl(ctx));
    REQUIRE_MESSAGE(spec.family == (wg ? kernels::KernelFamily::AttentionWgmma : kernels::KernelFamily::AttentionMma),
                    "SAGE2_ATTENTION_FAMILY=" << family << " planned " << kernels::family_name(spec.family));
    const std::size_t ws = ctx.workspace_size(Q, K, V, O, p);
    std::size_t free_b = 0, total_b = 0;
    {
      base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
      base::driver::check(base::driver::api().cuMemGetInfo_v2(&free_b, &total_b), "cuMemGetInfo");
    }
    std::printf("large %s [%s]: %lld elements per tensor (%.2f x 2^31), 4 x %.2f GiB tensors + %.2f GiB workspace; "
                "%.2f GiB free of %.2f\n",
                s.name, family, (long long)s.numel(), double(s.numel()) / double(kTwo31), gib(bytes), gib(ws),
                gib(free_b), gib(total_b));
    REQUIRE_MESSAGE(free_b > ws + (std::size_t(1) << 30), "not enough free device memory for the workspace");

    dout.poison(0xFF);
    dlse.poison(0xFF);
    const auto t0 = std::chrono::steady_clock::now();
    ctx.attention(Q, K, V, O, p);
    test::synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    const Scan so = scan_f16(dout, bytes);
    const Scan sl = scan_f32(dlse, lse_count);
    const auto t2 = std::chrono::steady_clock::now();
    CHECK_MESSAGE(so.nonfinite == 0, so.nonfinite << " output elements non-finite or not written");
    CHECK_MESSAGE(so.guard_ok, "a write past the end of the output");
    CHECK_MESSAGE(sl.nonfinite == 0, sl.nonfinite << " LSE entries non-finite or not written");
    CHECK_MESSAGE(sl.guard_ok, "a write past the end of the LSE");

    // The sampled heads out of the large call: [S][N][d] and [S][N].
    std::vector<std::uint16_t> big(static_cast<std::size_t>(S * s.seq * s.dim));
    std::vector<float> big_lse(static_cast<std::size_t>(S * s.seq));
    for (std::int64_t i = 0; i < S; ++i) {
      const Head hd = s.sampled[i];
      if (s.nhd) {
        for (std::int64_t n = 0; n < s.seq; ++n)
          dout.download(&big[static_cast<std::size_t>((i * s.seq + n) * s.dim)], row_bytes,
                        static_cast<std::size_t>(row_of(s, hd.b, hd.h, n)) * row_bytes);
      } else {
        dout.download(&big[static_cast<std::size_t>(i * s.seq * s.dim)], static_cast<std::size_t>(s.seq) * row_bytes,
                      static_cast<std::size_t>(row_of(s, hd.b, hd.h, 0)) * row_bytes);
      }
      dlse.download(&big_lse[static_cast<std::size_t>(i * s.seq)], static_cast<std::size_t>(s.seq) * 4,
                    static_cast<std::size_t>((hd.b * s.heads + hd.h) * s.seq) * 4);
    }

    // The same heads in a small call of the same Context.
    sout.poison(0xFF);
    slse.poison(0xFF);
    AttentionParams ps = p;
    ps.lse = static_cast<float*>(slse.get());
    ctx.attention(small_view(sq), small_view(sk), small_view(sv), small_view(sout), ps);
    test::synchronize();
    std::vector<std::uint16_t> small(big.size());
    std::vector<float> small_lse(big_lse.size());
    sout.download(small.data(), small_bytes);
    slse.download(small_lse.data(), small_lse.size() * 4);

    for (std::int64_t i = 0; i < S; ++i) {
      const Head hd = s.sampled[i];
      const std::int64_t first = row_of(s, hd.b, hd.h, 0) * s.dim, last = row_of(s, hd.b, hd.h, s.seq - 1) * s.dim;
      CAPTURE(hd.b);
      CAPTURE(hd.h);
      std::int64_t diff_o = 0, diff_lse = 0;
      std::vector<float> got;
      std::vector<double> want;
      for (std::int64_t n = 0; n < s.seq; ++n) {
        const std::size_t r = static_cast<std::size_t>(i * s.seq + n);
        if (std::memcmp(&big_lse[r], &small_lse[r], 4) != 0) ++diff_lse;
        for (std::int64_t c = 0; c < s.dim; ++c) {
          const std::size_t e = r * static_cast<std::size_t>(s.dim) + static_cast<std::size_t>(c);
          if (big[e] != small[e]) {
            if (diff_o < 3)
              MESSAGE("row " << n << " ch " << c << ": large call " << ref::half_to_float(big[e]) << ", small call "
                             << ref::half_to_float(small[e]));
            ++diff_o;
          }
          got.push_back(ref::half_to_float(big[e]));
          want.push_back(exact.o[exact.index(0, i, n, c)]);
        }
      }
      double lse_err = 0;
      for (std::int64_t n = 0; n < s.seq; ++n) {
        const std::size_t r = static_cast<std::size_t>(i * s.seq + n);
        lse_err = std::max(lse_err, std::fabs(static_cast<double>(big_lse[r]) - exact.lse[r]));
      }
      const ref::Metrics m = ref::compare(want, got);
      std::printf("large %s [%s] head (b=%lld, h=%lld), elements [%.3f, %.3f] x 2^31: vs small call %lld O / %lld LSE "
                  "differ | vs exact: cos %.6f relL1 %.5f lse max err %.2e\n",
                  s.name, family, (long long)hd.b, (long long)hd.h, double(first) / double(kTwo31),
                  double(last + s.dim) / double(kTwo31), (long long)diff_o, (long long)diff_lse, m.cos_sim, m.rel_l1,
                  lse_err);
      CHECK_MESSAGE(diff_o == 0, "output differs from the small call of the same head's data");
      CHECK_MESSAGE(diff_lse == 0, "LSE differs from the small call of the same head's data");
      CHECK(m.nonfinite == 0);
      CHECK(m.cos_sim >= s.cos_min);
      CHECK(m.rel_l1 <= s.rel_l1_max);
      CHECK(lse_err <= s.lse_max);
    }
    std::printf("large %s [%s]: attention %.2f s (incl. first-use compile), scan of O and LSE %.2f s, fill %.2f s\n",
                s.name, family, std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count(), fill_s);
    std::fflush(stdout);
  }
}

}  // namespace

TEST_CASE("gpu large: tensors of more than 2^31 elements give correct outputs and LSE (both families)") {
  if (test::reduced()) {
    MESSAGE("skipped: SAGE2_GPU_TESTS_REDUCED is set (this case needs ~25 GB and full-size kernels)");
    return;
  }
  for (const Shape& s : shapes()) run_shape(s);
}
