// Kernel counts (issue 43) without a GPU: the counters' arithmetic (a Context's set feeding the
// process's, which outlives it), their use from many threads, the process-wide set behind
// sage2::process_kernel_stats and sage2_process_kernel_stats, the C functions' NULL checks,
// sage2-info's line; and real Contexts loading real kernels (NVRTC, the disk cache) on the fake
// driver of tests/cpu/fake_driver.hpp, in a child process (a "kernel stats child" case of this
// binary, skipped in the normal suite): the counts and the compile notices of a cold call, the
// same call again, a second Context on the filled cache, a damaged entry and no disk cache.
// tests/gpu/test_kernel_stats.cpp checks the same on a GPU.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/driver.hpp"
#include "base/log.hpp"
#include "fake_driver.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_stats.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"
#include "test_support.hpp"

using sage2::KernelStats;
using sage2::runtime::KernelCounters;

namespace {
bool same(const KernelStats& a, const KernelStats& b) {
  return a.compiled == b.compiled && a.disk_loads == b.disk_loads && a.memory_hits == b.memory_hits &&
         a.loaded == b.loaded && a.compile_seconds == b.compile_seconds;
}
}  // namespace

TEST_CASE("kernel stats: a Context's counts add to the total, which keeps them after the Context is gone") {
  KernelCounters total;
  CHECK(same(total.snapshot(), KernelStats{}));
  {
    KernelCounters a(total), b(total);
    a.compiled(0.5);
    a.loaded();
    a.compiled(0.25);
    a.loaded();
    a.memory_hit();
    b.disk_load();
    b.loaded();
    b.memory_hit();
    b.memory_hit();
    const KernelStats sa = a.snapshot(), sb = b.snapshot(), st = total.snapshot();
    CHECK(sa.compiled == 2);
    CHECK(sa.disk_loads == 0);
    CHECK(sa.memory_hits == 1);
    CHECK(sa.loaded == 2);
    CHECK(sa.compile_seconds == doctest::Approx(0.75));
    CHECK(sb.compiled == 0);
    CHECK(sb.disk_loads == 1);
    CHECK(sb.memory_hits == 2);
    CHECK(sb.loaded == 1);
    CHECK(sb.compile_seconds == 0);
    CHECK(st.compiled == 2);
    CHECK(st.disk_loads == 1);
    CHECK(st.memory_hits == 3);
    CHECK(st.loaded == 3);
    CHECK(st.compile_seconds == doctest::Approx(0.75));
  }
  // The Contexts are gone: what they did stays, what they held does not.
  const KernelStats after = total.snapshot();
  CHECK(after.compiled == 2);
  CHECK(after.disk_loads == 1);
  CHECK(after.memory_hits == 3);
  CHECK(after.loaded == 0);
  CHECK(after.compile_seconds == doctest::Approx(0.75));
  // A negative or zero duration (a clock step) adds a compile, never negative time.
  KernelCounters c(total);
  c.compiled(-1.0);
  c.compiled(0.0);
  CHECK(total.snapshot().compiled == 4);
  CHECK(total.snapshot().compile_seconds == doctest::Approx(0.75));
}

TEST_CASE("kernel stats: counts from many threads add up exactly") {
  KernelCounters total;
  KernelCounters ctx(total);
  constexpr int kThreads = 8, kEach = 5000;
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        ctx.compiled(1e-6);
        ctx.disk_load();
        ctx.memory_hit();
        ctx.loaded();
      }
    });
  for (auto& t : pool) t.join();
  const KernelStats s = ctx.snapshot();
  CHECK(s.compiled == kThreads * kEach);
  CHECK(s.disk_loads == kThreads * kEach);
  CHECK(s.memory_hits == kThreads * kEach);
  CHECK(s.loaded == kThreads * kEach);
  CHECK(s.compile_seconds == doctest::Approx(kThreads * kEach * 1e-6));
  CHECK(same(total.snapshot(), s));
}

