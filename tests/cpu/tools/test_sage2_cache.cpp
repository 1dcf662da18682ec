// Specification: the sage2-cache tool lists, verifies, prunes, clears, exports and imports a
// cache directory, and says so through documented exit codes: 0 ok, 1 bad entries found or a
// partial failure, 2 usage error.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "test_support.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

struct ToolTempDir : test::TempDir {
  ToolTempDir() : test::TempDir("sage2-tool-test") {}
};

using RunResult = test::CommandResult;

std::string tool_path() { return std::string(SAGE2_TOOLS_DIR) + "/sage2-cache"; }

RunResult run_tool(const std::string& args, const std::string& env = "") {
  return test::run_command(env + (env.empty() ? "" : " ") + "'" + tool_path() + "' " + args + " 2>&1");
}

jit::CompiledKernel tool_kernel(kernels::Arch arch, int head_dim, std::size_t cubin_bytes) {
  kernels::KernelSpec spec;
  spec.family = kernels::KernelFamily::Quantize;
  spec.op = kernels::QuantOp::QuantizeQ;
  spec.arch = arch;
  spec.head_dim = head_dim;
  jit::CompiledKernel k;
  k.key = spec.key();
  k.arch = arch;
  k.entry = spec.entry_name();
  k.cubin.resize(cubin_bytes);
  std::mt19937 rng(static_cast<unsigned>(head_dim));
  for (auto& c : k.cubin) c = static_cast<char>(rng());
  k.facts.registers = 40;
  k.compile_seconds = 0.2;
  k.nvrtc_major = 13;
  return k;
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void flip_middle_byte(const std::string& p) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<long>(f.tellg());
  f.seekg(size / 2);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x40;
  f.seekp(size / 2);
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("sage2-cache tool: list, verify, export, import, prune, clear on a temp cache") {
  REQUIRE_MESSAGE(::access(tool_path().c_str(), X_OK) == 0,
                  "sage2-cache is not built at " << tool_path() << " (build target sage2-cache)");
  ToolTempDir tmp;
  const std::string dir = tmp / "cache";
  DiskCache cache(dir);
  std::vector<jit::CompiledKernel> ks = {tool_kernel(kernels::Arch::Sm90a, 128, 20000),
                                         tool_kernel(kernels::Arch::Sm89, 64, 10000),
                                         tool_kernel(kernels::Arch::Sm90a, 256, 30000)};
  for (const auto& k : ks) REQUIRE(cache.store(k));
  const std::string d = "--dir '" + dir + "' ";

  auto r = run_tool(d + "list");
  CHECK(r.code == 0);
  for (const auto& k : ks) CHECK(r.out.find(k.key) != std::string::npos);
  CHECK(r.out.find("sm_89") != std::string::npos);
  CHECK(r.out.find("3 entries") != std::string::npos);

  r = run_tool("list --json", "SAGE2_CACHE_DIR='" + dir + "'");  // directory from the environment
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["dir"] == dir);
  REQUIRE(j["entries"].size() == 3);
  for (const auto& e : j["entries"]) {
    CHECK(e["valid"] == true);
    CHECK(e["size_bytes"].get<std::uint64_t>() > 10000);
    CHECK(e["age_seconds"].get<double>() >= 0);
  }

  r = run_tool(d + "verify");
  CHECK(r.code == 0);
  CHECK(r.out.find("3 entries checked, 0 bad") != std::string::npos);

  r = run_tool(d + "export '" + (tmp / "all.s2b") + "'");
  CHECK(r.code == 0);
  CHECK(r.out.find("exported 3 entries") != std::string::npos);

  // One corrupted entry: verify reports it (exit 1), --json names it, --remove deletes it.
  const std::string victim = cache.entry_path(ks[1].key);
  flip_middle_byte(victim);
  r = run_tool(d + "verify");
  CHECK(r.code == 1);
  CHECK(r.out.find(victim) != std::string::npos);
  r = run_tool(d + "verify --json");
  CHECK(r.code == 1);
  j = nlohmann::json::parse(r.out);
  CHECK(j["checked"] == 3);
  REQUIRE(j["bad"].size() == 1);
  CHECK(j["bad"][0]["file"] == victim);
  CHECK(j["bad"][0]["valid"] == false);
  CHECK(file_exists(victim));
  r = run_tool(d + "verify --remove");
  CHECK(r.code == 1);
  CHECK_FALSE(file_exists(victim));
  CHECK(run_tool(d + "verify").code == 0);

  // Import the earlier bundle into a fresh directory.
  const std::string dir2 = tmp / "other";
  r = run_tool("import '" + (tmp / "all.s2b") + "' --dir '" + dir2 + "'");
  CHECK(r.code == 0);
  CHECK(r.out.find("imported 3, rejected 0") != std::string::npos);
  for (const auto& k : ks) CHECK(DiskCache(dir2).load(k.key).has_value());

  // A damaged bundle: partial import, exit 1, the rejected count reported.
  {
    std::ifstream in(tmp / "all.s2b", std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    b.resize(b.size() - 100);
    std::ofstream out(tmp / "cut.s2b", std::ios::binary);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  }
  r = run_tool("--dir '" + (tmp / "third") + "' import '" + (tmp / "cut.s2b") + "'");
  CHECK(r.code == 1);
  CHECK(r.out.find("imported 2, rejected 1") != std::string::npos);
  r = run_tool(d + "import '" + (tmp / "missing.s2b") + "'");
  CHECK(r.code == 1);
  CHECK(r.out.find("missing.s2b") != std::string::npos);

  // prune: sizes in bytes and with suffixes.
  CHECK(run_tool(d + "prune --max-size 100M").code == 0);
  CHECK(run_tool(d + "prune --max-size=2G").code == 0);
  CHECK(DiskCache(dir).list().size() == 2);
  r = run_tool(d + "prune --max-size 0");
  CHECK(r.code == 0);
  CHECK(r.out.find("freed") != std::string::npos);
  CHECK(DiskCache(dir).list().empty());

  r = run_tool("--dir '" + dir2 + "' clear");
  CHECK(r.code == 0);
  CHECK(r.out.find("removed 3 entries") != std::string::npos);
  CHECK(DiskCache(dir2).list().empty());

  // An existing empty directory is an empty cache (a missing one: the next case).
  r = run_tool("--dir '" + dir2 + "' list");
  CHECK(r.code == 0);
  CHECK(r.out.find("0 entries") != std::string::npos);
}

TEST_CASE("sage2-cache tool: a cache directory that does not exist is an error, not an empty cache (issue 32)") {
  // --dir and $SAGE2_CACHE_DIR (a mistyped name, most often); the default directory's list: the next case.
  ToolTempDir tmp;
  const std::string nowhere = tmp / "nowhere";
  const std::string d = "--dir '" + nowhere + "' ";
  // Every command that reads the directory: exit 1 (the operation failed), the directory named.
  const std::vector<std::string> commands = {"list",  "list --json", "verify", "verify --remove", "prune --max-size 1M",
                                             "clear", "export '" + (tmp / "b.s2b") + "'"};
  for (const std::string& cmd : commands) {
    CAPTURE(cmd);
    const auto r = run_tool(d + cmd);
    CHECK(r.code == 1);
    CHECK(r.out == "sage2-cache: cache directory " + nowhere + " does not exist (--dir)\n");
    CHECK_FALSE(file_exists(nowhere));  // nothing created
  }
  CHECK_FALSE(file_exists(tmp / "b.s2b"));
  // Where the directory came from is said: $SAGE2_CACHE_DIR here.
  auto r = run_tool("list", "SAGE2_CACHE_DIR='" + nowhere + "'");
  CHECK(r.code == 1);
  CHECK(r.out.find("does not exist ($SAGE2_CACHE_DIR)") != std::string::npos);
  // A file where the directory should be.
  { std::ofstream(tmp / "file") << "x"; }
  r = run_tool("--dir '" + (tmp / "file") + "' list");
  CHECK(r.code == 1);
  CHECK(r.out.find("is not a directory") != std::string::npos);
  // Usage errors still come first (exit 2).
  CHECK(run_tool(d + "prune").code == 2);
  // import creates the directory it fills: a bundle of a real cache into a new one.
  const std::string src = tmp / "src";
  REQUIRE(DiskCache(src).store(tool_kernel(kernels::Arch::Sm89, 64, 1000)));
  REQUIRE(run_tool("--dir '" + src + "' export '" + (tmp / "one.s2b") + "'").code == 0);
  r = run_tool(d + "import '" + (tmp / "one.s2b") + "'");
  CHECK(r.code == 0);
  CHECK(r.out.find("imported 1, rejected 0") != std::string::npos);
  CHECK(run_tool(d + "list").code == 0);
}

TEST_CASE("sage2-cache tool: list of a default cache directory not created yet is an empty cache, as sage2-info says (issue 42)") {
  ToolTempDir tmp;
  // The default directory ($XDG_CACHE_HOME/sage2 here): neither --dir nor $SAGE2_CACHE_DIR names it.
  const std::string xdg = tmp / "xdg";
  const std::string dflt = xdg + "/sage2";
  const std::string env = "env -u SAGE2_CACHE_DIR XDG_CACHE_HOME='" + xdg + "'";
  auto r = run_tool("list", env);
  CHECK(r.code == 0);
  CHECK(r.out == "cache directory: " + dflt + " (does not exist yet: nothing has been cached in it)\n0 entries, 0 B\n");
  r = run_tool("list --json", env);
  CHECK(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["dir"] == dflt);
  CHECK(j["total_bytes"] == 0);
  CHECK(j["entries"].empty());
  CHECK_FALSE(file_exists(dflt));  // nothing created
  // sage2-info reports the same directory with no entries.
  const auto info = test::run_command(env + " '" + std::string(SAGE2_TOOLS_DIR) + "/sage2-info' 2>&1");
  CHECK(info.out.find("disk cache: " + dflt + " (0 entries, 0 invalid)") != std::string::npos);
  // The commands that change or check the cache still need it (exit 1, saying it is the default one).
  r = run_tool("verify", env);
  CHECK(r.code == 1);
  CHECK(r.out.find("does not exist (the default cache directory; nothing has been cached in it yet)") != std::string::npos);
  // A file where the default directory should be is still an error.
  { std::ofstream(xdg) << "x"; }
  CHECK(run_tool("list", env).code == 1);
}

TEST_CASE("sage2-cache tool: help for a command shows the whole program's options; a flag with a value (issue 32)") {
  auto r = run_tool("prune --help");
  CHECK(r.code == 0);
  for (const char* s : {"--dir", "--max-size", "SIZE", "exit codes"}) CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  // A flag given a value: one line naming it.
  r = run_tool("list --json=1");
  CHECK(r.code == 2);
  CHECK(r.out.substr(0, r.out.find('\n')) == "sage2-cache: --json takes no value");
}

TEST_CASE("sage2-cache tool: usage errors exit 2 with a message; --help exits 0") {
  REQUIRE_MESSAGE(::access(tool_path().c_str(), X_OK) == 0,
                  "sage2-cache is not built at " << tool_path() << " (build target sage2-cache)");
  ToolTempDir tmp;
  const std::string d = "--dir '" + tmp.path + "' ";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no command"},
      {d + "frobnicate", "unknown command"},
      {d + "list --bogus", "unknown option"},
      {d + "list extra", "takes no arguments"},
      {d + "prune", "--max-size"},
      {d + "prune --max-size 12X", "invalid size"},
      {d + "prune --max-size -5", "invalid size"},
      {d + "prune --max-size 99999999999999999999", "invalid size"},
      {d + "export", "needs exactly 1"},
      {d + "import a b", "needs exactly 1"},
      {d + "clear --json", "does not apply"},
      {"list --dir", "--dir needs a value"},
  };
  for (const auto& item : bad) {
    // plain locals: clang before 16 cannot capture a structured binding in CAPTURE's lambda
    const auto& args = item.first;
    const auto& says = item.second;
    CAPTURE(args);
    const auto r = run_tool(args);
    CHECK(r.code == 2);
    CHECK(r.out.find(says) != std::string::npos);
    CHECK(r.out.find("usage:") != std::string::npos);
  }
  for (const char* help : {"--help", "-h", "help"}) {
    const auto r = run_tool(help);
    CHECK(r.code == 0);
    CHECK(r.out.find("exit codes") != std::string::npos);
  }
}

