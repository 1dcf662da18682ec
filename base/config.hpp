// Configuration as the library reads it. base/env.cpp implements this header and is the only
// file that reads the environment: a SAGE2_* variable is only ever the default of a setting, so
// everything else takes these objects (or the Context's) and never calls getenv.
#pragma once

#include <string>

#include "sage2/sage2.hpp"

namespace sage2::base::config {

// The settings of one Context, each one decided (ContextOptions explains them).
struct ContextConfig {
  bool disk_cache = true;
  std::string cache_dir;  // set even when disk_cache is false: where the cache would be
  AttentionFamily family = AttentionFamily::Auto;
  QuantPath quant_path = QuantPath::Auto;  // Auto: resolved per call (runtime::quantize_ops)
  bool tuning = true;
  std::string target_arch;  // "" : the device's own code target (ContextOptions::target_arch)
  bool cache_trust_root = false;  // ContextOptions::cache_trust_root
  bool tiered_compile = true;     // ContextOptions::tiered_compile
};

// `options` with each unset field taken from the environment (read now), else the built-in
// default. Throws InvalidArgument for a value outside its enum, in `options` or in the
// environment; an unknown SAGE2_QUANT_PATH only warns (once) and means auto.
ContextConfig context_config(const ContextOptions& options = {});
// The same settings as public options (every field set).
ContextOptions to_options(const ContextConfig& c);

// Only the disk cache settings of context_config(options): for tools and queries that need the
// directory and must not fail on an unrelated variable (a bad SAGE2_ATTENTION_FAMILY). Never throws
// Error.
struct CacheConfig {
  bool disk_cache = true;
  std::string cache_dir;
  bool trust_root = false;  // ContextOptions::cache_trust_root, SAGE2_CACHE_TRUST_ROOT
};
CacheConfig cache_config(const ContextOptions& options = {});

// Settings of the whole process: libraries loaded once, before any Context exists, and switches
// used where no Context is at hand (the JIT compiler, logging). Read from the environment at each
// call (a few getenv), so that a test that sets a variable sees it at the next use.
struct ProcessConfig {
  std::string libcuda = "libcuda.so.1";  // SAGE2_LIBCUDA: the driver library to dlopen
  std::string libnvrtc;                  // SAGE2_LIBNVRTC: tried before the search list; empty: none
  std::string dump_dir;                  // SAGE2_DUMP_DIR: where compiles dump source/PTX/log; empty: off
  std::string libcrypto;                 // SAGE2_LIBCRYPTO: the libcrypto to dlopen for SHA-256; empty:
                                         // libcrypto.so.3, then libcrypto.so.1.1
  LogLevel log_level = LogLevel::Warn;   // SAGE2_LOG_LEVEL (set_log_level() overrides it)
  // SAGE2_DISABLE_LAUNCH_OVERLAP: a call's kernels after the first start only when the previous
  // one completed (no programmatic dependent launch; for measurements and bug hunts).
  bool overlap_launches = true;
};
ProcessConfig process_config();

}  // namespace sage2::base::config
