// Logging to stderr, filtered by the process's level: sage2::set_log_level(), else SAGE2_LOG_LEVEL
// (error | warn | info | debug; default warn).
#pragma once

#include <string>

#include "sage2/sage2.hpp"

namespace sage2::base::log {

using Level = LogLevel;  // the public enum; base::log::Level::Warn reads as before

Level current_level();
void write(Level level, const std::string& message);
inline void error(const std::string& m) { write(Level::Error, m); }
inline void warn(const std::string& m) { write(Level::Warn, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void debug(const std::string& m) { write(Level::Debug, m); }
// Warns once per process for a given topic (e.g. "cache-readonly:/path"); later calls are debug.
void warn_once(const std::string& topic, const std::string& message);
// The same at info level (topics are shared with warn_once): e.g. one line per kernel compiled.
void info_once(const std::string& topic, const std::string& message);
// Tests capture what would be written. Pass nullptr to restore stderr.
using Sink = void (*)(Level, const std::string&);
void set_sink(Sink sink);
// Where notices that pass the level go instead of stderr (sage2_set_log_callback); nullptr:
// stderr again. A test sink (set_sink) still takes precedence.
using Callback = void (*)(int level, const char* message, void* user);
void set_callback(Callback callback, void* user);

}  // namespace sage2::base::log
