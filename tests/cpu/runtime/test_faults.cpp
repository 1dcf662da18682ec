// Fault injection, process side (reliability issue #8): NVRTC or the driver missing. Both
// libraries are loaded once per process, so each case runs in a child process — this test
// binary itself, re-executed with a doctest filter on a "faults child" case (those are marked
// skip and never run in the normal suite) — with the environment of the fault.
// Specification: no crash; NVRTC missing → ErrorCode::NvrtcMissing naming what was tried, while
// kernels already in the disk cache are still served (built by whichever NVRTC: without one the
// key cannot name it) and a damaged entry is still never loaded; no driver → NoDriver from the
// C++ and the C API, every C entry point returns a status (never crashes), and nothing is
// written to the cache.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "kernels/kernel_spec.hpp"
#include "jit/nvrtc_library.hpp"
#include "base/driver.hpp"
#include "base/log.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

constexpr const char* kNoNvrtc = "/nonexistent/libnvrtc.so";
constexpr const char* kNoCuda = "/nonexistent/libcuda.so.1";

struct Run {
  int exit_code = -1;
  std::string output;
};
Run sh(const std::string& cmd) {
  Run r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
std::string quote(const std::string& s) {
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
// Runs one "faults child" case of this binary in a child process with `env` prepended.
Run run_child(const std::string& filter, const std::string& env) {
  return sh(env + " SAGE2_FAULT_CHILD=1 " + quote(self_exe()) + " " + quote("--test-case=" + filter) +
            " --no-skip=true --no-version=true");
}
bool child_passed(const Run& r) {
  return r.exit_code == 0 && r.output.find("1 passed") != std::string::npos &&
         r.output.find("0 failed") != std::string::npos;
}
const char* child_env(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE_MESSAGE(std::getenv("SAGE2_FAULT_CHILD") != nullptr, "a 'faults child' case runs only in a child");
  REQUIRE_MESSAGE(v != nullptr, name);
  return v;
}

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

struct FaultDir {
  std::string path;
  FaultDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-faults-proc-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~FaultDir() { (void)std::system(("rm -rf " + quote(path)).c_str()); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

kernels::KernelSpec spec_of(kernels::QuantOp op) {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::Quantize;
  s.op = op;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 64;
  return s;
}
// The cached one, one never compiled, and one whose entry holds the cached one's bytes.
kernels::KernelSpec cached_spec() { return spec_of(kernels::QuantOp::ChannelStats); }
kernels::KernelSpec uncached_spec() { return spec_of(kernels::QuantOp::QuantizeK); }
kernels::KernelSpec swapped_spec() { return spec_of(kernels::QuantOp::QuantizeV); }

// Current address-space size of this process, in bytes (VmSize).
long long vm_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) return std::atoll(line.c_str() + 7) * 1024;
  return -1;
}

void check_nvrtc_missing(const Error& e) {
  CHECK(e.code() == ErrorCode::NvrtcMissing);
  const std::string m = e.what();
  CHECK(m.find("SAGE2_LIBNVRTC") != std::string::npos);  // says how to fix it
  CHECK(m.find(kNoNvrtc) != std::string::npos);          // and what was tried
  CHECK(m.find("libnvrtc.so.13") != std::string::npos);
}

}  // namespace

// ---- NVRTC that cannot be loaded --------------------------------------------------------------
// The search falls back from $SAGE2_LIBNVRTC to the system's libnvrtc and the build toolkit's, so
// a wrong SAGE2_LIBNVRTC alone does not make NVRTC missing. The child therefore also caps its
// address space 16 MiB above what it uses: every libnvrtc (≥ 50 MB) then fails to map, which is
// what a machine without one looks like to dlopen.

TEST_CASE("faults child: NVRTC unloadable under an address-space limit" * doctest::skip()) {
  const std::string dir = child_env("SAGE2_FAULT_DIR");
  const std::string tools = child_env("SAGE2_FAULT_TOOLS");
  const long long vm = vm_bytes();
  REQUIRE(vm > 0);
  const rlim_t cap = static_cast<rlim_t>(vm + (16ll << 20));
  struct rlimit rl {cap, cap};
  REQUIRE(::setrlimit(RLIMIT_AS, &rl) == 0);

  CHECK(jit::nvrtc::try_api() == nullptr);
  CHECK(jit::nvrtc_version() == std::pair<int, int>{0, 0});  // never throws
  CHECK(version_info().nvrtc_major == 0);
  try {
    (void)jit::compile(uncached_spec());
    FAIL("compiled without NVRTC");
  } catch (const Error& e) {
    check_nvrtc_missing(e);
  }
  try {
    (void)jit::compile_source(uncached_spec(), "extern \"C\" __global__ void k() {}");
    FAIL("compiled without NVRTC");
  } catch (const Error& e) {
    check_nvrtc_missing(e);
  }

  // The disk cache still serves what it has, byte for byte: without NVRTC the key cannot name a
  // compiler, so the entry of the same code built by any NVRTC (here the parent's) is used.
  const DiskCache cache(dir);
  const jit::KernelBuild cached = jit::make_build(cached_spec());
  CHECK_FALSE(cached.toolchain.has_nvrtc());
  const auto k = cache.load_build(cached);
  REQUIRE(k.has_value());
  CHECK(k->key == child_env("SAGE2_FAULT_CACHED_KEY"));
  CHECK(k->key.rfind(cached.stem, 0) == 0);
  CHECK(k->entry == cached_spec().entry_name());
  CHECK(k->cubin == slurp(dir + "/cubin-of-cached"));
  // The swapped entry holds the cached one's key: no other code's kernel passes for this one.
  CHECK_FALSE(cache.load_build(jit::make_build(swapped_spec())).has_value());
  // A damaged (here: another key's) entry is still refused; the recompile then says NvrtcMissing.
  const std::string swapped_key = child_env("SAGE2_FAULT_SWAPPED_KEY");
  int warnings = 0;
  static int* counter = &warnings;
  base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++*counter; });
  CHECK_FALSE(cache.load(swapped_key).has_value());
  base::log::set_sink(nullptr);
  CHECK(warnings == 1);
  CHECK_FALSE(exists(cache.entry_path(swapped_key)));
  CHECK_THROWS_AS(jit::compile(swapped_spec()), Error);

  // sage2-info (inheriting the limit; a smaller program than this one) says so plainly.
  const Run info = sh(std::string("SAGE2_LIBNVRTC=") + kNoNvrtc + " SAGE2_LIBCUDA=" + kNoCuda +
                      " SAGE2_CACHE_DIR=" + quote(dir) + " " + quote(tools + "/sage2-info"));
  INFO(info.output);
  CHECK(info.output.find("NVRTC not found") != std::string::npos);
  CHECK(info.output.find("(1 entries, 0 invalid)") != std::string::npos);
  CHECK(info.exit_code == 3);  // and no driver
  MESSAGE("child: address space capped at " << (cap >> 20) << " MiB; NVRTC missing as expected");
}

