// sage2-cache: inspect and maintain the on-disk kernel cache.
//
//   sage2-cache [--dir DIR] <command> [options]
//     list [--json]                 every entry: key, arch, size, age (bad ones flagged)
//     verify [--remove] [--json]    check every entry; --remove deletes the bad ones
//     prune --max-size SIZE         delete least recently used entries until total <= SIZE
//                                   (SIZE: bytes, or with K/M/G/T suffix, powers of 1024)
//     clear                         delete every entry
//     export BUNDLE                 write every valid entry into one bundle file
//     import BUNDLE                 verify and store every entry of a bundle
//     help                          this text
//   --dir DIR overrides the cache directory ($SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2,
//   else ~/.cache/sage2). Options may come before or after the command.
//
// Exit codes: 0 success; 1 bad entries found (verify, even with --remove), entries rejected or
// not written (import), or the operation failed (unreadable directory, unwritable bundle, not a
// bundle); 2 usage error.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "base/config.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBad = 1;
constexpr int kExitUsage = 2;

const char* kUsage =
    "usage: sage2-cache [--dir DIR] <command> [options]\n"
    "\n"
    "commands:\n"
    "  list [--json]               list entries (key, arch, size, age)\n"
    "  verify [--remove] [--json]  check every entry; --remove deletes bad ones\n"
    "  prune --max-size SIZE       delete least recently used entries until the total is <= SIZE\n"
    "                              (bytes, or with suffix K, M, G, T = powers of 1024; e.g. 100M, 2G)\n"
    "  clear                       delete every entry\n"
    "  export BUNDLE               write all valid entries into the single file BUNDLE\n"
    "  import BUNDLE               verify each entry of BUNDLE and add the valid ones\n"
    "  help                        show this text\n"
    "\n"
    "options:\n"
    "  --dir DIR   cache directory (default: $SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2,\n"
    "              else ~/.cache/sage2)\n"
    "  --json      machine-readable output (list, verify)\n"
    "\n"
    "exit codes: 0 ok; 1 bad entries found, entries rejected, or the operation failed;\n"
    "            2 usage error\n";

struct UsageError {
  std::string message;
};

