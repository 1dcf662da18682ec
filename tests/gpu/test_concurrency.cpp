// Specification: one Context used by many host threads at once (issue #8, "concurrency").
//  - 8 threads, each on its own non-blocking stream, call ONE Context with different problems
//    (head dims 32..256, q_len != kv_len, the three causal modes, GQA 1/2/4, f16/bf16, HND/NHD,
//    8-bit and 4-bit with smooth Q (ΔS) — on sm_90a this mixes both attention families), several
//    iterations each, alternating between two problems so that the per-stream workspace grows
//    while other threads run;
//  - the Context is fresh with an empty cache directory, so the first calls compile their kernels
//    concurrently inside the threads, and two pairs of threads share a kernel key (the same
//    problem with different data), so concurrent requests for one key meet;
//  - every output and LSE is bit for bit the one a single-threaded run of the same inputs gave
//    before (another fresh Context, one stream, serially), and every iteration rewrites them all
//    (outputs poisoned before each call);
//  - afterwards both Contexts hold the same number of loaded kernels (each key compiled and
//    loaded once, none lost) and both cache directories the same number of entries.
#include <doctest/doctest.h>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu_env.hpp"
#include "temp_cache_dir.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

struct Problem {
  const char* name;
  DType dtype;
  bool nhd;
  int head_dim;
  std::int64_t batch, q_heads, kv_heads, q_len, kv_len;
  CausalMode causal;
  QkBits bits;
  std::uint64_t seed;
};

// Problems 6 and 7 have the kernel keys of 0 and 1 (same specialisation, other data).
std::vector<Problem> problems() {
  const bool small = test::reduced();
  auto n = [&](std::int64_t x) { return small ? std::min<std::int64_t>(x, 160) : x; };
  return {
      {"f16 HND d64 300x300 none", DType::F16, false, 64, 2, 2, 2, n(300), n(300), CausalMode::None, QkBits::Auto, 11},
      {"bf16 NHD d128 512x1000 bottom-right gqa4", DType::BF16, true, 128, 1, 8, 2, n(512), n(1000),
       CausalMode::BottomRight, QkBits::Auto, 12},
      {"f16 HND d96 257x257 top-left gqa2", DType::F16, false, 96, 1, 4, 2, n(257), n(257), CausalMode::TopLeft,
       QkBits::Auto, 13},
      {"f16 HND d128 400x400 none int4 (smooth Q, ΔS)", DType::F16, false, 128, 1, 2, 2, n(400), n(400),
       CausalMode::None, QkBits::Int4, 14},
      {"bf16 HND d256 130x700 top-left", DType::BF16, false, 256, 1, 2, 1, n(130), n(700), CausalMode::TopLeft,
       QkBits::Auto, 15},
      {"f16 NHD d32 1000x128 bottom-right (rows without keys)", DType::F16, true, 32, 1, 4, 4, n(1000), n(128),
       CausalMode::BottomRight, QkBits::Auto, 16},
      {"f16 HND d64 300x300 none (key of 0, other data)", DType::F16, false, 64, 2, 2, 2, n(300), n(300),
       CausalMode::None, QkBits::Auto, 17},
      {"bf16 NHD d128 512x1000 bottom-right gqa4 (key of 1, other data)", DType::BF16, true, 128, 1, 8, 2, n(512),
       n(1000), CausalMode::BottomRight, QkBits::Auto, 18},
  };
}

TensorRef view(const Problem& p, const void* data, std::int64_t heads, std::int64_t seq) {
  return p.nhd ? TensorRef::nhd(data, p.dtype, p.batch, heads, seq, p.head_dim)
               : TensorRef::hnd(data, p.dtype, p.batch, heads, seq, p.head_dim);
}

// One problem's device inputs (read by every thread that runs it).
struct Inputs {
  std::unique_ptr<test::DeviceBuffer> q, k, v;
  std::size_t out_bytes = 0, lse_count = 0;
};