TEST_CASE("faults: NVRTC missing gives NvrtcMissing and cached kernels are still served (child process)") {
  REQUIRE_MESSAGE(jit::nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  FaultDir tmp;
  const std::string dir = tmp / "cache";
  const DiskCache cache(dir);
  const auto k = jit::compile(cached_spec());
  REQUIRE(cache.store(k));
  spit(dir + "/cubin-of-cached", k.cubin);
  const std::string cached_key = jit::make_build(cached_spec()).key, swapped_key = jit::make_build(swapped_spec()).key;
  REQUIRE(k.key == cached_key);
  spit(cache.entry_path(swapped_key), slurp(cache.entry_path(cached_key)));

  // A nonexistent SAGE2_LIBNVRTC alone: the search falls back to the next candidates.
  const auto candidates = jit::nvrtc::default_candidates();
  REQUIRE(candidates.size() >= 2);
  const Run fallback = sh(std::string("SAGE2_LIBNVRTC=") + kNoNvrtc + " SAGE2_LIBCUDA=" + kNoCuda +
                          " SAGE2_CACHE_DIR=" + quote(tmp / "empty") + " " SAGE2_TOOLS_DIR "/sage2-info");
  INFO(fallback.output);
  CHECK(fallback.output.find("NVRTC 1") != std::string::npos);
  CHECK(fallback.exit_code == 3);

  const Run child = run_child("faults child: NVRTC unloadable*",
                              std::string("SAGE2_LIBNVRTC=") + kNoNvrtc + " SAGE2_LIBCUDA=" + kNoCuda +
                                  " SAGE2_FAULT_DIR=" + quote(dir) + " SAGE2_FAULT_TOOLS=" + quote(SAGE2_TOOLS_DIR) +
                                  " SAGE2_FAULT_CACHED_KEY=" + quote(cached_key) +
                                  " SAGE2_FAULT_SWAPPED_KEY=" + quote(swapped_key));
  INFO(child.output);
  CHECK(child_passed(child));
  // The refused entry was removed by the child; the cached one is untouched.
  CHECK_FALSE(exists(cache.entry_path(swapped_key)));
  REQUIRE(cache.load(cached_key).has_value());
  CHECK(cache.load(cached_key)->cubin == k.cubin);
}

// ---- no driver ----------------------------------------------------------------------------------

TEST_CASE("faults child: no driver through the C and C++ APIs" * doctest::skip()) {
  const std::string dir = child_env("SAGE2_FAULT_DIR");
  CHECK_FALSE(base::driver::available());
  CHECK(base::driver::unavailable_reason().find(kNoCuda) != std::string::npos);
  CHECK(sage2_device_count() == 0);
  CHECK(device_count() == 0);
  CHECK(version_info().driver_version == 0);

  sage2_context* ctx = reinterpret_cast<sage2_context*>(0x1);
  CHECK(sage2_context_create(0, dir.c_str(), 1, &ctx) == SAGE2_ERROR_NO_DRIVER);
  CHECK(ctx == nullptr);
  CHECK(std::string(sage2_last_error()).find(kNoCuda) != std::string::npos);
  for (int device : {-1, 0, 7}) {
    ctx = reinterpret_cast<sage2_context*>(0x1);
    const sage2_status s = sage2_context_create(device, nullptr, 0, &ctx);
    CHECK(s != SAGE2_OK);
    CHECK((s == SAGE2_ERROR_NO_DRIVER || s == SAGE2_ERROR_INVALID_ARGUMENT));
    CHECK(ctx == nullptr);
  }
  // Without a context every attention call is refused with a status, whatever its arguments.
  const sage2_tensor q = sage2_tensor_hnd(reinterpret_cast<void*>(0x10000), SAGE2_DTYPE_F16, 1, 2, 64, 64);
  const sage2_tensor o = sage2_tensor_hnd(reinterpret_cast<void*>(0x90000), SAGE2_DTYPE_F16, 1, 2, 64, 64);
  sage2_attention_params p;
  sage2_attention_params_init(&p);
  CHECK(sage2_attention(nullptr, &q, &q, &q, &o, &p, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(sage2_attention(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  std::size_t bytes = 123;
  CHECK(sage2_workspace_size(nullptr, &q, &q, &q, &o, &p, &bytes) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(sage2_workspace_size(nullptr, &q, &q, &q, &o, nullptr, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  char name[16] = "x", arch[8] = "y";
  CHECK(sage2_context_device(nullptr, name, sizeof name, arch, sizeof arch) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(sage2_context_destroy(nullptr) == SAGE2_OK);
  // The C++ API says the same.
  try {
    Context c(0);
    FAIL("a Context without a driver");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::NoDriver);
    CHECK(std::string(e.what()).find(kNoCuda) != std::string::npos);
  }
  CHECK_FALSE(exists(dir));  // nothing was written for a context that never came to be
}

TEST_CASE("faults: no driver (SAGE2_LIBCUDA=/nonexistent) through the C API, in a child process") {
  FaultDir tmp;
  const std::string dir = tmp / "never-created";
  const Run child = run_child("faults child: no driver*",
                              std::string("SAGE2_LIBCUDA=") + kNoCuda + " SAGE2_FAULT_DIR=" + quote(dir));
  INFO(child.output);
  CHECK(child_passed(child));
  CHECK_FALSE(exists(dir));
}
