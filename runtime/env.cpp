#include "runtime/env.hpp"

#include <cstdlib>
#include <cstring>

namespace sage2::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool flag(const char* name) {
  auto v = get(name);
  if (!v) return false;
  return *v == "1" || *v == "true" || *v == "yes" || *v == "on" || *v == "TRUE" || *v == "ON";
}

std::string cache_dir() {
  if (auto d = get("SAGE2_CACHE_DIR")) return *d;
  if (auto x = get("XDG_CACHE_HOME")) return *x + "/sage2";
  if (auto h = get("HOME")) return *h + "/.cache/sage2";
  return "/tmp/sage2-cache";
}

}  // namespace sage2::env