Inputs make_inputs(const Problem& p) {
  const ref::AttentionInputs in = ref::make_activation_like(p.seed, p.dtype, p.batch, p.q_heads, p.kv_heads, p.q_len,
                                                            p.kv_len, p.head_dim, {}, p.nhd);
  Inputs r;
  auto up = [](const ref::HostTensor& t) {
    const std::size_t bytes = static_cast<std::size_t>(t.ref().numel()) * 2;
    auto b = std::make_unique<test::DeviceBuffer>(bytes);
    b->upload(t.ref().data, bytes);
    return b;
  };
  r.q = up(in.q);
  r.k = up(in.k);
  r.v = up(in.v);
  r.out_bytes = static_cast<std::size_t>(p.batch * p.q_heads * p.q_len * p.head_dim) * 2;
  r.lse_count = static_cast<std::size_t>(p.batch * p.q_heads * p.q_len);
  return r;
}

struct Result {
  std::vector<unsigned char> out, lse;
};

// One call of problem p on `stream` into (out, lse), poisoned first; returns the bytes written.
Result run_once(Context& ctx, const Problem& p, const Inputs& in, test::DeviceBuffer& out, test::DeviceBuffer& lse,
                CUstream stream) {
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  base::driver::check(a.cuMemsetD8Async(out.ptr(), 0xFF, in.out_bytes, stream), "cuMemsetD8Async(out)");
  base::driver::check(a.cuMemsetD8Async(lse.ptr(), 0xFF, in.lse_count * 4, stream), "cuMemsetD8Async(lse)");
  AttentionParams prm;
  prm.causal = p.causal;
  prm.qk_bits = p.bits;
  prm.lse = static_cast<float*>(lse.get());
  ctx.attention(view(p, in.q->get(), p.q_heads, p.q_len), view(p, in.k->get(), p.kv_heads, p.kv_len),
                view(p, in.v->get(), p.kv_heads, p.kv_len), view(p, out.get(), p.q_heads, p.q_len), prm, stream);
  Result r;
  r.out.resize(in.out_bytes);
  r.lse.resize(in.lse_count * 4);
  base::driver::check(a.cuMemcpyDtoHAsync_v2(r.out.data(), out.ptr(), r.out.size(), stream), "cuMemcpyDtoHAsync(out)");
  base::driver::check(a.cuMemcpyDtoHAsync_v2(r.lse.data(), lse.ptr(), r.lse.size(), stream), "cuMemcpyDtoHAsync(lse)");
  base::driver::check(a.cuStreamSynchronize(stream), "cuStreamSynchronize");
  return r;
}


CUstream new_stream(Context& ctx) {
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  CUstream s = nullptr;
  base::driver::check(base::driver::api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return s;
}
void destroy_stream(Context& ctx, CUstream s) {
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  base::driver::api().cuStreamDestroy_v2(s);
}

}  // namespace

