// Specification of the runtime's behaviour without a GPU: the library loads, says plainly that
// no driver was found, and the C ABI reports it through status codes and messages.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "base/driver.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"
#include "test_support.hpp"

namespace {
struct Run {
  int exit_code;
  std::string output;
};
Run run(const std::string& cmd) {
  const auto r = sage2::test::run_command(cmd + " 2>&1");
  return {r.code, r.out};
}
}  // namespace

TEST_CASE("runtime: without a driver, Context creation fails with NoDriver naming libcuda") {
  if (sage2::base::driver::available()) {
    MESSAGE("a CUDA driver is present here; the no-driver path is covered by the sage2-info case");
    return;
  }
  CHECK(sage2::device_count() == 0);
  try {
    sage2::Context ctx(0);
    FAIL("Context(0) succeeded without a driver");
  } catch (const sage2::Error& e) {
    CHECK(e.code() == sage2::ErrorCode::NoDriver);
    CHECK(std::string(e.what()).find("libcuda") != std::string::npos);
  }
}

TEST_CASE("runtime: sage2-info says plainly that no driver was found and exits 3") {
  const Run r = run("SAGE2_LIBCUDA=/nonexistent/libcuda.so.1 SAGE2_CACHE_DIR=/tmp/sage2-info-test " SAGE2_TOOLS_DIR
                    "/sage2-info");
  CHECK(r.exit_code == 3);
  CHECK(r.output.find("no CUDA driver found") != std::string::npos);
  CHECK(r.output.find("sage2 ") != std::string::npos);
  CHECK(run(SAGE2_TOOLS_DIR "/sage2-info --bogus").exit_code == 2);
}

TEST_CASE("runtime: sage2-info --help and usage errors (issue 32: CLI11)") {
  const Run h = run(SAGE2_TOOLS_DIR "/sage2-info --help");
  CHECK(h.exit_code == 0);
  for (const char* s : {"--archs", "--version", "exit codes", "3 no CUDA driver"})
    CHECK_MESSAGE(h.output.find(s) != std::string::npos, s);
  // One line naming what was wrong, exit 2.
  const Run bad = run(SAGE2_TOOLS_DIR "/sage2-info --archs=1");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.substr(0, bad.output.find('\n')) == "sage2-info: --archs takes no value");
  const Run extra = run(SAGE2_TOOLS_DIR "/sage2-info archs");
  CHECK(extra.exit_code == 2);
  CHECK(extra.output.substr(0, extra.output.find('\n')) == "sage2-info: unexpected argument 'archs'");
}

