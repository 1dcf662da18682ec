// sage2-cache: inspect and maintain the on-disk kernel cache.
//
//   sage2-cache [--dir DIR] <command> [options]
//     list [--json]                 every entry: key, arch, size, age (bad ones flagged)
//     verify [--remove] [--json]    check every entry; --remove deletes the bad ones
//     prune --max-size SIZE         delete least recently used entries until total <= SIZE
//                                   (SIZE: bytes, or with K/M/G/T suffix, powers of 1024)
//     clear                         delete every entry
//     export BUNDLE                 write every valid entry into one bundle file; print its SHA-256
//     import [--sha256 HEX] BUNDLE  verify and store every entry of a bundle; with --sha256, nothing
//                                   unless the bundle's SHA-256 is HEX (as export printed it)
//     help                          this text (also -h, --help; --version: library version, commit)
//   --dir DIR overrides the cache directory ($SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2,
//   else ~/.cache/sage2); it must exist, except for import, which creates it, and for list of the
//   default directory (neither --dir nor $SAGE2_CACHE_DIR): one not created yet is an empty cache,
//   as sage2-info reports it. Options may come before or after the command. Entries the library
//   would not load (another user's, or writable by group or others: cache/disk_cache.hpp) are
//   listed as bad and never exported or imported into; SAGE2_CACHE_TRUST_ROOT=1 accepts root's.
//
// Exit codes: 0 success; 1 bad entries found (verify, even with --remove; also an untrusted
// folder), entries rejected or not written (import), or the operation failed (the cache directory
// does not exist — but for list of the default one —, is unreadable or untrusted, unwritable
// bundle, not a bundle, a SHA-256 that differs or cannot be computed); 2 usage error (one line
// naming the option, command or value, then the synopsis; also a --sha256 that is not 64 hex
// digits).
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <stdexcept>
#include <vector>

#include "cache/disk_cache.hpp"
#include "base/config.hpp"
#include "base/sha256.hpp"
#include "tool_cli.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBad = 1;  // usage errors: sage2::tools::kExitUsage (2)

// --help: the options, the commands (CLI11 lists them; each says which options it takes), the codes.
const char* const kUsageLines = "usage: sage2-cache [--dir DIR] <command> [options]\n";

const char* const kFooter =
    "SIZE: bytes, or with suffix K, M, G, T = powers of 1024 (e.g. 100M, 2G). --dir and the\n"
    "options may come before or after the command.\n"
    "Only entries and folders of the current user that group and others cannot write are used\n"
    "(SAGE2_CACHE_TRUST_ROOT=1: also root's).\n"
    "exit codes: 0 ok; 1 bad entries found, entries rejected, the cache directory does not exist\n"
    "            (list: a default directory not created yet is an empty cache, exit 0), or the\n"
    "            operation failed (also a SHA-256 that differs); 2 usage error";

using sage2::tools::UsageError;

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
  std::optional<std::string> sha256;  // import --sha256, as typed
  std::vector<std::string> positional;
  std::vector<std::string> seen_options;  // for per-command validation
};

// The command line: --dir and the commands' options belong to the program, so that they may come
// before or after the command (each command falls through to them); check_options() then says
// which ones a command takes. Leftovers are worded here (unknown command / option).
struct CommandLine {
  CLI::App app{"Inspect and maintain the on-disk kernel cache.", "sage2-cache"};
  Args a;
  std::string max_size;
  std::string sha256;
  std::vector<std::string> bundle;