namespace {

// The digest `export` printed ("sha256: <64 hex>"), or "" when it printed none.
std::string printed_sha256(const std::string& out) {
  const std::string tag = "sha256: ";
  const auto at = out.find(tag);
  if (at == std::string::npos || out.size() < at + tag.size() + 64) return {};
  const std::string hex = out.substr(at + tag.size(), 64);
  return hex.find_first_not_of("0123456789abcdef") == std::string::npos ? hex : std::string();
}

// A cache of two entries exported to `bundle`; returns what export printed.
RunResult export_two(const ToolTempDir& tmp, const std::string& bundle, const std::string& env = "") {
  const DiskCache src(tmp / "src");
  REQUIRE(src.store(tool_kernel(kernels::Arch::Sm90a, 128, 20000)));
  REQUIRE(src.store(tool_kernel(kernels::Arch::Sm89, 64, 10000)));
  return run_tool("--dir '" + (tmp / "src") + "' export '" + bundle + "'", env);
}

}  // namespace

TEST_CASE("sage2-cache tool: export prints the bundle's SHA-256, the one sha256sum computes") {
  ToolTempDir tmp;
  const std::string bundle = tmp / "fleet.s2b";
  const auto r = export_two(tmp, bundle);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("exported 2 entries") != std::string::npos);
  if (r.out.find("sha256: unavailable") != std::string::npos) {
    MESSAGE("skipped: no libcrypto here (" << r.out << ")");
    return;
  }
  const std::string printed = printed_sha256(r.out);
  REQUIRE_MESSAGE(printed.size() == 64, r.out);
  const auto sum = test::run_command("command -v sha256sum >/dev/null && sha256sum '" + bundle + "'");
  if (sum.code != 0) {
    MESSAGE("skipped: no sha256sum to compare with");
    return;
  }
  CHECK(sum.out.substr(0, 64) == printed);
}

