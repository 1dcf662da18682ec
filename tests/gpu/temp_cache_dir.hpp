// A kernel cache directory of its own for one GPU test (a fresh mkdtemp under $TMPDIR or /tmp,
// removed with everything in it when the object dies).
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace sage2::test {

struct TempCacheDir {
  std::string path;
  explicit TempCacheDir(const char* tag) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-" + tag + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempCacheDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempCacheDir(const TempCacheDir&) = delete;
  TempCacheDir& operator=(const TempCacheDir&) = delete;
  std::size_t entries() const {  // kernel entries: "<16 hex>.s2c"
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      const std::string f = e.path().filename().string();
      n += f.size() == 20 && f.substr(16) == ".s2c";
    }
    return n;
  }
};

}  // namespace sage2::test
