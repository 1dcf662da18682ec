// Kernel counts of real loads (issue 43), on the GPU: a fresh Context on an empty cache directory
// compiles its first call's kernels and nothing on the same call again; a second fresh Context on
// the now filled directory loads them all from disk; a damaged entry is recompiled and its notice
// names the reason; the process counts cover both Contexts; the C functions agree. The counters'
// arithmetic and the NULL checks are CPU tests (tests/cpu/runtime/test_kernel_stats.cpp).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "gpu_env.hpp"
#include "sage2/sage2.h"

using namespace sage2;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-kernel-stats-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {  // kernel entries: "<16 hex>.s2c"
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      const std::string f = e.path().filename().string();
      if (f.size() == 20 && f.substr(16) == ".s2c") out.push_back(e.path().string());
    }
    return out;
  }
};

// Every notice, whatever the level (a sink sees them all): the compile notice of a kernel is info
// the first time in the process and debug after, and other cases may have compiled these keys.
struct Notices {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
  static void sink(base::log::Level, const std::string& m) {
    std::lock_guard<std::mutex> lock(mu());
    lines().push_back(m);
  }
  Notices() {
    lines().clear();
    base::log::set_sink(&sink);
  }
  ~Notices() { base::log::set_sink(nullptr); }
  static std::size_t count(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu());
    std::size_t n = 0;
    for (const auto& l : lines()) n += l.rfind("compiling kernel ", 0) == 0 && l.find(text) != std::string::npos;
    return n;
  }
};

ContextOptions on_disk(const std::string& dir) {
  ContextOptions o;
  o.disk_cache = true;  // whatever SAGE2_DISABLE_DISK_CACHE says
  o.cache_dir = dir;
  o.tuning = false;     // the heuristic tile: the same kernels in every Context
  return o;
}

// One quantized call (quantize stage + attention: several kernels) on zeros.
struct Call {
  static constexpr std::int64_t B = 1, H = 2, N = 256, D = 64;
  test::DeviceBuffer q{B * H * N * D * 2}, k{B * H * N * D * 2}, v{B * H * N * D * 2}, o{B * H * N * D * 2};
  Call() {
    q.poison(0);
    k.poison(0);
    v.poison(0);
  }
  void run(Context& ctx) {
    AttentionParams p;
    p.small_q_path = SmallQPath::Quantized;  // N·H/H = 256 rows would take the direct path on sm_90
    ctx.attention(TensorRef::hnd(q.get(), DType::F16, B, H, N, D), TensorRef::hnd(k.get(), DType::F16, B, H, N, D),
                  TensorRef::hnd(v.get(), DType::F16, B, H, N, D), TensorRef::hnd(o.get(), DType::F16, B, H, N, D), p);
    test::synchronize();
  }
};

void print(const char* what, const KernelStats& s) {
  std::printf("kernel stats %-28s compiled %lld (%.2f s), disk %lld, memory hits %lld, held %lld\n", what,
              (long long)s.compiled, s.compile_seconds, (long long)s.disk_loads, (long long)s.memory_hits,
              (long long)s.loaded);
}

}  // namespace

TEST_CASE("gpu kernel stats: compiled on an empty cache, none on the same call again, all from disk in a new Context") {
  TempDir dir;
  Call call;
  const KernelStats process0 = process_kernel_stats();
  Notices notices;
  KernelStats first, again, fromdisk;
  {
    Context a(0, on_disk(dir.path));
    CHECK(a.kernel_stats().compiled == 0);
    CHECK(a.kernel_stats().loaded == 0);
    call.run(a);
    first = a.kernel_stats();
    print("first call, empty cache:", first);
    CHECK(first.compiled > 0);
    CHECK(first.disk_loads == 0);
    CHECK(first.memory_hits == 0);  // a cold call asks for each kernel once (load_all's pointers)
    CHECK(first.loaded == first.compiled);
    CHECK(first.compile_seconds > 0);
    // One notice per compile, naming the directory the kernel was not found in.
    CHECK(Notices::count("(not in the disk cache " + dir.path + ")") == static_cast<std::size_t>(first.compiled));
    CHECK(dir.entries().size() == static_cast<std::size_t>(first.compiled));  // each stored

    call.run(a);
    again = a.kernel_stats();
    print("same call again:", again);
    CHECK(again.compiled == first.compiled);
    CHECK(again.disk_loads == 0);
    CHECK(again.loaded == first.loaded);

    // The C view of the same Context (a handle around it is what the C API gets).
    sage2_context* h = nullptr;
    REQUIRE(sage2_context_create(0, dir.path.c_str(), 1, &h) == SAGE2_OK);
    sage2_kernel_stats c;
    CHECK(sage2_context_kernel_stats(h, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(sage2_last_error()).find("out is NULL") != std::string::npos);
    REQUIRE(sage2_context_kernel_stats(h, &c) == SAGE2_OK);
    CHECK(c.compiled == 0);  // a fresh context: nothing asked for yet
    CHECK(c.loaded == 0);
    CHECK(sage2_context_destroy(h) == SAGE2_OK);
  }
  {
    Context b(0, on_disk(dir.path));
    call.run(b);
    fromdisk = b.kernel_stats();
    print("new Context, filled cache:", fromdisk);
    CHECK(fromdisk.compiled == 0);
    CHECK(fromdisk.disk_loads == first.compiled);
    CHECK(fromdisk.loaded == fromdisk.disk_loads);
  }
  const KernelStats process1 = process_kernel_stats();
  print("process (delta):", KernelStats{process1.compiled - process0.compiled, process1.disk_loads - process0.disk_loads,
                                        process1.memory_hits - process0.memory_hits, process1.loaded - process0.loaded,
                                        process1.compile_seconds - process0.compile_seconds});
  CHECK(process1.compiled - process0.compiled >= first.compiled + fromdisk.compiled);
  CHECK(process1.disk_loads - process0.disk_loads >= first.disk_loads + fromdisk.disk_loads);
  CHECK(process1.loaded == process0.loaded);  // both Contexts are gone, and their kernels with them
  sage2_kernel_stats cp;
  REQUIRE(sage2_process_kernel_stats(&cp) == SAGE2_OK);
  CHECK(cp.compiled >= process1.compiled);
  CHECK(cp.disk_loads >= process1.disk_loads);

  SUBCASE("a damaged entry is recompiled, and the notice says why") {
    const std::vector<std::string> files = dir.entries();
    REQUIRE(!files.empty());
    {
      std::ofstream f(files.front(), std::ios::binary | std::ios::trunc);
      f << "not a cubin";
    }
    Context c(0, on_disk(dir.path));
    call.run(c);
    const KernelStats s = c.kernel_stats();
    print("one entry damaged:", s);
    CHECK(s.compiled == 1);
    CHECK(s.disk_loads == first.compiled - 1);
    CHECK(Notices::count("(entry rejected: bad entry " + files.front() + ": ") == 1);
  }
  SUBCASE("without a disk cache every kernel is compiled, and the notice says so") {
    ContextOptions o = on_disk(dir.path);
    o.disk_cache = false;
    Context c(0, o);
    call.run(c);
    const KernelStats s = c.kernel_stats();
    print("disk cache disabled:", s);
    CHECK(s.compiled == first.compiled);
    CHECK(s.disk_loads == 0);
    CHECK(Notices::count("(disk cache disabled)") == static_cast<std::size_t>(first.compiled));
  }
}
