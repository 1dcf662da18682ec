// Specification of configuration: every setting is a ContextOptions field (or, for process-wide
// ones, a ProcessConfig field) whose default comes from one SAGE2_* environment variable; a value
// given in code wins over the environment. Runs without a GPU: the options are resolved the way a
// Context resolves them at construction; a real Context is checked where a device is present.
#include <doctest/doctest.h>

#include "scoped_env.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plan/planner.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

using namespace sage2;

namespace {

using sage2::test::ScopedEnv;

// Every variable that gives a ContextOptions default, unset for one scope.
struct CleanContextEnv {
  ScopedEnv a{"SAGE2_CACHE_DIR", nullptr}, b{"SAGE2_DISABLE_DISK_CACHE", nullptr},
      c{"SAGE2_ATTENTION_FAMILY", nullptr}, d{"SAGE2_QUANT_PATH", nullptr}, e{"SAGE2_DISABLE_TUNING", nullptr},
      f{"SAGE2_TIERED_COMPILE", nullptr};
};

struct LogCapture {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
  static std::vector<base::log::Level>& levels() {  // of lines(), index by index
    static std::vector<base::log::Level> l;
    return l;
  }
  static void sink(base::log::Level level, const std::string& m) {
    std::lock_guard<std::mutex> lock(mu());
    lines().push_back(m);
    levels().push_back(level);
  }
  // Lines at `level` that contain `text`.
  static std::size_t count(base::log::Level level, const std::string& text) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < lines().size(); ++i) n += levels()[i] == level && lines()[i].find(text) != std::string::npos;
    return n;
  }
  LogCapture() {
    lines().clear();
    levels().clear();
    base::log::set_sink(&sink);
  }
  ~LogCapture() { base::log::set_sink(nullptr); }
};

}  // namespace

TEST_CASE("config: without the environment every setting has its built-in default") {
  CleanContextEnv clean;
  ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/sage2-config-test/xdg");
  const ContextOptions r = resolve_context_options();
  REQUIRE(r.disk_cache.has_value());
  CHECK(*r.disk_cache);
  CHECK(r.cache_dir == "/tmp/sage2-config-test/xdg/sage2");
  CHECK(r.family == AttentionFamily::Auto);
  CHECK(r.quant_path == QuantPath::Auto);  // resolved per call (runtime::quantize_ops)
  CHECK(r.tuning == true);
  CHECK(r.tiered_compile == true);  // a new head dim answers at once (issue 40); deterministic runs turn it off
}

TEST_CASE("config: SAGE2_TIERED_COMPILE and ContextOptions::tiered_compile (code wins)") {
  CleanContextEnv clean;
  CHECK(base::config::context_config().tiered_compile);  // unset: on
  {
    ScopedEnv no("SAGE2_TIERED_COMPILE", "0");  // deterministic deployments and benchmarks
    CHECK_FALSE(base::config::context_config().tiered_compile);
    CHECK(resolve_context_options().tiered_compile == false);
  }
  ScopedEnv on("SAGE2_TIERED_COMPILE", "1");
  CHECK(base::config::context_config().tiered_compile);
  CHECK(resolve_context_options().tiered_compile == true);
  ContextOptions o;
  o.tiered_compile = false;  // a deterministic deployment waits for the optimized kernels
  CHECK_FALSE(base::config::context_config(o).tiered_compile);
  CHECK(resolve_context_options(o).tiered_compile == false);
  ScopedEnv off("SAGE2_TIERED_COMPILE", "0");
  o.tiered_compile = true;
  CHECK(base::config::context_config(o).tiered_compile);
  CHECK_FALSE(base::config::context_config().tiered_compile);
}