TEST_CASE("C API: status codes and messages") {
  CHECK(std::string(sage2_status_name(SAGE2_ERROR_INVALID_ARGUMENT)) == "invalid_argument");
  CHECK(std::string(sage2_status_name(SAGE2_ERROR_NO_DRIVER)) == "no_driver");
  CHECK(std::string(sage2_version()) == sage2::version_info().library);

  CHECK(sage2_context_create(0, nullptr, 1, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("out is NULL") != std::string::npos);

  CHECK(sage2_context_destroy(nullptr) == SAGE2_OK);
  CHECK(std::string(sage2_last_error()).empty());

  char name[8], arch[8];
  CHECK(sage2_context_device(nullptr, name, sizeof name, arch, sizeof arch) == SAGE2_ERROR_INVALID_ARGUMENT);

  if (!sage2::base::driver::available()) {
    sage2_context* ctx = reinterpret_cast<sage2_context*>(0x1);
    CHECK(sage2_context_create(0, nullptr, 1, &ctx) == SAGE2_ERROR_NO_DRIVER);
    CHECK(ctx == nullptr);
    CHECK(std::string(sage2_last_error()).find("no CUDA driver found") != std::string::npos);
  }
}

TEST_CASE("C API: status values equal the C++ error codes") {
  CHECK(static_cast<int>(sage2::ErrorCode::InvalidArgument) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(static_cast<int>(sage2::ErrorCode::Unsupported) == SAGE2_ERROR_UNSUPPORTED);
  CHECK(static_cast<int>(sage2::ErrorCode::NoDriver) == SAGE2_ERROR_NO_DRIVER);
  CHECK(static_cast<int>(sage2::ErrorCode::DriverError) == SAGE2_ERROR_DRIVER);
  CHECK(static_cast<int>(sage2::ErrorCode::CompileError) == SAGE2_ERROR_COMPILE);
  CHECK(static_cast<int>(sage2::ErrorCode::NvrtcMissing) == SAGE2_ERROR_NVRTC_MISSING);
  CHECK(static_cast<int>(sage2::ErrorCode::CacheError) == SAGE2_ERROR_CACHE);
  CHECK(static_cast<int>(sage2::ErrorCode::OutOfMemory) == SAGE2_ERROR_OUT_OF_MEMORY);
  CHECK(static_cast<int>(sage2::ErrorCode::Internal) == SAGE2_ERROR_INTERNAL);
}

TEST_CASE("C API: attention arguments are checked before anything else") {
  sage2_attention_params p;
  sage2_attention_params_init(&p);
  CHECK(p.smooth_k == 1);
  CHECK(p.smooth_v == 0);
  CHECK(p.qk_bits == 0);
  CHECK(p.sm_scale == 0.0f);
  const sage2_tensor q = sage2_tensor_hnd(reinterpret_cast<void*>(0x1000), SAGE2_DTYPE_F16, 1, 2, 3, 4);
  CHECK(q.stride_seq == 4);
  CHECK(q.stride_head == 12);
  const sage2_tensor n = sage2_tensor_nhd(reinterpret_cast<void*>(0x1000), SAGE2_DTYPE_BF16, 1, 2, 3, 4);
  CHECK(n.stride_head == 4);
  CHECK(n.stride_seq == 8);
  CHECK(sage2_attention(nullptr, &q, &q, &q, &q, &p, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  size_t bytes = 0;
  CHECK(sage2_workspace_size(nullptr, &q, &q, &q, &q, &p, &bytes) == SAGE2_ERROR_INVALID_ARGUMENT);
}

#include "runtime/device.hpp"

TEST_CASE("runtime: an unsupported arch is refused, naming the supported ones and why") {
  sage2::runtime::DeviceFacts f;
  f.ordinal = 0;
  f.name = "Tesla T4";
  f.cc_major = 7;
  f.cc_minor = 5;  // older than Ampere: no INT8 m16n8k32 mma, no cp.async
  try {
    (void)sage2::kernels::code_target(f.cc());
    FAIL("sm_75 accepted");
  } catch (const sage2::Error& e) {
    f.target_note = e.what();  // as device_facts() records it, f.arch left empty
  }
  try {
    sage2::runtime::require_supported_arch(f);
    FAIL("sm_75 accepted");
  } catch (const sage2::Error& e) {
    CHECK(e.code() == sage2::ErrorCode::Unsupported);
    const std::string m = e.what();
    CHECK(m.find("sm_75") != std::string::npos);
    CHECK(m.find("8.0") != std::string::npos);
    for (const char* a : {"sm_80", "sm_89", "sm_90a", "sm_100", "sm_120"}) CHECK(m.find(a) != std::string::npos);
    CHECK(m.find("mma") != std::string::npos);
  }
  CHECK_THROWS_AS(sage2::runtime::context_target(f, ""), sage2::Error);
  // An A100 runs the Ampere path natively; a target override is PTX (or refused when newer).
  f.name = "NVIDIA A100-SXM4-80GB";
  f.cc_major = 8;
  f.cc_minor = 0;
  f.arch = sage2::kernels::Arch::Sm80;
  f.target_note.clear();
  CHECK(sage2::runtime::require_supported_arch(f) == sage2::kernels::Arch::Sm80);
  CHECK_FALSE(sage2::runtime::context_target(f, "").ptx);
  CHECK(sage2::runtime::context_target(f, "sm_80").arch == sage2::kernels::Arch::Sm80);
  CHECK_THROWS_WITH_AS(sage2::runtime::context_target(f, "sm_89"), doctest::Contains("cannot run"), sage2::Error);
  CHECK_THROWS_WITH_AS(sage2::runtime::context_target(f, "sm_70"), doctest::Contains("sm_70"), sage2::Error);
  f.cc_major = 9;
  f.arch = sage2::kernels::Arch::Sm90a;
  CHECK(sage2::runtime::require_supported_arch(f) == sage2::kernels::Arch::Sm90a);
  const auto t = sage2::runtime::context_target(f, "sm_89");
  CHECK(t.arch == sage2::kernels::Arch::Sm89);
  CHECK(t.ptx);
  CHECK(t.note.find("compute_89") != std::string::npos);
}