TEST_CASE("sage2-cache tool: import --sha256 imports only the bundle of that digest") {
  ToolTempDir tmp;
  const std::string bundle = tmp / "fleet.s2b";
  const auto exported = export_two(tmp, bundle);
  REQUIRE(exported.code == 0);
  const std::string hex = printed_sha256(exported.out);
  if (hex.empty()) {
    MESSAGE("skipped: export printed no digest (" << exported.out << ")");
    return;
  }
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string wrong = hex;
  wrong[10] = wrong[10] == '0' ? '1' : '0';

  SUBCASE("the right digest, in either case: imported") {
    const std::vector<std::string> digests = {hex, upper};
    for (std::size_t i = 0; i < digests.size(); ++i) {
      const std::string& digest = digests[i];
      const std::string dir = tmp / ("dst-" + std::to_string(i));
      const auto r = run_tool("--dir '" + dir + "' import --sha256 " + digest + " '" + bundle + "'");
      CHECK(r.code == 0);
      CHECK(r.out.find("imported 2, rejected 0") != std::string::npos);
      CHECK(r.out.find("SHA-256 " + hex + " verified") != std::string::npos);
      CHECK(DiskCache(dir).list().size() == 2);
    }
  }
  SUBCASE("another digest: refused in one line, exit 1, nothing imported") {
    const std::string dir = tmp / "dst";
    const auto r = run_tool("import '" + bundle + "' --sha256=" + wrong + " --dir '" + dir + "'");
    CHECK(r.code == 1);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find("its SHA-256 is " + hex + ", not the expected " + wrong + "; nothing imported") !=
          std::string::npos);
    CHECK_FALSE(file_exists(dir));
  }
  SUBCASE("a bundle changed by one byte: refused, nothing imported") {
    flip_middle_byte(bundle);
    const std::string dir = tmp / "dst";
    const auto r = run_tool("--dir '" + dir + "' import --sha256 " + hex + " '" + bundle + "'");
    CHECK(r.code == 1);
    CHECK(r.out.find("not the expected " + hex) != std::string::npos);
    CHECK_FALSE(file_exists(dir));
  }
  SUBCASE("not a digest: a usage error naming the value") {
    for (const std::string bad : {std::string("xyz"), hex.substr(1), hex + "0", "g" + hex.substr(1)}) {
      CAPTURE(bad);
      const auto r = run_tool("--dir '" + (tmp / "dst") + "' import --sha256 '" + bad + "' '" + bundle + "'");
      CHECK(r.code == 2);
      CHECK(r.out.find("--sha256 '" + bad + "' is not a SHA-256 digest (64 hex digits)") != std::string::npos);
      CHECK_FALSE(file_exists(tmp / "dst"));
    }
    const auto r = run_tool("--dir '" + (tmp / "src") + "' export --sha256 " + hex + " '" + (tmp / "x.s2b") + "'");
    CHECK(r.code == 2);
    CHECK(r.out.find("option --sha256 does not apply to 'export'") != std::string::npos);
  }
}