TEST_CASE("config: the environment sets the defaults of unset options") {
  CleanContextEnv clean;
  ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/sage2-config-test/env");
  ScopedEnv b("SAGE2_DISABLE_DISK_CACHE", "1");
  ScopedEnv c("SAGE2_ATTENTION_FAMILY", "wgmma");
  ScopedEnv d("SAGE2_QUANT_PATH", "fused");
  ScopedEnv e("SAGE2_DISABLE_TUNING", "yes");
  const base::config::ContextConfig cfg = base::config::context_config();
  CHECK_FALSE(cfg.disk_cache);
  CHECK(cfg.cache_dir == "/tmp/sage2-config-test/env");
  CHECK(cfg.family == AttentionFamily::Wgmma);
  CHECK(cfg.quant_path == QuantPath::Fused);
  CHECK_FALSE(cfg.tuning);
  // The public view agrees field by field.
  const ContextOptions r = resolve_context_options();
  CHECK(r.disk_cache == false);
  CHECK(r.cache_dir == cfg.cache_dir);
  CHECK(r.family == AttentionFamily::Wgmma);
  CHECK(r.quant_path == QuantPath::Fused);
  CHECK(r.tuning == false);
  // Only fields left unset are filled: one set field changes nothing else.
  ContextOptions o;
  o.family = AttentionFamily::Mma;
  const ContextOptions mixed = resolve_context_options(o);
  CHECK(mixed.family == AttentionFamily::Mma);
  CHECK(mixed.quant_path == QuantPath::Fused);
  CHECK(mixed.tuning == false);
  // The family names of kernel keys have always been accepted too.
  {
    ScopedEnv alias("SAGE2_ATTENTION_FAMILY", "attn_mma");
    CHECK(base::config::context_config().family == AttentionFamily::Mma);
  }
  {
    ScopedEnv alias("SAGE2_ATTENTION_FAMILY", "auto");
    CHECK(base::config::context_config().family == AttentionFamily::Auto);
  }
}

TEST_CASE("config: options given in code override the environment") {
  CleanContextEnv clean;
  ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/sage2-config-test/env");
  ScopedEnv b("SAGE2_DISABLE_DISK_CACHE", "1");
  ScopedEnv c("SAGE2_ATTENTION_FAMILY", "wgmma");
  ScopedEnv d("SAGE2_QUANT_PATH", "fused");
  ScopedEnv e("SAGE2_DISABLE_TUNING", "1");
  ContextOptions o;
  o.disk_cache = true;
  o.cache_dir = "/tmp/sage2-config-test/code";
  o.family = AttentionFamily::Mma;
  o.quant_path = QuantPath::Split;
  o.tuning = true;
  const base::config::ContextConfig cfg = base::config::context_config(o);
  CHECK(cfg.disk_cache);
  CHECK(cfg.cache_dir == "/tmp/sage2-config-test/code");
  CHECK(cfg.family == AttentionFamily::Mma);
  CHECK(cfg.quant_path == QuantPath::Split);
  CHECK(cfg.tuning);
  // And the other way round: code turns off what the environment leaves on.
  CleanContextEnv none;
  ContextOptions off;
  off.disk_cache = false;
  off.tuning = false;
  off.quant_path = QuantPath::Fused;
  const base::config::ContextConfig cfg2 = base::config::context_config(off);
  CHECK_FALSE(cfg2.disk_cache);
  CHECK_FALSE(cfg2.tuning);
  CHECK(cfg2.quant_path == QuantPath::Fused);
}

