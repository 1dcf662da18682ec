// The C ABI's "facts" functions used by bindings and tools (python -m sage2 info): versions,
// the default cache directory and the per-context queries. Runs without a GPU; the per-context
// queries are also checked on a real context when a driver and a supported device are present.
#include <doctest/doctest.h>

#include "scoped_env.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/driver.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

namespace {
using sage2::test::ScopedEnv;

std::string default_cache_dir() {
  char buf[4096];
  std::memset(buf, 'x', sizeof buf);
  REQUIRE(sage2_default_cache_dir(buf, sizeof buf) == SAGE2_OK);
  return buf;
}
}  // namespace

TEST_CASE("C API info: sage2_version_info agrees with sage2::version_info and accepts NULLs") {
  int maj = -1, min = -1, drv = -1;
  REQUIRE(sage2_version_info(&maj, &min, &drv) == SAGE2_OK);
  CHECK(std::string(sage2_last_error()).empty());
  const sage2::VersionInfo v = sage2::version_info();
  CHECK(maj == v.nvrtc_major);
  CHECK(min == v.nvrtc_minor);
  CHECK(drv == v.driver_version);
  CHECK(maj >= 0);
  CHECK(min >= 0);
  if (!sage2::base::driver::available()) CHECK(drv == 0);
  CHECK(sage2_version_info(nullptr, nullptr, nullptr) == SAGE2_OK);
  int only = -1;
  CHECK(sage2_version_info(nullptr, nullptr, &only) == SAGE2_OK);
  CHECK(only == v.driver_version);
}

TEST_CASE("C API info: sage2_default_cache_dir follows the documented resolution order") {
  ScopedEnv no_disable("SAGE2_DISABLE_DISK_CACHE", nullptr);
  {
    ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/sage2-capi-info/explicit");
    CHECK(default_cache_dir() == "/tmp/sage2-capi-info/explicit");
  }
  {
    ScopedEnv a("SAGE2_CACHE_DIR", nullptr);
    ScopedEnv b("XDG_CACHE_HOME", "/tmp/sage2-capi-info/xdg");
    CHECK(default_cache_dir() == "/tmp/sage2-capi-info/xdg/sage2");
  }
  {
    ScopedEnv a("SAGE2_CACHE_DIR", nullptr);
    ScopedEnv b("XDG_CACHE_HOME", nullptr);
    ScopedEnv c("HOME", "/tmp/sage2-capi-info/home");
    CHECK(default_cache_dir() == "/tmp/sage2-capi-info/home/.cache/sage2");
  }
  {
    ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/sage2-capi-info/explicit");
    ScopedEnv d("SAGE2_DISABLE_DISK_CACHE", "1");
    CHECK(default_cache_dir().empty());
  }
}

TEST_CASE("C API info: string outputs are NUL-terminated and truncated to the buffer") {
  ScopedEnv no_disable("SAGE2_DISABLE_DISK_CACHE", nullptr);
  ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/abcdefgh");
  char buf[6];
  std::memset(buf, 'x', sizeof buf);
  REQUIRE(sage2_default_cache_dir(buf, sizeof buf) == SAGE2_OK);
  CHECK(std::string(buf) == "/tmp/");
  // size 0 and NULL buffers write nothing and still succeed.
  char one = 'x';
  CHECK(sage2_default_cache_dir(&one, 0) == SAGE2_OK);
  CHECK(one == 'x');
  CHECK(sage2_default_cache_dir(nullptr, 16) == SAGE2_OK);
  CHECK(sage2_default_cache_dir(&one, 1) == SAGE2_OK);
  CHECK(one == '\0');
}

TEST_CASE("C API info: per-context queries reject a NULL context with a message") {
  char buf[64];
  CHECK(sage2_context_cache_dir(nullptr, buf, sizeof buf) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  int ordinal = -1, sms = -1;
  uint64_t mem = 0;
  CHECK(sage2_context_device_props(nullptr, &ordinal, &sms, &mem) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(ordinal == -1);
  // A following success clears the message.
  CHECK(sage2_version_info(nullptr, nullptr, nullptr) == SAGE2_OK);
  CHECK(std::string(sage2_last_error()).empty());
}

TEST_CASE("C API info: per-context queries on a real context (GPU machines only)") {
  if (sage2_device_count() == 0) {
    MESSAGE("no CUDA device here: the per-context queries are covered by the NULL-context case only");
    return;
  }
  ScopedEnv no_disable("SAGE2_DISABLE_DISK_CACHE", nullptr);
  sage2_context* ctx = nullptr;
  if (sage2_context_create(0, "/tmp/sage2-capi-info/ctx-cache", 1, &ctx) != SAGE2_OK) {
    MESSAGE("device 0 is not usable by sage2: " << sage2_last_error());
    return;
  }
  char buf[4096];
  CHECK(sage2_context_cache_dir(ctx, buf, sizeof buf) == SAGE2_OK);
  CHECK(std::string(buf) == "/tmp/sage2-capi-info/ctx-cache");
  int ordinal = -1, sms = -1;
  uint64_t mem = 0;
  CHECK(sage2_context_device_props(ctx, &ordinal, &sms, &mem) == SAGE2_OK);
  CHECK(ordinal == 0);
  CHECK(sms > 0);
  CHECK(mem > 0);
  CHECK(sage2_context_device_props(ctx, nullptr, nullptr, nullptr) == SAGE2_OK);
  CHECK(sage2_context_destroy(ctx) == SAGE2_OK);

  REQUIRE(sage2_context_create(0, "/tmp/sage2-capi-info/ctx-cache", 0, &ctx) == SAGE2_OK);
  std::memset(buf, 'x', sizeof buf);
  CHECK(sage2_context_cache_dir(ctx, buf, sizeof buf) == SAGE2_OK);
  CHECK(std::string(buf).empty());  // disk cache disabled
  CHECK(sage2_context_destroy(ctx) == SAGE2_OK);
}

TEST_CASE("C API info: sage2_nvrtc_library names the loaded file and its rule; late additions are refused") {
  CHECK(sage2_nvrtc_add_candidate(nullptr, "x") == SAGE2_ERROR_INVALID_ARGUMENT);
  char path[4096], rule[256], passed[8192];
  std::memset(passed, 'x', sizeof passed);
  REQUIRE(sage2_nvrtc_library(path, sizeof path, rule, sizeof rule, passed, sizeof passed) == SAGE2_OK);
  CHECK(std::string(path).find("libnvrtc") != std::string::npos);
  CHECK(std::strlen(rule) > 0);
  CHECK(std::strlen(passed) < sizeof passed);  // terminated ("" unless $SAGE2_LIBNVRTC etc. failed)
  CHECK(sage2_nvrtc_library(nullptr, 0, nullptr, 0, nullptr, 0) == SAGE2_OK);
  char tiny[4];
  CHECK(sage2_nvrtc_library(tiny, sizeof tiny, nullptr, 0, nullptr, 0) == SAGE2_OK);
  CHECK(std::strlen(tiny) == 3);  // truncated, terminated
  // the search has run: a candidate added now could never be used, so it is refused
  CHECK(sage2_nvrtc_add_candidate("/late/libnvrtc.so.13", "late") == SAGE2_ERROR_UNSUPPORTED);
  CHECK(std::string(sage2_last_error()).find("/late/libnvrtc.so.13") != std::string::npos);
}