TEST_CASE("kernel stats: the process's counts in C++ and C, and a Context that feeds them") {
  sage2_kernel_stats c0;
  REQUIRE(sage2_process_kernel_stats(&c0) == SAGE2_OK);
  CHECK(std::string(sage2_last_error()).empty());
  const KernelStats before = sage2::process_kernel_stats();
  CHECK(same(before, KernelCounters::process().snapshot()));
  CHECK(c0.compiled == before.compiled);
  CHECK(c0.disk_loads == before.disk_loads);
  CHECK(c0.memory_hits == before.memory_hits);
  CHECK(c0.loaded == before.loaded);
  CHECK(c0.compile_seconds == before.compile_seconds);
  {
    KernelCounters ctx(KernelCounters::process());  // what a KernelLoader holds
    ctx.compiled(0.125);
    ctx.loaded();
    ctx.disk_load();
    ctx.loaded();
    ctx.memory_hit();
    sage2_kernel_stats c;
    std::memset(&c, 0xff, sizeof c);
    REQUIRE(sage2_process_kernel_stats(&c) == SAGE2_OK);
    CHECK(c.compiled == before.compiled + 1);
    CHECK(c.disk_loads == before.disk_loads + 1);
    CHECK(c.memory_hits == before.memory_hits + 1);
    CHECK(c.loaded == before.loaded + 2);
    CHECK(c.compile_seconds == doctest::Approx(before.compile_seconds + 0.125));
  }
  const KernelStats after = sage2::process_kernel_stats();
  CHECK(after.compiled == before.compiled + 1);
  CHECK(after.loaded == before.loaded);  // its kernels were unloaded with it
}

