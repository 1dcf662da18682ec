// The commit the library reports it was built from (sage2_build_commit, sage2::build_commit,
// sage2-info) and the build-time script that records it (cmake/build_commit.cmake), run here on
// scratch git repositories: a clean tree, a changed tracked file (-dirty), an untracked file only
// (clean), a folder inside another repository and a plain folder ("unknown"), and a second run on
// an unchanged tree that must leave the header untouched (incremental builds).
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "sage2/sage2.h"
#include "sage2/sage2.hpp"
#include "test_support.hpp"

namespace {
namespace fs = std::filesystem;
using sage2::test::run_command;
using sage2::test::TempDir;

// 40 lowercase hex digits with an optional "-dirty", or "unknown".
bool well_formed(const std::string& s) {
  static const std::regex re("^([0-9a-f]{40}(-dirty)?|unknown)$");
  return std::regex_match(s, re);
}

std::string q(const std::string& s) { return "'" + s + "'"; }

bool have_git() { return run_command("git --version >/dev/null 2>&1").code == 0; }

// Runs cmake/build_commit.cmake for `source`; returns the value written into `out`.
std::string record(const std::string& source, const std::string& out) {
  const auto r = run_command(q(SAGE2_CMAKE_COMMAND) + " -DSOURCE_DIR=" + q(source) + " -DOUT=" + q(out) +
                             " -DGIT=git -P " + q(std::string(SAGE2_SOURCE_DIR) + "/cmake/build_commit.cmake") +
                             " 2>&1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ifstream f(out);
  REQUIRE(f.good());
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string key = "#define SAGE2_BUILD_COMMIT \"";
  const auto at = text.find(key);
  REQUIRE(at != std::string::npos);
  const auto end = text.find('"', at + key.size());
  REQUIRE(end != std::string::npos);
  return text.substr(at + key.size(), end - at - key.size());
}

std::string git(const std::string& dir, const std::string& args) {
  const auto r = run_command("git -C " + q(dir) + " " + args + " 2>&1");
  INFO("git " << args << ": " << r.out);
  REQUIRE(r.code == 0);
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}
}  // namespace

TEST_CASE("build commit: C and C++ report the same well-formed string") {
  const char* c = sage2_build_commit();
  REQUIRE(c != nullptr);
  CHECK(c == sage2_build_commit());  // a static string
  const std::string s = c;
  INFO("build commit: " << s);
  CHECK(well_formed(s));
  CHECK(sage2::build_commit() == s);
}

TEST_CASE("build commit: a library built from a git checkout names a commit of that checkout") {
  // The tests are built together with the library they link, from SAGE2_SOURCE_DIR.
  const std::string src = SAGE2_SOURCE_DIR;
  const auto top = run_command("git -C " + q(src) + " rev-parse --show-toplevel 2>/dev/null");
  if (!have_git() || top.code != 0 || fs::weakly_canonical(top.out.substr(0, top.out.find('\n'))) !=
                                          fs::weakly_canonical(src)) {
    MESSAGE("the sources are not a git checkout here (or git is missing): only the format is checked");
    return;
  }
  const std::string s = sage2::build_commit();
  INFO("build commit: " << s);
  REQUIRE(s != "unknown");
  const std::string hash = s.substr(0, 40);
  // HEAD may have moved since the build; the commit must still exist in this repository.
  CHECK(run_command("git -C " + q(src) + " cat-file -e " + hash + "^{commit} 2>/dev/null").code == 0);
}

TEST_CASE("build commit: sage2-info prints it") {
  const auto r = run_command("SAGE2_LIBCUDA=/nonexistent/libcuda.so.1 " + q(std::string(SAGE2_TOOLS_DIR) + "/sage2-info") +
                             " 2>&1");
  INFO(r.out);
  CHECK(r.out.find("build commit: " + sage2::build_commit() + "\n") != std::string::npos);
}

TEST_CASE("build commit: every tool's --version prints the library version and it (issue 32)") {
  for (const std::string tool : {"sage2-info", "sage2-cache", "sage2-autotune"}) {
    CAPTURE(tool);
    // No driver needed.
    const auto r = run_command("SAGE2_LIBCUDA=/nonexistent/libcuda.so.1 " + q(std::string(SAGE2_TOOLS_DIR) + "/" + tool) +
                               " --version 2>&1");
    CHECK(r.code == 0);
    CHECK(r.out == tool + " (sage2 " + sage2::version_info().library + ")\nbuild commit: " + sage2::build_commit() + "\n");
  }
}

TEST_CASE("build commit: the build-time script on scratch repositories") {
  if (!have_git()) {
    MESSAGE("git is missing: the script's git cases are not run");
    return;
  }
  TempDir tmp("sage2-build-commit");
  const std::string repo = tmp / "repo", out = tmp / "gen/sage2_build_commit.h";
  fs::create_directories(repo + "/sub");
  git(repo, "init -q");
  git(repo, "config user.email t@example.com");
  git(repo, "config user.name t");
  std::ofstream(repo + "/a.txt") << "one\n";
  git(repo, "add a.txt");
  git(repo, "-c commit.gpgsign=false commit -q -m first");
  const std::string head = git(repo, "rev-parse HEAD");
  REQUIRE(head.size() == 40);

  CHECK(record(repo, out) == head);  // clean
  // An unchanged tree leaves the header as it is (same bytes, same time): nothing recompiles.
  const auto old_time = fs::last_write_time(out) - std::chrono::hours(1);
  fs::last_write_time(out, old_time);
  CHECK(record(repo, out) == head);
  CHECK(fs::last_write_time(out) == old_time);

  std::ofstream(repo + "/untracked.txt") << "x\n";  // untracked files do not make it dirty
  CHECK(record(repo, out) == head);
  std::ofstream(repo + "/a.txt") << "two\n";  // a changed tracked file does
  CHECK(record(repo, out) == head + "-dirty");
  CHECK(fs::last_write_time(out) != old_time);
  git(repo, "-c commit.gpgsign=false commit -q -am second");
  const std::string head2 = git(repo, "rev-parse HEAD");
  CHECK(head2 != head);
  CHECK(record(repo, out) == head2);  // re-run after a commit: the new hash, clean again

  // A folder inside a checkout is not that checkout (a copy of the sources vendored elsewhere).
  CHECK(record(repo + "/sub", out) == "unknown");
  const std::string plain = tmp / "plain";
  fs::create_directories(plain);
  CHECK(record(plain, out) == "unknown");
  CHECK(well_formed(record(repo, out)));
}
