// Specification of the one atomic-write helper the kernel cache and the tuning database share:
// a reader sees the old file or the complete new one, never a partial file; a write that is not
// committed leaves the target untouched and no temporary file behind.
#include <dirent.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <doctest/doctest.h>

#include "base/file_util.hpp"
#include "test_support.hpp"

using namespace sage2::base;

namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  ::closedir(d);
  return out;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("cache file_util: write_file_atomic creates or replaces the file and leaves no temporary") {
  sage2::test::TempDir tmp("sage2-atomic");
  std::string why;
  const std::string first = "first version";
  REQUIRE(fs::write_file_atomic(tmp.path, "f.json", first.data(), first.size(), ".t-", ".partial", why));
  CHECK(slurp(tmp / "f.json") == first);
  const std::string second(100000, 'x');
  REQUIRE(fs::write_file_atomic(tmp.path, "f.json", second.data(), second.size(), ".t-", ".partial", why));
  CHECK(slurp(tmp / "f.json") == second);
  CHECK(names_in(tmp.path) == std::set<std::string>{"f.json"});
}

TEST_CASE("cache file_util: an AtomicFile not committed leaves the target as it was and removes its temporary") {
  sage2::test::TempDir tmp("sage2-atomic");
  std::string why;
  const std::string old = "old";
  REQUIRE(fs::write_file_atomic(tmp.path, "f", old.data(), old.size(), ".t-", ".partial", why));
  {
    fs::AtomicFile f(".t-", ".partial");
    REQUIRE(f.open(tmp.path, "f", why));
    REQUIRE(f.write("new bytes", 9, why));
    // The temporary is named with the caller's prefix and suffix (so each user can sweep its own).
    bool temp_seen = false;
    for (const auto& n : names_in(tmp.path))
      temp_seen |= n.rfind(".t-", 0) == 0 && n.size() > 8 && n.compare(n.size() - 8, 8, ".partial") == 0;
    CHECK(temp_seen);
    CHECK(slurp(tmp / "f") == old);  // nothing visible before commit
  }
  CHECK(slurp(tmp / "f") == old);
  CHECK(names_in(tmp.path) == std::set<std::string>{"f"});
}

TEST_CASE("cache file_util: pwrite_at rewrites bytes already written before the commit") {
  sage2::test::TempDir tmp("sage2-atomic");
  std::string why;
  fs::AtomicFile f(".t-", ".partial");
  REQUIRE(f.open(tmp.path, "b", why));
  REQUIRE(f.write("0000payload", 11, why));
  REQUIRE(f.pwrite_at("HEAD", 4, 0, why));
  REQUIRE(f.commit(why));
  CHECK(slurp(tmp / "b") == "HEADpayload");
}

TEST_CASE("cache file_util: a directory that does not exist is an error naming the path") {
  sage2::test::TempDir tmp("sage2-atomic");
  std::string why;
  CHECK_FALSE(fs::write_file_atomic(tmp / "missing", "f", "x", 1, ".t-", ".partial", why));
  CHECK(why.find(tmp / "missing") != std::string::npos);
}