  CommandLine() {
    app.footer(kFooter);
    app.allow_extras();
    app.require_subcommand(0, 1);
    app.add_option("--dir", a.dir,
                   "cache directory (default: $SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2,\nelse ~/.cache/sage2); "
                   "must exist, but for import")
        ->type_name("DIR");
    app.add_flag("--json", a.json, "machine-readable output (list, verify)");
    app.add_flag("--remove", a.remove, "verify: delete the bad entries");
    app.add_option("--max-size", max_size, "prune: the size to prune to")->type_name("SIZE");
    app.add_option("--sha256", sha256, "import: refuse the bundle unless its SHA-256 is HEX (as export printed it)")
        ->type_name("HEX");
    sage2::tools::setup(app, "sage2-cache", kUsageLines);
    command("list", "[--json]  every entry: key, arch, size, age (bad ones flagged)");
    command("verify", "[--remove] [--json]  check every entry; --remove deletes the bad ones");
    command("prune", "--max-size SIZE  delete least recently used entries until the total is <= SIZE");
    command("clear", "delete every entry");
    command("export", "BUNDLE  write every valid entry into the single file BUNDLE; print its SHA-256", true);
    command("import", "[--sha256 HEX] BUNDLE  verify each entry of BUNDLE and add the valid ones (creates the directory)",
            true);
    command("help", "this text");
  }

  void command(const char* name, const char* help, bool takes_bundle = false) {
    CLI::App* c = app.add_subcommand(name, help);
    c->group("Commands");
    c->fallthrough();
    c->allow_extras();
    if (takes_bundle) c->add_option("BUNDLE", bundle, "bundle file");
  }

  Args args() {
    for (const CLI::App* c : app.get_subcommands()) a.command = c->get_name();
    a.positional = bundle;
    const auto extra = app.remaining();
    if (!extra.empty()) {
      const std::string& x = extra.front();
      if (x.size() > 1 && x[0] == '-') throw UsageError{"unknown option '" + x + "'"};
      if (a.command.empty()) throw UsageError{"unknown command '" + x + "'"};
      a.positional.insert(a.positional.end(), extra.begin(), extra.end());
    }
    if (app.count("--dir") && a.dir.empty()) throw UsageError{"--dir needs a non-empty value"};
    if (app.count("--max-size")) a.max_size = max_size;
    if (app.count("--sha256")) a.sha256 = sha256;
    for (const char* o : {"--json", "--remove", "--max-size", "--sha256"})
      if (app.count(o)) a.seen_options.push_back(o);
    return a;
  }
};

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

// A missing cache directory is far more often a mistyped --dir or $SAGE2_CACHE_DIR than an empty
// cache: the commands that read it say so (main: exit 1) instead of reporting 0 entries. `import`
// creates it. The default directory (neither given) is another matter: the library creates it on
// its first store, so before that it is an empty cache — sage2-info says "0 entries" and `list`
// says the same (default_dir_not_created), exit 0 (issue 42).
bool default_dir_not_created(const Args& a, const std::string& dir) {
  const char* env = std::getenv("SAGE2_CACHE_DIR");
  struct stat st {};
  return a.dir.empty() && !(env && *env) && ::stat(dir.c_str(), &st) != 0 && errno == ENOENT;
}

void require_dir(const Args& a, const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
  const char* env = std::getenv("SAGE2_CACHE_DIR");
  const std::string from = !a.dir.empty() ? "--dir"
                           : env && *env  ? "$SAGE2_CACHE_DIR"
                                          : "the default cache directory; nothing has been cached in it yet";
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  throw std::runtime_error("cache directory " + dir + (exists ? " is not a directory" : " does not exist") + " (" + from + ")");
}

// The library's own warning says the same for loads; the tool says it where it reports.
void report_folder(const sage2::cache::DiskCache& cache) {
  const std::string p = cache.folder_problem();
  if (!p.empty())
    std::cout << "cache directory " << cache.dir() << " is not trusted (" << p
              << "): the library neither loads from it nor stores into it\n";
}