TEST_CASE("sage2-cache tool: without libcrypto, export still works and says why; import --sha256 fails") {
  ToolTempDir tmp;
  const std::string bundle = tmp / "fleet.s2b";
  const std::string no_crypto = "SAGE2_LIBCRYPTO=/nonexistent/libcrypto.so.3";
  auto r = export_two(tmp, bundle, no_crypto);
  CHECK(r.code == 0);
  CHECK(r.out.find("exported 2 entries") != std::string::npos);
  CHECK(r.out.find("sha256: unavailable (cannot load libcrypto: /nonexistent/libcrypto.so.3: ") != std::string::npos);
  CHECK(r.out.find("(named by SAGE2_LIBCRYPTO))") != std::string::npos);
  CHECK(file_exists(bundle));
  const std::string dir = tmp / "dst";
  r = run_tool("--dir '" + dir + "' import --sha256 " + std::string(64, 'a') + " '" + bundle + "'", no_crypto);
  CHECK(r.code == 1);
  CHECK(r.out.find("its SHA-256 cannot be checked") != std::string::npos);
  CHECK(r.out.find("nothing imported") != std::string::npos);
  CHECK_FALSE(file_exists(dir));
  // Without --sha256 the bundle is imported as before.
  r = run_tool("--dir '" + dir + "' import '" + bundle + "'", no_crypto);
  CHECK(r.code == 0);
  CHECK(r.out.find("imported 2, rejected 0") != std::string::npos);
}

TEST_CASE("sage2-cache tool: a group-writable cache directory is reported, and nothing is exported from or imported into it") {
  ToolTempDir tmp;
  const std::string bundle = tmp / "fleet.s2b";
  REQUIRE(export_two(tmp, bundle).code == 0);
  const std::string dir = tmp / "src";
  REQUIRE(::chmod(dir.c_str(), 0770) == 0);
  const std::string d = "--dir '" + dir + "' ";
  auto r = run_tool(d + "verify");
  CHECK(r.code == 1);
  CHECK(r.out.find("cache directory " + dir + " is not trusted (owner uid " + std::to_string(::geteuid()) +
                   ", mode 0770: writable by its group)") != std::string::npos);
  r = run_tool(d + "list");
  CHECK(r.code == 0);
  CHECK(r.out.find("is not trusted") != std::string::npos);
  r = run_tool(d + "export '" + (tmp / "again.s2b") + "'");
  CHECK(r.code == 1);
  CHECK(r.out.find("not trusted") != std::string::npos);
  CHECK_FALSE(file_exists(tmp / "again.s2b"));
  r = run_tool(d + "import '" + bundle + "'");
  CHECK(r.code == 1);
  CHECK(r.out.find("mode 0770") != std::string::npos);
}
