#include "runtime/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "runtime/env.hpp"

namespace sage2::log {
namespace {
std::atomic<Sink> g_sink{nullptr};
std::mutex g_once_mu;
std::set<std::string>& once_topics() {
  static std::set<std::string> topics;
  return topics;
}
const char* level_tag(Level l) {
  switch (l) {
    case Level::Error: return "error";
    case Level::Warn: return "warning";
    case Level::Info: return "info";
    case Level::Debug: return "debug";
  }
  return "?";
}
}  // namespace

Level current_level() {
  // Read each time: cheap, and tests may change it.
  auto v = env::get("SAGE2_LOG_LEVEL");
  if (!v) return Level::Warn;
  if (*v == "error") return Level::Error;
  if (*v == "info") return Level::Info;
  if (*v == "debug") return Level::Debug;
  return Level::Warn;
}

void write(Level level, const std::string& message) {
  if (Sink s = g_sink.load()) {
    s(level, message);
    return;
  }
  if (static_cast<int>(level) > static_cast<int>(current_level())) return;
  std::fprintf(stderr, "sage2 %s: %s\n", level_tag(level), message.c_str());
}

void warn_once(const std::string& topic, const std::string& message) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_once_mu);
    first = once_topics().insert(topic).second;
  }
  write(first ? Level::Warn : Level::Debug, message);
}

void set_sink(Sink sink) { g_sink.store(sink); }

}  // namespace sage2::log
