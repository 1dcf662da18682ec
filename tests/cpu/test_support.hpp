// Scaffolding shared by the CPU test files: scratch directories and running shell commands.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.hpp"

namespace sage2::test {

// A unique directory under $TMPDIR (or /tmp), removed with its contents (permissions restored
// first, for tests that make it read-only) when the object goes out of scope.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "sage2-test") {
    const char* base = std::getenv("TMPDIR");
    const std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    const std::string cmd = "chmod -R u+rwx '" + path + "' 2>/dev/null; rm -rf '" + path + "'";
    (void)std::system(cmd.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Captures the library's warnings (base::log's sink) while it lives, instead of printing them.
struct WarnCapture {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& msgs() {
    static std::vector<std::string> v;
    return v;
  }
  static void sink(base::log::Level level, const std::string& m) {
    if (level != base::log::Level::Warn) return;
    std::lock_guard<std::mutex> lock(mu());
    msgs().push_back(m);
  }
  WarnCapture() {
    reset();
    base::log::set_sink(&sink);
  }
  ~WarnCapture() { base::log::set_sink(nullptr); }
  WarnCapture(const WarnCapture&) = delete;
  WarnCapture& operator=(const WarnCapture&) = delete;
  std::size_t count() const {
    std::lock_guard<std::mutex> lock(mu());
    return msgs().size();
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mu());
    std::string s;
    for (const auto& m : msgs()) s += m + "\n";
    return s;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu());
    msgs().clear();
  }
};

struct CommandResult {
  int code = -1;    // exit status; -1 when the command did not exit normally
  std::string out;  // what it printed on stdout (add 2>&1 to the command for stderr too)
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace sage2::test