TEST_CASE("kernel stats: the C functions refuse NULL with invalid_argument and a message") {
  sage2_kernel_stats out;
  std::memset(&out, 0x5a, sizeof out);
  const sage2_kernel_stats untouched = out;
  CHECK(sage2_context_kernel_stats(nullptr, &out) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(std::memcmp(&out, &untouched, sizeof out) == 0);
  CHECK(sage2_context_kernel_stats(nullptr, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(sage2_process_kernel_stats(nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("out is NULL") != std::string::npos);
  CHECK(sage2_process_kernel_stats(&out) == SAGE2_OK);  // a success clears the message
  CHECK(std::string(sage2_last_error()).empty());
}

TEST_CASE("kernel stats: sage2-info ends with the process's kernel counts, without a driver too") {
  const auto r = sage2::test::run_command("SAGE2_LIBCUDA=/nonexistent/libcuda.so.1 SAGE2_CACHE_DIR=/tmp/sage2-info-test " SAGE2_TOOLS_DIR
                                          "/sage2-info 2>&1");
  CHECK(r.code == 3);
  INFO(r.out);
  // It creates no Context: nothing compiled or loaded in its process.
  CHECK(r.out.find("\nkernels: 0 compiled, 0 from the disk cache, 0 memory hits (this process)\n") != std::string::npos);
}

// ---- real loads on the fake driver, in a child process ------------------------------------------
namespace {

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> entries(const std::string& dir) {  // kernel entries: "<16 hex>.s2c"
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.size() == 20 && f.substr(16) == ".s2c") out.push_back(e.path().string());
  }
  return out;
}

// The compile notices, whatever their level (info the first time per key, debug after).
struct CompileNotices {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::pair<sage2::base::log::Level, std::string>>& lines() {
    static std::vector<std::pair<sage2::base::log::Level, std::string>> l;
    return l;
  }
  static void sink(sage2::base::log::Level level, const std::string& m) {
    if (m.rfind("compiling kernel ", 0) != 0) return;
    std::lock_guard<std::mutex> lock(mu());
    lines().push_back({level, m});
  }
  CompileNotices() { sage2::base::log::set_sink(&sink); }
  ~CompileNotices() { sage2::base::log::set_sink(nullptr); }
  // Notices containing `text` at `level` since the last call, which forgets them.
  static std::size_t take(const std::string& text, sage2::base::log::Level level) {
    std::lock_guard<std::mutex> lock(mu());
    std::size_t n = 0;
    for (const auto& [l, m] : lines()) n += l == level && m.find(text) != std::string::npos;
    lines().clear();
    return n;
  }
};

// Host memory standing in for device memory (the fake's cuMemAlloc is posix_memalign).
struct FakeTensor {
  CUdeviceptr p = 0;
  explicit FakeTensor(std::size_t bytes) {
    sage2::base::driver::check(sage2::base::driver::api().cuMemAlloc_v2(&p, bytes), "cuMemAlloc");
    std::memset(reinterpret_cast<void*>(p), 0, bytes);
  }
  ~FakeTensor() { sage2::base::driver::api().cuMemFree_v2(p); }
  sage2::TensorRef ref(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) const {
    return sage2::TensorRef::hnd(reinterpret_cast<void*>(p), sage2::DType::F16, b, h, n, d);
  }
};

// batch 1 or 2: another call plan, the same kernels.
void quantized_call(sage2::Context& ctx, std::int64_t B = 1) {
  constexpr std::int64_t H = 2, N = 256, D = 64, kBytes = 2 * H * N * D * 2;
  static FakeTensor q(kBytes), k(kBytes), v(kBytes), o(kBytes);
  sage2::AttentionParams p;
  p.small_q_path = sage2::SmallQPath::Quantized;  // the direct path would take these few rows
  ctx.attention(q.ref(B, H, N, D), k.ref(B, H, N, D), v.ref(B, H, N, D), o.ref(B, H, N, D), p);
}

sage2::ContextOptions options(const std::string& dir, bool disk = true) {
  sage2::ContextOptions o;
  o.disk_cache = disk;
  o.cache_dir = dir;
  o.tuning = false;                                   // the heuristic tile in every Context
  o.family = sage2::AttentionFamily::Mma;             // the fake has no tensor maps (wgmma's TMA)
  o.quant_path = sage2::QuantPath::Split;
  o.tiered_compile = false;  // every call's optimized kernels (the tiered cases below turn it on)
  return o;
}

}  // namespace

TEST_CASE("kernel stats child: Contexts on the fake driver load real kernels" * doctest::skip()) {
  using sage2::base::log::Level;
  const char* dir_env = std::getenv("SAGE2_STATS_CHILD_DIR");
  REQUIRE_MESSAGE(dir_env != nullptr, "a 'kernel stats child' case runs only in a child");
  const std::string dir = dir_env;
  REQUIRE_MESSAGE(sage2::base::driver::available(), sage2::base::driver::unavailable_reason());
  CompileNotices notices;
  const sage2::KernelStats p0 = sage2::process_kernel_stats();

  sage2::KernelStats first;
  {
    sage2::Context a(0, options(dir));
    quantized_call(a);
    first = a.kernel_stats();
    MESSAGE("cold call: " << first.compiled << " compiled in " << first.compile_seconds << " s");
    CHECK(first.compiled >= 2);  // quantize kernels and the attention kernel
    CHECK(first.disk_loads == 0);
    CHECK(first.memory_hits == 0);  // each kernel asked for once (load_all's pointers)
    CHECK(first.loaded == first.compiled);
    CHECK(first.compile_seconds > 0);
    CHECK(entries(dir).size() == static_cast<std::size_t>(first.compiled));
    // A process's first compile of a key is an info notice naming the directory it was not in.
    CHECK(CompileNotices::take("(not in the disk cache " + dir + ")", Level::Info) ==
          static_cast<std::size_t>(first.compiled));
    quantized_call(a);  // the plan is cached: no kernel asked for
    const sage2::KernelStats again = a.kernel_stats();
    CHECK(again.compiled == first.compiled);
    CHECK(again.disk_loads == 0);
    CHECK(again.memory_hits == 0);
    // Another shape of the same kernels: a new plan, served from memory.
    quantized_call(a, 2);
    const sage2::KernelStats other = a.kernel_stats();
    CHECK(other.compiled == first.compiled);
    CHECK(other.memory_hits == first.compiled);
    CHECK(other.loaded == first.loaded);
    CHECK(sage2::runtime::context_impl(a).kernels().loaded().size() == static_cast<std::size_t>(other.loaded));
  }
  {
    sage2::Context b(0, options(dir));
    quantized_call(b);
    const sage2::KernelStats s = b.kernel_stats();
    CHECK(s.compiled == 0);
    CHECK(s.disk_loads == first.compiled);
    CHECK(s.loaded == s.disk_loads);
    CHECK(CompileNotices::take("compiling", Level::Info) == 0);
  }
  const sage2::KernelStats p1 = sage2::process_kernel_stats();
  CHECK(p1.compiled - p0.compiled == first.compiled);
  CHECK(p1.disk_loads - p0.disk_loads == first.compiled);
  CHECK(p1.loaded == p0.loaded);  // both Contexts gone
  {
    const std::string damaged = entries(dir).front();
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << "not a cubin";
    sage2::Context c(0, options(dir));
    quantized_call(c);
    const sage2::KernelStats s = c.kernel_stats();
    CHECK(s.compiled == 1);
    CHECK(s.disk_loads == first.compiled - 1);
    // The key was compiled before in this process: the notice is debug now, with the reason.
    CHECK(CompileNotices::take("(entry rejected: bad entry " + damaged + ": ", Level::Debug) == 1);
  }
  {
    sage2::Context d(0, options(dir, false));
    quantized_call(d);
    const sage2::KernelStats s = d.kernel_stats();
    CHECK(s.compiled == first.compiled);
    CHECK(s.disk_loads == 0);
    CHECK(CompileNotices::take("(disk cache disabled)", Level::Debug) == static_cast<std::size_t>(first.compiled));
  }
  const sage2::KernelStats p2 = sage2::process_kernel_stats();
  CHECK(p2.compiled - p0.compiled == 2 * first.compiled + 1);
  sage2_kernel_stats c;
  REQUIRE(sage2_process_kernel_stats(&c) == SAGE2_OK);
  CHECK(c.compiled == p2.compiled);
  CHECK(c.disk_loads == p2.disk_loads);
}

namespace {
// Runs this test binary's skipped case(s) `cases` (a doctest --test-case pattern) in a child on the
// fake driver, with SAGE2_STATS_CHILD_DIR a fresh directory and `env` before the command.
sage2::test::CommandResult run_child(const char* tmp_tag, const std::string& env, const std::string& cases) {
  const sage2::test::TempDir tmp(tmp_tag);
  return sage2::test::run_command("SAGE2_LIBCUDA=" + quoted(sage2::test::fake().lib) + " SAGE2_STATS_CHILD_DIR=" +
                                  quoted(tmp.path) + " " + env + " " + quoted(self_exe()) + " " +
                                  quoted("--test-case=" + cases) + " --no-skip=true --no-version=true 2>&1");
}
std::string worker_env() { return "SAGE2_JIT_WORKER=" + quoted(std::string(SAGE2_TOOLS_DIR) + "/sage2-jit-worker"); }
}  // namespace

TEST_CASE("kernel stats: real loads counted on the fake driver (child process)") {
  REQUIRE_MESSAGE(!sage2::test::fake().lib.empty(), sage2::test::fake().problem);
  const auto r = run_child("sage2-kernel-stats", "", "kernel stats child: *");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 passed") != std::string::npos);
  CHECK(r.out.find("0 failed") != std::string::npos);
}

// Tiered compilation (issue 40, ContextOptions::tiered_compile) on the fake driver: which kernels a
// call loads, and what reaches the disk. (Their results and timings: tests/gpu/test_tiered_compile.cpp.)
namespace {
std::size_t quick_loaded(sage2::Context& c) {
  std::size_t n = 0;
  for (const auto& k : sage2::runtime::context_impl(c).kernels().loaded()) n += k.tier == sage2::runtime::BuildTier::Quick;
  return n;
}
bool background_done(sage2::Context& c, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (sage2::runtime::context_impl(c).background().running() > 0)
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(seconds)) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return true;
}
}  // namespace

TEST_CASE("tiered compile child: quick kernels first, the optimized ones in the background, only those on disk" *
          doctest::skip()) {
  const char* dir_env = std::getenv("SAGE2_STATS_CHILD_DIR");
  REQUIRE_MESSAGE(dir_env != nullptr, "a 'tiered compile child' case runs only in a child");
  const std::string dir = std::string(dir_env) + "/tiered";
  REQUIRE_MESSAGE(sage2::base::driver::available(), sage2::base::driver::unavailable_reason());
  sage2::ContextOptions o = options(dir);
  o.tiered_compile = true;
  std::size_t call_kernels = 0;
  {
    sage2::Context a(0, o);
    quantized_call(a);  // nothing cached: the quick builds
    call_kernels = quick_loaded(a);
    CHECK(call_kernels >= 3);  // channel statistics, K, V, Q and attention (split path, mma family)
    // Quick builds are never stored; the background, started beside them, may have stored some
    // optimized ones already (each kernel once: the count below is exact).
    CHECK((!std::filesystem::exists(dir) || entries(dir).size() <= call_kernels));
    REQUIRE(background_done(a, 120.0));
    CHECK(entries(dir).size() == call_kernels);  // the optimized builds of the same specs
    CHECK(a.kernel_stats().loaded == 2 * call_kernels);
    quantized_call(a, 2);  // another shape of the same kernels: all optimized at hand, no quick tier
    CHECK(quick_loaded(a) == call_kernels);
    CHECK(sage2::runtime::context_impl(a).background().running() == 0);
  }
  {
    sage2::Context b(0, o);  // the disk has every optimized kernel: no quick tier
    quantized_call(b);
    CHECK(quick_loaded(b) == 0);
    CHECK(b.kernel_stats().disk_loads == call_kernels);
  }
  {
    sage2::ContextOptions fresh = o;
    fresh.cache_dir = dir + "-fresh";
    sage2::Context c(0, fresh);
    quantized_call(c);
    CHECK(quick_loaded(c) == call_kernels);
  }  // destroyed with its background compile in flight: the destructor waits for it
  CHECK(entries(dir + "-fresh").size() == call_kernels);
  {
    sage2::ContextOptions off = o;
    off.tiered_compile = false;
    off.cache_dir = dir + "-off";
    sage2::Context d(0, off);
    quantized_call(d);
    CHECK(quick_loaded(d) == 0);
    CHECK(entries(dir + "-off").size() == static_cast<std::size_t>(d.kernel_stats().compiled));
  }
}

// An Auto call the quantized path takes (1024 query rows per kv head) at a head dim the direct
// path runs: its quick plan is the direct path's.
struct AutoCall {
  static constexpr std::int64_t H = 2, N = 1024, D = 64, kBytes = H * N * D * 2;
  FakeTensor q{kBytes}, k{kBytes}, v{kBytes}, o{kBytes};
  void run(sage2::Context& ctx) const {
    ctx.attention(q.ref(1, H, N, D), k.ref(1, H, N, D), v.ref(1, H, N, D), o.ref(1, H, N, D), sage2::AttentionParams{});
  }
  std::size_t workspace(sage2::Context& ctx) const {
    return ctx.workspace_size(q.ref(1, H, N, D), k.ref(1, H, N, D), v.ref(1, H, N, D), o.ref(1, H, N, D));
  }
};

TEST_CASE("tiered direct child: the direct path's quick kernels stand in for a quantized call" * doctest::skip()) {
  const char* dir_env = std::getenv("SAGE2_STATS_CHILD_DIR");
  REQUIRE_MESSAGE(dir_env != nullptr, "a 'tiered compile child' case runs only in a child");
  const std::string dir = std::string(dir_env) + "/direct-tier";
  REQUIRE_MESSAGE(sage2::base::driver::available(), sage2::base::driver::unavailable_reason());
  sage2::ContextOptions o = options(dir);
  o.tiered_compile = true;
  sage2::Context a(0, o);
  auto& impl = sage2::runtime::context_impl(a);
  const AutoCall call;
  const std::size_t bytes_before = call.workspace(a);
  call.run(a);
  std::size_t quick = 0, quick_direct = 0;
  for (const auto& k : impl.kernels().loaded())
    if (k.tier == sage2::runtime::BuildTier::Quick) ++quick, quick_direct += k.key.rfind("direct", 0) == 0;
  CHECK(quick >= 1);
  CHECK(quick_direct == quick);  // the stand-in: the direct path's kernels only
  // workspace_size() asked before the first call covers both tiers, and never grows
  CHECK(call.workspace(a) == bytes_before);
  REQUIRE(background_done(a, 120.0));
  CHECK(call.workspace(a) <= bytes_before);
  CHECK(call.workspace(a) > 0);
  // the disk holds the quantized path's optimized kernels only
  CHECK(entries(dir).size() == static_cast<std::size_t>(a.kernel_stats().compiled) - quick);
  for (const auto& e : entries(dir)) CHECK(e.size() > 0);
  const std::size_t loaded = impl.kernels().loaded().size();
  call.run(a);  // the optimized plan: nothing new loads
  CHECK(impl.kernels().loaded().size() == loaded);
  CHECK(impl.background().running() == 0);
}

TEST_CASE("tiered compile: the direct path's quick kernels stand in for a quantized call (child process)") {
  REQUIRE_MESSAGE(!sage2::test::fake().lib.empty(), sage2::test::fake().problem);
  const auto r = run_child("sage2-tiered-direct", worker_env(), "tiered direct child: *");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 passed") != std::string::npos);
  CHECK(r.out.find("0 failed") != std::string::npos);
}

TEST_CASE("tiered compile: the quick tier, the background build and the disk on the fake driver (child process)") {
  REQUIRE_MESSAGE(!sage2::test::fake().lib.empty(), sage2::test::fake().problem);
  const auto r = run_child("sage2-tiered", worker_env(), "tiered compile child: *");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 passed") != std::string::npos);
  CHECK(r.out.find("0 failed") != std::string::npos);
}

TEST_CASE("tiered compile child with a failing worker: the call waits for the optimized kernels instead" * doctest::skip()) {
  const char* dir_env = std::getenv("SAGE2_STATS_CHILD_DIR");
  REQUIRE_MESSAGE(dir_env != nullptr, "a 'tiered compile child' case runs only in a child");
  REQUIRE_MESSAGE(sage2::base::driver::available(), sage2::base::driver::unavailable_reason());
  sage2::ContextOptions o = options(std::string(dir_env) + "/failing-worker");
  o.tiered_compile = true;
  sage2::Context a(0, o);
  quantized_call(a);
  CHECK(quick_loaded(a) == 0);
  CHECK(a.kernel_stats().loaded >= 3);
  // The background build, started beside the quick ones, shares the optimized kernels the call
  // waited for: it ends without compiling anything twice.
  REQUIRE(background_done(a, 120.0));
  CHECK(a.kernel_stats().compiled == a.kernel_stats().loaded);
}

TEST_CASE("tiered compile: a worker that fails does not fail the call (child process)") {
  REQUIRE_MESSAGE(!sage2::test::fake().lib.empty(), sage2::test::fake().problem);
  const auto r = run_child("sage2-tiered-fail", "SAGE2_JIT_WORKER=/bin/false", "tiered compile child with a failing worker: *");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 passed") != std::string::npos);
  CHECK(r.out.find("a quick build failed") != std::string::npos);  // said once
}
