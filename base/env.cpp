// The one place sage2 reads its environment (base/config.hpp says why). Every variable read
// here is in docs/deploying.md's "Environment variables" table; keep the two in step.
//   SAGE2_CACHE_DIR          ContextOptions::cache_dir     (else $XDG_CACHE_HOME/sage2, ~/.cache/sage2)
//   SAGE2_DISABLE_DISK_CACHE ContextOptions::disk_cache
//   SAGE2_ATTENTION_FAMILY   ContextOptions::family
//   SAGE2_QUANT_PATH         ContextOptions::quant_path
//   SAGE2_DISABLE_TUNING     ContextOptions::tuning
//   SAGE2_TARGET_ARCH        ContextOptions::target_arch
//   SAGE2_CACHE_TRUST_ROOT   ContextOptions::cache_trust_root
//   SAGE2_TIERED_COMPILE     ContextOptions::tiered_compile
//   SAGE2_LIBCUDA, SAGE2_LIBNVRTC, SAGE2_LIBCRYPTO, SAGE2_DUMP_DIR, SAGE2_LOG_LEVEL,
//   SAGE2_DISABLE_LAUNCH_OVERLAP                                                       ProcessConfig
#include <cstdlib>
#include <optional>
#include <utility>

#include "base/config.hpp"
#include "base/enum_names.hpp"
#include "base/log.hpp"

namespace sage2::base::config {
namespace {

std::optional<std::string> get(const char* name) {  // unset or empty → nullopt
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool flag(const char* name) {  // "1", "true", "yes", "on" → true; anything else false
  auto v = get(name);
  if (!v) return false;
  return *v == "1" || *v == "true" || *v == "yes" || *v == "on" || *v == "TRUE" || *v == "ON";
}

// flag(name) when the variable is set (any value but 1/true/yes/on: false), else `unset`.
bool flag_or(const char* name, bool unset) { return get(name) ? flag(name) : unset; }

std::string default_cache_dir() {
  if (auto d = get("SAGE2_CACHE_DIR")) return *d;
  if (auto x = get("XDG_CACHE_HOME")) return *x + "/sage2";
  if (auto h = get("HOME")) return *h + "/.cache/sage2";
  return "/tmp/sage2-cache";
}

AttentionFamily env_family() {
  const auto v = get("SAGE2_ATTENTION_FAMILY");
  if (!v) return AttentionFamily::Auto;
  if (auto f = value_named(*v, kAttentionFamilyNames)) return *f;
  // attn_mma / attn_wgmma: the family names of kernel keys, accepted since the variable exists.
  if (*v == "attn_mma") return AttentionFamily::Mma;
  if (*v == "attn_wgmma") return AttentionFamily::Wgmma;
  throw Error(ErrorCode::InvalidArgument,
              "SAGE2_ATTENTION_FAMILY='" + *v + "' is not one of " + names_list(kAttentionFamilyNames));
}

QuantPath env_quant_path() {
  const auto v = get("SAGE2_QUANT_PATH");
  if (!v) return QuantPath::Auto;
  if (auto p = value_named(*v, kQuantPathNames)) return *p;
  base::log::warn_once("SAGE2_QUANT_PATH=" + *v, "SAGE2_QUANT_PATH='" + *v + "' is not one of " +
                                                     names_list(kQuantPathNames) + "; using auto");
  return QuantPath::Auto;
}

LogLevel env_log_level() {
  auto v = get("SAGE2_LOG_LEVEL");
  if (!v) return LogLevel::Warn;
  if (*v == "error") return LogLevel::Error;
  if (*v == "info") return LogLevel::Info;
  if (*v == "debug") return LogLevel::Debug;
  return LogLevel::Warn;
}

}  // namespace

CacheConfig cache_config(const ContextOptions& o) {
  CacheConfig c;
  c.disk_cache = o.disk_cache.value_or(!flag("SAGE2_DISABLE_DISK_CACHE"));
  c.cache_dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  c.trust_root = o.cache_trust_root.value_or(flag("SAGE2_CACHE_TRUST_ROOT"));
  return c;
}

ContextConfig context_config(const ContextOptions& o) {
  if (o.family && (static_cast<int>(*o.family) < 0 || static_cast<int>(*o.family) > 2))
    throw Error(ErrorCode::InvalidArgument,
                "ContextOptions::family=" + std::to_string(static_cast<int>(*o.family)) + " is not an AttentionFamily");
  if (o.quant_path && (static_cast<int>(*o.quant_path) < 0 || static_cast<int>(*o.quant_path) > 4))
    throw Error(ErrorCode::InvalidArgument,
                "ContextOptions::quant_path=" + std::to_string(static_cast<int>(*o.quant_path)) + " is not a QuantPath");
  ContextConfig c;
  CacheConfig cache = cache_config(o);
  c.disk_cache = cache.disk_cache;
  c.cache_dir = std::move(cache.cache_dir);
  c.cache_trust_root = cache.trust_root;
  // Read only when not given: a bad SAGE2_ATTENTION_FAMILY is no error for a caller who chose.
  c.family = o.family ? *o.family : env_family();
  c.quant_path = o.quant_path ? *o.quant_path : env_quant_path();
  c.tuning = o.tuning.value_or(!flag("SAGE2_DISABLE_TUNING"));
  c.target_arch = !o.target_arch.empty() ? o.target_arch : get("SAGE2_TARGET_ARCH").value_or("");
  c.tiered_compile = o.tiered_compile.value_or(flag_or("SAGE2_TIERED_COMPILE", true));
  return c;
}

ContextOptions to_options(const ContextConfig& c) {
  ContextOptions o;
  o.disk_cache = c.disk_cache;
  o.cache_dir = c.cache_dir;
  o.family = c.family;
  o.quant_path = c.quant_path;
  o.tuning = c.tuning;
  o.target_arch = c.target_arch;
  o.cache_trust_root = c.cache_trust_root;
  o.tiered_compile = c.tiered_compile;
  return o;
}

ProcessConfig process_config() {
  ProcessConfig p;
  if (auto v = get("SAGE2_LIBCUDA")) p.libcuda = *v;
  p.libnvrtc = get("SAGE2_LIBNVRTC").value_or("");
  p.dump_dir = get("SAGE2_DUMP_DIR").value_or("");
  p.libcrypto = get("SAGE2_LIBCRYPTO").value_or("");
  p.log_level = env_log_level();
  p.overlap_launches = !flag("SAGE2_DISABLE_LAUNCH_OVERLAP");
  return p;
}

}  // namespace sage2::base::config

namespace sage2 {
ContextOptions resolve_context_options(const ContextOptions& options) {
  return base::config::to_options(base::config::context_config(options));
}
}  // namespace sage2