TEST_CASE("config: an unknown value is an error naming it, unless the option is given in code") {
  CleanContextEnv clean;
  {
    ScopedEnv bad("SAGE2_ATTENTION_FAMILY", "tensorcore");
    try {
      (void)base::config::context_config();
      FAIL("SAGE2_ATTENTION_FAMILY=tensorcore was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find("SAGE2_ATTENTION_FAMILY='tensorcore'") != std::string::npos);
    }
    ContextOptions o;
    o.family = AttentionFamily::Auto;
    CHECK(base::config::context_config(o).family == AttentionFamily::Auto);  // the caller chose: env unread
    // The cache settings alone never fail on it (sage2-info, sage2-cache, sage2_default_cache_dir).
    CHECK_NOTHROW((void)base::config::cache_config());
  }
  ContextOptions o;
  o.family = static_cast<AttentionFamily>(7);
  CHECK_THROWS_WITH_AS((void)base::config::context_config(o), doctest::Contains("ContextOptions::family=7"), Error);
  ContextOptions q;
  q.quant_path = static_cast<QuantPath>(-3);
  CHECK_THROWS_WITH_AS((void)base::config::context_config(q), doctest::Contains("ContextOptions::quant_path=-3"), Error);
}

TEST_CASE("config: an unknown SAGE2_QUANT_PATH warns once and means auto") {
  CleanContextEnv clean;
  ScopedEnv bad("SAGE2_QUANT_PATH", "sage2-config-test-unknown");
  LogCapture cap;
  CHECK(base::config::context_config().quant_path == QuantPath::Auto);
  CHECK(base::config::context_config().quant_path == QuantPath::Auto);
  std::size_t warned = 0;
  for (const auto& l : LogCapture::lines()) warned += l.find("sage2-config-test-unknown") != std::string::npos;
  CHECK(warned == 2);  // once as a warning, then as debug (base::log::warn_once): the sink sees both
}

TEST_CASE("log: info_once is info the first time per topic, then debug (the compile notice per kernel)") {
  LogCapture cap;
  for (int i = 0; i < 3; ++i) base::log::info_once("test-info-once:a", "first topic");
  base::log::info_once("test-info-once:b", "second topic");
  std::size_t a = 0, b = 0;
  for (const auto& l : LogCapture::lines()) {
    a += l.find("first topic") != std::string::npos;
    b += l.find("second topic") != std::string::npos;
  }
  CHECK(a == 3);
  CHECK(b == 1);
  CHECK(LogCapture::count(base::log::Level::Info, "first topic") == 1);
  CHECK(LogCapture::count(base::log::Level::Debug, "first topic") == 2);
  CHECK(LogCapture::count(base::log::Level::Info, "second topic") == 1);
}

TEST_CASE("config: the tuning database a Context reads follows disk_cache and tuning") {
  CleanContextEnv clean;
  ScopedEnv dir("SAGE2_CACHE_DIR", "/tmp/sage2-config-test/db");
  const std::string expected = plan::db_path("/tmp/sage2-config-test/db", "dev", kernels::Arch::Sm90a);
  CHECK(plan::context_db_path(base::config::context_config(), "dev", kernels::Arch::Sm90a) == expected);
  {
    ScopedEnv off("SAGE2_DISABLE_TUNING", "1");
    CHECK(plan::context_db_path(base::config::context_config(), "dev", kernels::Arch::Sm90a).empty());
    ContextOptions o;
    o.tuning = true;  // code wins
    CHECK(plan::context_db_path(base::config::context_config(o), "dev", kernels::Arch::Sm90a) == expected);
  }
  {
    ScopedEnv off("SAGE2_DISABLE_DISK_CACHE", "1");
    CHECK(plan::context_db_path(base::config::context_config(), "dev", kernels::Arch::Sm90a).empty());
  }
}

TEST_CASE("config: process-wide settings come from the environment, read at each use") {
  {
    ScopedEnv a("SAGE2_LIBCUDA", nullptr), b("SAGE2_LIBNVRTC", nullptr), c("SAGE2_DUMP_DIR", nullptr),
        d("SAGE2_LOG_LEVEL", nullptr);
    const base::config::ProcessConfig p = base::config::process_config();
    CHECK(p.libcuda == "libcuda.so.1");
    CHECK(p.libnvrtc.empty());
    CHECK(p.dump_dir.empty());
    CHECK(p.log_level == LogLevel::Warn);
  }
  ScopedEnv a("SAGE2_LIBCUDA", "/opt/x/libcuda.so.1"), b("SAGE2_LIBNVRTC", "/opt/x/libnvrtc.so"),
      c("SAGE2_DUMP_DIR", "/tmp/sage2-config-test/dump"), d("SAGE2_LOG_LEVEL", "debug");
  const base::config::ProcessConfig p = base::config::process_config();
  CHECK(p.libcuda == "/opt/x/libcuda.so.1");
  CHECK(p.libnvrtc == "/opt/x/libnvrtc.so");
  CHECK(p.dump_dir == "/tmp/sage2-config-test/dump");
  CHECK(p.log_level == LogLevel::Debug);
}

TEST_CASE("config: set_log_level overrides SAGE2_LOG_LEVEL for the process until reset") {
  ScopedEnv env("SAGE2_LOG_LEVEL", "error");
  CHECK(log_level() == LogLevel::Error);
  set_log_level(LogLevel::Info);
  CHECK(log_level() == LogLevel::Info);
  CHECK(base::log::current_level() == base::log::Level::Info);
  set_log_level(std::nullopt);
  CHECK(log_level() == LogLevel::Error);
  // The C ABI: the same, with SAGE2_FROM_ENV to return to the environment.
  CHECK(sage2_set_log_level(3) == SAGE2_OK);
  CHECK(log_level() == LogLevel::Debug);
  CHECK(sage2_set_log_level(4) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("level=4") != std::string::npos);
  CHECK(log_level() == LogLevel::Debug);  // a refused value changes nothing
  CHECK(sage2_set_log_level(SAGE2_FROM_ENV) == SAGE2_OK);
  CHECK(log_level() == LogLevel::Error);
}

TEST_CASE("config: sage2_set_log_callback receives the notices the level lets through, NULL restores stderr") {
  struct Seen {
    std::vector<std::pair<int, std::string>> notes;
  } seen;
  auto cb = [](int level, const char* message, void* user) {
    static_cast<Seen*>(user)->notes.emplace_back(level, message);
  };
  CHECK(sage2_set_log_level(1) == SAGE2_OK);  // warn
  REQUIRE(sage2_set_log_callback(cb, &seen) == SAGE2_OK);
  base::log::warn("w1");
  base::log::info("i1");   // below the level: not passed
  base::log::debug("d1");
  CHECK(sage2_set_log_level(3) == SAGE2_OK);  // debug: everything
  base::log::debug("d2");
  base::log::error("e1");
  REQUIRE(sage2_set_log_callback(nullptr, nullptr) == SAGE2_OK);
  base::log::warn("after");  // stderr again, not the callback
  CHECK(sage2_set_log_level(SAGE2_FROM_ENV) == SAGE2_OK);
  REQUIRE(seen.notes.size() == 3);
  CHECK(seen.notes[0] == std::make_pair(1, std::string("w1")));
  CHECK(seen.notes[1] == std::make_pair(3, std::string("d2")));
  CHECK(seen.notes[2] == std::make_pair(0, std::string("e1")));
}

TEST_CASE("config: names of the option enums") {
  CHECK(std::string(attention_family_name(AttentionFamily::Auto)) == "auto");
  CHECK(std::string(attention_family_name(AttentionFamily::Mma)) == "mma");
  CHECK(std::string(attention_family_name(AttentionFamily::Wgmma)) == "wgmma");
  CHECK(std::string(quant_path_name(QuantPath::Split)) == "split");
  CHECK(std::string(quant_path_name(QuantPath::Fused)) == "fused");
  CHECK(std::string(quant_path_name(QuantPath::Cluster)) == "cluster");
  CHECK(std::string(quant_path_name(QuantPath::Auto)) == "auto");
}

TEST_CASE("config C API: options_init leaves every field to the environment") {
  sage2_context_options o;
  std::memset(&o, 0x5a, sizeof o);
  sage2_context_options_init(&o);
  CHECK(o.cache_dir == nullptr);
  CHECK(o.disk_cache == SAGE2_FROM_ENV);
  CHECK(o.family == SAGE2_FROM_ENV);
  CHECK(o.quant_path == SAGE2_FROM_ENV);
  CHECK(o.tuning == SAGE2_FROM_ENV);
  sage2_context_options_init(nullptr);  // harmless
}

TEST_CASE("config C API: resolve fills from the environment; set fields win") {
  CleanContextEnv clean;
  ScopedEnv a("SAGE2_CACHE_DIR", "/tmp/sage2-config-test/c-env");
  ScopedEnv c("SAGE2_ATTENTION_FAMILY", "mma");
  ScopedEnv d("SAGE2_QUANT_PATH", "fused");
  ScopedEnv e("SAGE2_DISABLE_TUNING", "1");
  sage2_context_options o;
  sage2_context_options_init(&o);
  REQUIRE(sage2_context_options_resolve(&o) == SAGE2_OK);
  REQUIRE(o.cache_dir != nullptr);
  CHECK(std::string(o.cache_dir) == "/tmp/sage2-config-test/c-env");
  CHECK(o.disk_cache == 1);
  CHECK(o.family == SAGE2_FAMILY_MMA);
  CHECK(o.quant_path == SAGE2_QUANTIZE_FUSED);
  CHECK(o.tuning == 0);

  sage2_context_options_init(&o);
  o.cache_dir = "/tmp/sage2-config-test/c-code";
  o.disk_cache = 0;
  o.family = SAGE2_FAMILY_WGMMA;
  o.quant_path = SAGE2_QUANTIZE_SPLIT;
  o.tuning = 1;
  REQUIRE(sage2_context_options_resolve(&o) == SAGE2_OK);
  CHECK(std::string(o.cache_dir) == "/tmp/sage2-config-test/c-code");
  CHECK(o.disk_cache == 0);
  CHECK(o.family == SAGE2_FAMILY_WGMMA);
  CHECK(o.quant_path == SAGE2_QUANTIZE_SPLIT);
  CHECK(o.tuning == 1);
  // Resolving resolved options changes nothing (cache_dir may point at the previous result).
  const sage2_context_options before = o;
  REQUIRE(sage2_context_options_resolve(&o) == SAGE2_OK);
  CHECK(std::string(o.cache_dir) == "/tmp/sage2-config-test/c-code");
  CHECK(o.family == before.family);
  CHECK(o.tuning == before.tuning);
}

TEST_CASE("config C API: bad options are refused with a message naming the field") {
  CleanContextEnv clean;
  CHECK(sage2_context_options_resolve(nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("options is NULL") != std::string::npos);
  sage2_context_options o;
  sage2_context_options_init(&o);
  o.family = 3;
  CHECK(sage2_context_options_resolve(&o) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("options.family=3") != std::string::npos);
  sage2_context_options_init(&o);
  o.disk_cache = 2;
  CHECK(sage2_context_options_resolve(&o) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("options.disk_cache=2") != std::string::npos);
  sage2_context_options_init(&o);
  {
    ScopedEnv bad("SAGE2_ATTENTION_FAMILY", "nope");
    CHECK(sage2_context_options_resolve(&o) == SAGE2_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(sage2_last_error()).find("SAGE2_ATTENTION_FAMILY") != std::string::npos);
  }
  // Context creation checks its arguments before it looks for a device.
  sage2_context* ctx = reinterpret_cast<sage2_context*>(0x1);
  o.tuning = -7;
  CHECK(sage2_context_create_with_options(0, &o, &ctx) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("options.tuning=-7") != std::string::npos);
  CHECK(ctx == nullptr);
  CHECK(sage2_context_create_with_options(0, nullptr, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
  sage2_context_options got;
  CHECK(sage2_context_options_get(nullptr, &got) == SAGE2_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("config C API: a context created with options uses them (GPU machines only)") {
  CleanContextEnv clean;
  ScopedEnv env_family("SAGE2_ATTENTION_FAMILY", "mma");
  ScopedEnv env_quant("SAGE2_QUANT_PATH", "fused");
  sage2_context_options o;
  sage2_context_options_init(&o);
  o.cache_dir = "/tmp/sage2-config-test/ctx";
  o.quant_path = SAGE2_QUANTIZE_SPLIT;
  o.tuning = 0;
  sage2_context* ctx = nullptr;
  const sage2_status s = sage2_context_create_with_options(0, &o, &ctx);
  if (sage2_device_count() == 0) {
    CHECK(s != SAGE2_OK);  // no driver, or no device 0
    CHECK(ctx == nullptr);
    MESSAGE("no CUDA device here: a context's own options are checked on GPU machines");
    return;
  }
  if (s != SAGE2_OK) {
    MESSAGE("device 0 is not usable by sage2: " << sage2_last_error());
    return;
  }
  sage2_context_options got;
  sage2_context_options_init(&got);
  REQUIRE(sage2_context_options_get(ctx, &got) == SAGE2_OK);
  CHECK(std::string(got.cache_dir) == "/tmp/sage2-config-test/ctx");
  CHECK(got.disk_cache == 1);
  CHECK(got.family == SAGE2_FAMILY_MMA);            // from the environment
  CHECK(got.quant_path == SAGE2_QUANTIZE_SPLIT);  // from the caller, over the environment
  CHECK(got.tuning == 0);
  CHECK(sage2_context_destroy(ctx) == SAGE2_OK);
}