TEST_CASE("gpu concurrency: 8 threads on one fresh Context, own streams, different shapes == single-threaded bits") {
  const std::vector<Problem> probs = problems();
  const int threads = static_cast<int>(probs.size());
  const int iterations = test::reduced() ? 2 : 6;
  std::vector<Inputs> inputs;
  for (const Problem& p : probs) inputs.push_back(make_inputs(p));

  // Single-threaded reference: a fresh Context (own empty cache dir), one stream, serially.
  test::TempCacheDir serial_dir("concurrency"), concurrent_dir("concurrency");
  std::vector<Result> expected;
  std::size_t serial_kernels = 0;
  {
    Context serial(0, ContextOptions{.cache_dir = serial_dir.path});
    CUstream s = new_stream(serial);
    for (std::size_t i = 0; i < probs.size(); ++i) {
      test::DeviceBuffer out(inputs[i].out_bytes), lse(inputs[i].lse_count * 4);
      expected.push_back(run_once(serial, probs[i], inputs[i], out, lse, s));
    }
    destroy_stream(serial, s);
    serial_kernels = runtime::context_impl(serial).kernels().loaded_count();
  }

  // Concurrent: thread t alternates between problem t and problem (t + 3) % 8, each into its
  // own output buffers, all starting at once (first use: every kernel compiles in the threads).
  Context shared(0, ContextOptions{.cache_dir = concurrent_dir.path});
  REQUIRE(runtime::context_impl(shared).kernels().loaded_count() == 0);
  struct ThreadOutcome {
    int calls = 0, mismatched_out = 0, mismatched_lse = 0;
    std::string error;
    double seconds = 0;
  };
  std::vector<ThreadOutcome> outcome(static_cast<std::size_t>(threads));
  std::vector<CUstream> streams;
  for (int t = 0; t < threads; ++t) streams.push_back(new_stream(shared));
  std::latch start(threads);
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ThreadOutcome& o = outcome[static_cast<std::size_t>(t)];
      const std::size_t mine[2] = {static_cast<std::size_t>(t), static_cast<std::size_t>((t + 3) % threads)};
      bool arrived = false;
      try {
        test::DeviceBuffer out0(inputs[mine[0]].out_bytes), lse0(inputs[mine[0]].lse_count * 4);
        test::DeviceBuffer out1(inputs[mine[1]].out_bytes), lse1(inputs[mine[1]].lse_count * 4);
        arrived = true;
        start.arrive_and_wait();
        const auto ts = std::chrono::steady_clock::now();
        for (int it = 0; it < iterations; ++it) {
          const std::size_t which = mine[it % 2];
          const Result r = run_once(shared, probs[which], inputs[which], it % 2 ? out1 : out0, it % 2 ? lse1 : lse0,
                                    streams[static_cast<std::size_t>(t)]);
          ++o.calls;
          o.mismatched_out += r.out != expected[which].out;
          o.mismatched_lse += r.lse != expected[which].lse;
        }
        o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
      } catch (const std::exception& e) {
        o.error = e.what();
        if (!arrived) start.count_down();  // never leave the others waiting at the start
      }
    });
  }
  for (auto& th : pool) th.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (CUstream s : streams) destroy_stream(shared, s);

  int total_calls = 0;
  for (int t = 0; t < threads; ++t) {
    const ThreadOutcome& o = outcome[static_cast<std::size_t>(t)];
    CAPTURE(t);
    std::printf("concurrency thread %d: %-66s / %-66s %d calls in %.2f s, %d outputs and %d LSEs differ%s%s\n", t,
                probs[static_cast<std::size_t>(t)].name, probs[static_cast<std::size_t>((t + 3) % threads)].name,
                o.calls, o.seconds, o.mismatched_out, o.mismatched_lse, o.error.empty() ? "" : " ERROR: ",
                o.error.c_str());
    CHECK_MESSAGE(o.error.empty(), o.error);
    CHECK(o.calls == iterations);
    CHECK(o.mismatched_out == 0);
    CHECK(o.mismatched_lse == 0);
    total_calls += o.calls;
  }
  const std::size_t shared_kernels = runtime::context_impl(shared).kernels().loaded_count();
  std::printf("concurrency: %d threads x %d calls (%d) in %.2f s wall incl. concurrent first-use compiles; kernels "
              "loaded: %zu concurrent vs %zu serial; cache entries %zu vs %zu; workspace held %.1f MiB\n",
              threads, iterations, total_calls, wall, shared_kernels, serial_kernels, concurrent_dir.entries(),
              serial_dir.entries(), runtime::context_impl(shared).workspace().bytes_held() / 1048576.0);
  CHECK(shared_kernels == serial_kernels);
  if (shared.cache_dir().empty()) {
    MESSAGE("disk cache disabled (SAGE2_DISABLE_DISK_CACHE): cache entries not compared");
  } else {
    CHECK(concurrent_dir.entries() == serial_dir.entries());
    CHECK(serial_dir.entries() == serial_kernels);  // every kernel the serial Context compiled reached its disk
  }
}
