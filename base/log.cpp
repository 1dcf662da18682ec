#include "base/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "base/config.hpp"

namespace sage2::base::log {
namespace {
std::atomic<Sink> g_sink{nullptr};
std::atomic<int> g_level{-1};  // set_log_level(); -1: follow the environment
std::mutex g_once_mu;
// The callback and its user pointer change together, so they are read under one lock (notices
// are rare; the lock is not on any hot path).
std::mutex g_callback_mu;
Callback g_callback = nullptr;
void* g_callback_user = nullptr;
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
  const int set = g_level.load();
  // The environment is read each time: cheap, and tests may change it.
  return set >= 0 ? static_cast<Level>(set) : base::config::process_config().log_level;
}

void write(Level level, const std::string& message) {
  if (Sink s = g_sink.load()) {
    s(level, message);
    return;
  }
  if (static_cast<int>(level) > static_cast<int>(current_level())) return;
  {
    std::lock_guard<std::mutex> lock(g_callback_mu);
    if (g_callback) {
      g_callback(static_cast<int>(level), message.c_str(), g_callback_user);
      return;
    }
  }
  std::fprintf(stderr, "sage2 %s: %s\n", level_tag(level), message.c_str());
}

namespace {
bool first_time(const std::string& topic) {
  std::lock_guard<std::mutex> lock(g_once_mu);
  return once_topics().insert(topic).second;
}
}  // namespace

void warn_once(const std::string& topic, const std::string& message) {
  write(first_time(topic) ? Level::Warn : Level::Debug, message);
}

void info_once(const std::string& topic, const std::string& message) {
  write(first_time(topic) ? Level::Info : Level::Debug, message);
}

void set_sink(Sink sink) { g_sink.store(sink); }

void set_callback(Callback callback, void* user) {
  std::lock_guard<std::mutex> lock(g_callback_mu);
  g_callback = callback;
  g_callback_user = callback ? user : nullptr;
}

}  // namespace sage2::base::log

namespace sage2 {
void set_log_level(std::optional<LogLevel> level) noexcept { base::log::g_level.store(level ? static_cast<int>(*level) : -1); }
LogLevel log_level() noexcept {
  try {
    return base::log::current_level();
  } catch (...) {  // process_config() allocates; never let that escape a noexcept query
    return LogLevel::Warn;
  }
}
}  // namespace sage2