// "123", "100M", "2G", "64KiB", "1gb" → bytes (powers of 1024). nullopt when malformed/overflowing.
std::optional<std::uint64_t> parse_size(const std::string& s) {
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    const std::uint64_t d = static_cast<std::uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string suffix;
  for (; i < s.size(); ++i) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") shift = 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") shift = 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") shift = 30;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB") shift = 40;
  if (shift < 0) return std::nullopt;
  if (shift > 0 && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::string human_size(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string human_age(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%.0fm", s / 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%.1fh", s / 3600);
  else std::snprintf(buf, sizeof buf, "%.1fd", s / 86400);
  return buf;
}

nlohmann::json entry_json(const sage2::cache::EntryInfo& e) {
  nlohmann::json j = {{"file", e.file},   {"key", e.key},           {"arch", e.arch},
                      {"size_bytes", e.size_bytes}, {"age_seconds", e.age_seconds}, {"valid", e.valid}};
  if (!e.valid) j["problem"] = e.problem;
  return j;
}

std::string dump(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct Args {
  std::string command;
  std::string dir;
  bool json = false, remove = false;
  std::optional<std::string> max_size;
  std::vector<std::string> positional;
  std::vector<std::string> seen_options;  // for per-command validation
};

Args parse(int argc, char** argv) {
  Args a;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string t = argv[i];
    if (!options_done && t == "--") { options_done = true; continue; }
    if (!options_done && t.size() > 1 && t[0] == '-') {
      std::string name = t, value;
      bool has_value = false;
      if (const auto eq = t.find('='); t.rfind("--", 0) == 0 && eq != std::string::npos) {
        name = t.substr(0, eq);
        value = t.substr(eq + 1);
        has_value = true;
      }
      auto take_value = [&]() -> std::string {
        if (has_value) return value;
        if (i + 1 >= argc) throw UsageError{name + " needs a value"};
        return argv[++i];
      };
      if (name == "-h" || name == "--help") { a.command = "help"; return a; }
      if (name == "--dir") {
        a.dir = take_value();
        if (a.dir.empty()) throw UsageError{"--dir needs a non-empty value"};
        continue;
      }
      if (name == "--max-size") { a.max_size = take_value(); a.seen_options.push_back(name); continue; }
      if (has_value) throw UsageError{name + " takes no value"};
      if (name == "--json") { a.json = true; a.seen_options.push_back(name); continue; }
      if (name == "--remove") { a.remove = true; a.seen_options.push_back(name); continue; }
      throw UsageError{"unknown option '" + t + "'"};
    }
    if (a.command.empty()) a.command = t;
    else a.positional.push_back(t);
  }
  return a;
}

void check_options(const Args& a, std::initializer_list<const char*> allowed, std::size_t positional) {
  for (const auto& o : a.seen_options) {
    bool ok = false;
    for (const char* x : allowed) ok = ok || o == x;
    if (!ok) throw UsageError{"option " + o + " does not apply to '" + a.command + "'"};
  }
  if (a.positional.size() != positional) {
    if (positional == 0) throw UsageError{"'" + a.command + "' takes no arguments (got '" + a.positional[0] + "')"};
    throw UsageError{"'" + a.command + "' needs exactly " + std::to_string(positional) + " argument" +
                     (positional == 1 ? "" : "s")};
  }
}

int run(const Args& a) {
  using sage2::cache::DiskCache;
  const std::string dir = a.dir.empty() ? sage2::base::config::cache_config().cache_dir : a.dir;
  const DiskCache cache(dir, /*disabled=*/false);  // the tool manages the directory regardless

  if (a.command == "list") {
    check_options(a, {"--json"}, 0);
    const auto entries = cache.list();
    std::uint64_t total = 0;
    std::size_t bad = 0;
    for (const auto& e : entries) { total += e.size_bytes; bad += e.valid ? 0 : 1; }
    if (a.json) {
      nlohmann::json j = {{"dir", dir}, {"total_bytes", total}, {"entries", nlohmann::json::array()}};
      for (const auto& e : entries) j["entries"].push_back(entry_json(e));
      std::cout << dump(j) << "\n";
    } else {
      std::cout << "cache directory: " << dir << "\n";
      for (const auto& e : entries) {
        char line[96];
        std::snprintf(line, sizeof line, "%-7s %10s %7s  ", e.valid ? e.arch.c_str() : "BAD",
                      human_size(e.size_bytes).c_str(), human_age(e.age_seconds).c_str());
        std::cout << line << (e.valid ? e.key : e.file + " (" + e.problem + ")") << "\n";
      }
      std::cout << entries.size() << " entries, " << human_size(total);
      if (bad) std::cout << ", " << bad << " bad (run 'sage2-cache verify --remove')";
      std::cout << "\n";
    }
    return kExitOk;
  }
  if (a.command == "verify") {
    check_options(a, {"--json", "--remove"}, 0);
    std::size_t checked = 0;
    const auto bad = cache.verify(a.remove, &checked);
    if (a.json) {
      nlohmann::json j = {{"dir", dir}, {"checked", checked}, {"bad", nlohmann::json::array()}};
      for (const auto& e : bad) {
        auto je = entry_json(e);
        je["removed"] = e.removed;
        j["bad"].push_back(je);
      }
      std::cout << dump(j) << "\n";
    } else {
      for (const auto& e : bad)
        std::cout << "bad: " << e.file << ": " << e.problem << (e.removed ? " (removed)" : "") << "\n";
      std::cout << checked << " entries checked, " << bad.size() << " bad"
                << (a.remove && !bad.empty() ? " (removed)" : "") << "\n";
    }
    return bad.empty() ? kExitOk : kExitBad;
  }
  if (a.command == "prune") {
    check_options(a, {"--max-size"}, 0);
    if (!a.max_size) throw UsageError{"prune needs --max-size SIZE (e.g. 100M, 2G or a byte count)"};
    const auto max = parse_size(*a.max_size);
    if (!max) throw UsageError{"invalid size '" + *a.max_size + "' (use bytes or a K/M/G/T suffix, e.g. 100M)"};
    const std::uint64_t freed = cache.prune(*max);
    const std::uint64_t left = cache.total_bytes();
    std::cout << "freed " << human_size(freed) << " (" << freed << " bytes); " << human_size(left)
              << " (" << left << " bytes) remain\n";
    return left <= *max ? kExitOk : kExitBad;
  }
  if (a.command == "clear") {
    check_options(a, {}, 0);
    const std::size_t removed = cache.clear();
    std::cout << "removed " << removed << " entries from " << dir << "\n";
    return cache.total_bytes() == 0 ? kExitOk : kExitBad;
  }
  if (a.command == "export") {
    check_options(a, {}, 1);
    const std::size_t n = cache.export_bundle(a.positional[0]);
    std::cout << "exported " << n << " entries to " << a.positional[0] << "\n";
    return kExitOk;
  }
  if (a.command == "import") {
    check_options(a, {}, 1);
    const auto r = cache.import_bundle(a.positional[0]);
    std::cout << "imported " << r.imported << ", rejected " << r.rejected;
    if (r.failed) std::cout << ", not written " << r.failed;
    std::cout << "\n";
    return r.rejected == 0 && r.failed == 0 ? kExitOk : kExitBad;
  }
  throw UsageError{"unknown command '" + a.command + "'"};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.command == "help") {
      std::cout << kUsage;
      return kExitOk;
    }
    if (a.command.empty()) throw UsageError{"no command given"};
    return run(a);
  } catch (const UsageError& e) {
    std::cerr << "sage2-cache: " << e.message << "\n"
              << "usage: sage2-cache [--dir DIR] {list|verify|prune|clear|export|import|help} [options]\n"
              << "run 'sage2-cache --help' for details\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "sage2-cache: " << e.what() << "\n";
    return kExitBad;
  }
}