int run(const Args& a) {
  using sage2::cache::DiskCache;
  const sage2::base::config::CacheConfig config = sage2::base::config::cache_config();
  const std::string dir = a.dir.empty() ? config.cache_dir : a.dir;
  // The tool manages the directory even when the disk cache is disabled; it trusts what the library does.
  const DiskCache cache(dir, /*disabled=*/false, sage2::cache::Trust{config.trust_root, std::nullopt});

  if (a.command == "list") {
    check_options(a, {"--json"}, 0);
    if (default_dir_not_created(a, dir)) {  // an empty cache: the same report as an empty directory's
      const nlohmann::json j = {{"dir", dir}, {"total_bytes", 0}, {"entries", nlohmann::json::array()}};
      if (a.json)
        std::cout << dump(j) << "\n";
      else
        std::cout << "cache directory: " << dir << " (does not exist yet: nothing has been cached in it)\n"
                  << "0 entries, " << human_size(0) << "\n";
      return kExitOk;
    }
    require_dir(a, dir);
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
      report_folder(cache);
    }
    return kExitOk;
  }
  if (a.command == "verify") {
    check_options(a, {"--json", "--remove"}, 0);
    require_dir(a, dir);
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
      report_folder(cache);
    }
    return bad.empty() && cache.folder_problem().empty() ? kExitOk : kExitBad;
  }
  if (a.command == "prune") {
    check_options(a, {"--max-size"}, 0);
    if (!a.max_size) throw UsageError{"prune needs --max-size SIZE (e.g. 100M, 2G or a byte count)"};
    const auto max = parse_size(*a.max_size);
    if (!max) throw UsageError{"invalid size '" + *a.max_size + "' (use bytes or a K/M/G/T suffix, e.g. 100M)"};
    require_dir(a, dir);
    const std::uint64_t freed = cache.prune(*max);
    const std::uint64_t left = cache.total_bytes();
    std::cout << "freed " << human_size(freed) << " (" << freed << " bytes); " << human_size(left)
              << " (" << left << " bytes) remain\n";
    return left <= *max ? kExitOk : kExitBad;
  }
  if (a.command == "clear") {
    check_options(a, {}, 0);
    require_dir(a, dir);
    const std::size_t removed = cache.clear();
    std::cout << "removed " << removed << " entries from " << dir << "\n";
    return cache.total_bytes() == 0 ? kExitOk : kExitBad;
  }
  if (a.command == "export") {
    check_options(a, {}, 1);
    require_dir(a, dir);
    const std::size_t n = cache.export_bundle(a.positional[0]);
    std::cout << "exported " << n << " entries to " << a.positional[0] << "\n";
    // The bundle is written; a digest that cannot be computed is said, not an error.
    if (const std::string why = sage2::base::sha256_unavailable_reason(); !why.empty())
      std::cout << "sha256: unavailable (" << why << ")\n";
    else
      std::cout << "sha256: " << DiskCache::bundle_sha256(a.positional[0]) << "\n";
    return kExitOk;
  }
  if (a.command == "import") {
    check_options(a, {"--sha256"}, 1);
    std::string expected;
    if (a.sha256) {
      const auto hex = sage2::base::parse_sha256_hex(*a.sha256);
      if (!hex) throw UsageError{"--sha256 '" + *a.sha256 + "' is not a SHA-256 digest (64 hex digits)"};
      expected = *hex;
    }
    const auto r = cache.import_bundle(a.positional[0], expected);
    std::cout << "imported " << r.imported << ", rejected " << r.rejected;
    if (r.failed) std::cout << ", not written " << r.failed;
    if (a.sha256) std::cout << " (SHA-256 " << expected << " verified)";
    std::cout << "\n";
    return r.rejected == 0 && r.failed == 0 ? kExitOk : kExitBad;
  }
  throw UsageError{"unknown command '" + a.command + "'"};
}

}  // namespace

int main(int argc, char** argv) {
  const char* const usage = "usage: sage2-cache [--dir DIR] {list|verify|prune|clear|export|import|help} [options]";
  CommandLine cl;
  if (const auto rc = sage2::tools::parse(cl.app, "sage2-cache", argc, argv, usage)) return *rc;
  try {
    const Args a = cl.args();
    if (a.command == "help") {
      std::cout << sage2::tools::help_text(cl.app);
      return kExitOk;
    }
    if (a.command.empty()) throw UsageError{"no command given"};
    return run(a);
  } catch (const UsageError& e) {
    return sage2::tools::usage_error("sage2-cache", e.message, usage);
  } catch (const std::exception& e) {
    std::cerr << "sage2-cache: " << e.what() << "\n";
    return kExitBad;
  }
}
