// Fault injection, cache side (reliability issue #8). Specification: whatever happens to the
// cache directory or its entries, "load, else compile and store" — the flow KernelLoader runs
// before it hands a cubin to the driver — returns exactly the kernel of the requested key, never
// another one, never crashes, and repairs the cache when it can. The format-level damage cases
// (truncation, flipped bytes, one entry renamed, another arch's entry) are specified in
// tests/cpu/cache/test_disk_cache.cpp; this file adds the real-compile recompile-and-replace flow, entries
// swapped between two keys, a read-only directory as an unprivileged user (CI runs as root, where
// chmod does not stop writes), a full disk while replacing an entry, and a directory deleted
// under a running process.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/log.hpp"
#include "test_support.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

struct FaultDir : test::TempDir {
  FaultDir() : test::TempDir("sage2-faults") {}
};

using Warnings = test::WarnCapture;

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}
void rm_rf(const std::string& p) {
  const std::string cmd = "rm -rf '" + p + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// The disk cache key of a spec's kernel, as this process builds it.
std::string ckey(const kernels::KernelSpec& spec) { return jit::make_build(spec).key; }

// The loader's flow without the driver: disk cache, else NVRTC then store.
struct Flow {
  int compiled = 0, from_disk = 0, stored = 0;
  jit::CompiledKernel get(const DiskCache& cache, const kernels::KernelSpec& spec) {
    const jit::KernelBuild build = jit::make_build(spec);
    if (auto k = cache.load_build(build)) {
      ++from_disk;
      return *k;
    }
    jit::CompiledKernel k = jit::compile(build);
    ++compiled;
    stored += cache.store(k) ? 1 : 0;
    return k;
  }
};

kernels::KernelSpec quantize_spec(kernels::QuantOp op, kernels::Arch arch, int head_dim) {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::Quantize;
  s.op = op;
  s.arch = arch;
  s.head_dim = head_dim;
  return s;
}

// What a loaded kernel must be for `spec`: its key, entry, arch, and the cubin NVRTC produced.
void check_is(const jit::CompiledKernel& got, const kernels::KernelSpec& spec, const std::vector<char>& cubin) {
  CHECK(got.key == ckey(spec));
  CHECK(got.entry == spec.entry_name());
  CHECK(got.arch == spec.arch);
  CHECK(got.cubin == cubin);
}

// A fake kernel for the file-system cases (no compile needed there).
jit::CompiledKernel fake(int head_dim, std::size_t cubin_bytes, unsigned salt = 1, kernels::Arch arch = kernels::Arch::Sm90a) {
  const auto spec = quantize_spec(kernels::QuantOp::QuantizeK, arch, head_dim);
  jit::CompiledKernel k;
  k.key = spec.key();
  k.arch = arch;
  k.entry = spec.entry_name();
  k.cubin.resize(cubin_bytes);
  std::mt19937 rng(salt * 7919u + static_cast<unsigned>(head_dim));
  for (auto& c : k.cubin) c = static_cast<char>(rng());
  std::memcpy(k.cubin.data(), "\x7f" "ELF", 4);
  k.facts.registers = 32;
  k.nvrtc_major = 13;
  return k;
}

int g_faults = 0;  // fault injections performed by this file (reported)

}  // namespace

TEST_CASE("faults: a damaged entry is recompiled and replaced, never loaded (jit::compile + DiskCache)") {
  REQUIRE_MESSAGE(jit::nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  FaultDir tmp;
  const DiskCache src(tmp / "src");
  const auto a = quantize_spec(kernels::QuantOp::ChannelStats, kernels::Arch::Sm90a, 64);
  const auto b = quantize_spec(kernels::QuantOp::QuantizeV, kernels::Arch::Sm90a, 64);
  const auto a89 = quantize_spec(kernels::QuantOp::ChannelStats, kernels::Arch::Sm89, 64);
  Flow f0;
  const jit::CompiledKernel ka = f0.get(src, a), kb = f0.get(src, b), ka89 = f0.get(src, a89);
  REQUIRE(f0.compiled == 3);
  REQUIRE(f0.stored == 3);
  REQUIRE(ka.cubin != kb.cubin);
  REQUIRE(ka.cubin != ka89.cubin);
  const auto good = slurp(src.entry_path(ckey(a)));
  // When NVRTC is deterministic for one source and option set, the recompiled cubin is the same bytes.
  const bool deterministic = jit::compile(a).cubin == ka.cubin;
  MESSAGE("NVRTC output deterministic for a recompile: " << std::string(deterministic ? "yes" : "no"));

  const std::size_t key_len = ckey(a).size();
  const std::vector<std::pair<std::string, std::function<std::vector<char>()>>> damages = {
      {"empty file", [&] { return std::vector<char>{}; }},
      {"truncated inside the header", [&] { return std::vector<char>(good.begin(), good.begin() + 40); }},
      {"truncated inside the cubin",
       [&] { return std::vector<char>(good.begin(), good.begin() + 64 + key_len + ka.cubin.size() / 2); }},
      {"flipped bit in the cubin", [&] { auto x = good; x[64 + key_len + ka.cubin.size() / 3] ^= 0x04; return x; }},
      {"flipped bit in the metadata", [&] { auto x = good; x[x.size() - 5] ^= 0x01; return x; }},
      {"flipped bit in the key", [&] { auto x = good; x[64 + key_len / 2] ^= 0x01; return x; }},
      {"another key's entry under this name", [&] { return slurp(src.entry_path(ckey(b))); }},
      {"the sm_89 entry under the sm_90a name", [&] { return slurp(src.entry_path(ckey(a89))); }},
      {"zeroed block in the middle", [&] { auto x = good; std::fill(x.begin() + 100, x.begin() + 612, 0); return x; }},
  };
  int n = 0;
  for (const auto& item : damages) {
    // plain locals: clang before 16 cannot capture a structured binding in CAPTURE's lambda
    const auto& name = item.first;
    const auto& damaged = item.second;
    CAPTURE(name);
    // A fresh cache holding the three good entries (warnings are once per file and process).
    const DiskCache cache(tmp / ("c" + std::to_string(n++)));
    for (const auto* s : {&a, &b, &a89}) {
      REQUIRE(cache.store(*src.load(ckey(*s))));
    }
    const std::string path_a = cache.entry_path(ckey(a));
    spit(path_a, damaged());
    ++g_faults;
    Warnings warns;
    Flow f;
    const auto got = f.get(cache, a);
    CHECK(f.compiled == 1);  // the damaged entry was not used ...
    CHECK(f.from_disk == 0);
    CHECK(f.stored == 1);    // ... and was replaced
    CHECK(warns.count() == 1);
    CHECK(warns.all().find(path_a) != std::string::npos);
    check_is(got, a, deterministic ? ka.cubin : got.cubin);
    Flow again;
    const auto reloaded = again.get(cache, a);
    CHECK(again.from_disk == 1);
    check_is(reloaded, a, got.cubin);
    CHECK(warns.count() == 1);
    // The other keys' entries were never touched.
    CHECK(cache.load(ckey(b))->cubin == kb.cubin);
    CHECK(cache.load(ckey(a89))->cubin == ka89.cubin);
    CHECK(cache.verify(false).empty());
  }
  MESSAGE("recompile-and-replace faults injected: " << damages.size());
}

TEST_CASE("faults: two entries swapped between their keys are both recompiled, each gets its own") {
  REQUIRE(jit::nvrtc_version().first >= 12);
  FaultDir tmp;
  const DiskCache cache(tmp / "cache");
  const auto a = quantize_spec(kernels::QuantOp::QuantizeQ, kernels::Arch::Sm90a, 64);
  const auto b = quantize_spec(kernels::QuantOp::QuantizeK, kernels::Arch::Sm90a, 64);
  Flow f0;
  const auto ka = f0.get(cache, a), kb = f0.get(cache, b);
  REQUIRE(f0.stored == 2);
  const std::string pa = cache.entry_path(ckey(a)), pb = cache.entry_path(ckey(b));
  // Swap the two files (three renames, as a careless copy tool or a restore might).
  REQUIRE(::rename(pa.c_str(), (tmp / "swap").c_str()) == 0);
  REQUIRE(::rename(pb.c_str(), pa.c_str()) == 0);
  REQUIRE(::rename((tmp / "swap").c_str(), pb.c_str()) == 0);
  g_faults += 1;
  {
    // The swapped files are each valid entries: only the key check stands between them and the driver.
    std::size_t checked = 0;
    const auto bad = cache.verify(false, &checked);
    CHECK(checked == 2);
    CHECK(bad.size() == 2);
    for (const auto& e : bad) CHECK(e.problem.find("file name does not match its key") != std::string::npos);
  }
  Warnings warns;
  Flow f;
  const auto ga = f.get(cache, a);
  const auto gb = f.get(cache, b);
  CHECK(f.compiled == 2);
  CHECK(f.from_disk == 0);
  CHECK(warns.count() == 2);
  CHECK(warns.all().find("another key") != std::string::npos);
  CHECK(ga.key == ckey(a));
  CHECK(gb.key == ckey(b));
  CHECK(ga.entry == a.entry_name());
  CHECK(gb.entry == b.entry_name());
  CHECK(ga.cubin != kb.cubin);
  CHECK(gb.cubin != ka.cubin);
  Flow again;
  CHECK(again.get(cache, a).key == ckey(a));
  CHECK(again.get(cache, b).key == ckey(b));
  CHECK(again.from_disk == 2);
  CHECK(cache.verify(false).empty());
  CHECK(warns.count() == 2);
}

TEST_CASE("faults: a read-only cache directory, for real, as an unprivileged child process") {
  FaultDir tmp;
  REQUIRE(::chmod(tmp.path.c_str(), 0755) == 0);  // the child must be able to reach it
  const std::string dir = tmp / "ro";
  const DiskCache owner(dir);
  const auto kept = fake(64, 5000, 1), bad = fake(96, 5000, 2), fresh = fake(128, 5000, 3);
  REQUIRE(owner.store(kept));
  REQUIRE(owner.store(bad));
  auto bytes = slurp(owner.entry_path(bad.key));
  bytes[bytes.size() / 2] ^= 0x10;
  spit(owner.entry_path(bad.key), bytes);
  REQUIRE(::chmod(dir.c_str(), 0555) == 0);
  const std::vector<std::string> before = names_in(dir);

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Child: drop root (CI runs as root, and root ignores directory permissions).
    if (::geteuid() == 0) {
      ::setgroups(0, nullptr);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
    }
    const std::string probe = dir + "/probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) ::_exit(78);  // still writable: cannot test here
    static int warn_count = 0;
    base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
    // As root's folder and entries (CI): a read-only fleet cache, which another user loads only
    // when told to trust root (tests/cpu/cache/test_trust.cpp); the user's own need no option.
    const DiskCache cache(dir, /*disabled=*/false, cache::Trust{/*root=*/true, std::nullopt});
    // Existing good entries are served.
    auto k = cache.load(kept.key);
    if (!k || k->cubin != kept.cubin || warn_count != 0) ::_exit(10);
    // A damaged entry that cannot be removed: never loaded, warned once.
    if (cache.load(bad.key).has_value() || warn_count != 1) ::_exit(11);
    if (cache.load(bad.key).has_value() || warn_count != 1) ::_exit(12);
    // New kernels cannot be stored: one warning for the directory, then silence.
    if (cache.store(fresh) || warn_count != 2) ::_exit(13);
    if (cache.store(fresh) || cache.store(bad) || warn_count != 2) ::_exit(14);
    // ... so the caller keeps the compiled kernel in memory: the next load is a plain miss.
    if (cache.load(fresh.key).has_value() || warn_count != 2) ::_exit(15);
    // Maintenance reads still work; removal fails without throwing.
    std::size_t checked = 0;
    const auto found = cache.verify(/*remove_bad=*/true, &checked);
    if (checked != 2 || found.size() != 1 || found[0].removed) ::_exit(16);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 78) {
    MESSAGE("cannot make a directory read-only here (no setuid, or writes still allowed): not tested");
    return;
  }
  g_faults += 1;
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(names_in(dir) == before);  // nothing written, nothing removed, no temp file
  MESSAGE("read-only directory tested as uid 65534 (child exit " << WEXITSTATUS(status) << ")");
}

TEST_CASE("faults: a full disk (RLIMIT_FSIZE child) while replacing an entry keeps the old one or none") {
  FaultDir tmp;
  const DiskCache cache(tmp / "cache");
  const auto v1 = fake(128, 64 * 1024, 1);
  auto v2 = v1;  // same key, new bytes (e.g. a re-tuned kernel)
  v2.cubin[1000] ^= 0x7f;
  const auto damaged = fake(64, 64 * 1024, 5);
  REQUIRE(cache.store(v1));
  REQUIRE(cache.store(damaged));
  auto bytes = slurp(cache.entry_path(damaged.key));
  bytes[200] ^= 0x01;
  spit(cache.entry_path(damaged.key), bytes);

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {8192, 8192};  // writes past 8 KiB fail with EFBIG, as ENOSPC would
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(10);
    static int warn_count = 0;
    base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
    // Replacing a good entry fails atomically: the old one stays, whole and loadable.
    if (cache.store(v2)) ::_exit(11);
    auto got = cache.load(v1.key);
    if (!got || got->cubin != v1.cubin) ::_exit(12);
    // A damaged entry is removed on load; its replacement cannot be written: a plain miss after.
    if (cache.load(damaged.key).has_value()) ::_exit(13);
    if (cache.store(damaged)) ::_exit(14);
    if (cache.load(damaged.key).has_value()) ::_exit(15);
    if (warn_count != 2) ::_exit(16);  // the bad entry once, the unusable directory once
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  g_faults += 2;
  // Left behind: v1 (intact) only — no temp file, no damaged entry.
  CHECK(names_in(tmp / "cache") == std::vector<std::string>{DiskCache::entry_file_name(v1.key)});
  CHECK(cache.load(v1.key)->cubin == v1.cubin);
}

TEST_CASE("faults: the cache directory deleted between store and load, and between two stores") {
  FaultDir tmp;
  const std::string dir = tmp / "a/b/cache";
  const DiskCache cache(dir);
  const auto a = fake(64, 3000, 1), b = fake(80, 3000, 2);
  Warnings warns;

  SUBCASE("between store and load: a silent miss, the next store recreates the directory") {
    REQUIRE(cache.store(a));
    rm_rf(dir);
    ++g_faults;
    CHECK_FALSE(cache.load(a.key).has_value());
    CHECK(warns.count() == 0);
    CHECK(cache.store(a));
    REQUIRE(cache.load(a.key).has_value());
    CHECK(cache.load(a.key)->cubin == a.cubin);
  }
  SUBCASE("between two stores: the second store recreates it; the first entry is a miss") {
    REQUIRE(cache.store(a));
    rm_rf(tmp / "a");  // the parents too
    ++g_faults;
    CHECK(cache.store(b));
    CHECK_FALSE(cache.load(a.key).has_value());
    REQUIRE(cache.load(b.key).has_value());
    CHECK(cache.load(b.key)->cubin == b.cubin);
    CHECK(warns.count() == 0);
    CHECK(cache.list().size() == 1);
  }
  SUBCASE("replaced by a regular file: degrade with one warning, recover when it is gone") {
    REQUIRE(cache.store(a));
    rm_rf(dir);
    spit(dir, {'x'});
    ++g_faults;
    CHECK_FALSE(cache.load(a.key).has_value());
    CHECK_FALSE(cache.store(b));
    CHECK_FALSE(cache.store(a));
    CHECK(warns.count() == 1);
    CHECK_THROWS_AS(cache.list(), Error);  // maintenance says so plainly
    REQUIRE(::unlink(dir.c_str()) == 0);
    CHECK(cache.store(b));
    CHECK(cache.load(b.key)->cubin == b.cubin);
  }
  SUBCASE("maintenance calls on a deleted directory see an empty cache") {
    REQUIRE(cache.store(a));
    rm_rf(dir);
    ++g_faults;
    CHECK(cache.list().empty());
    CHECK(cache.verify(true).empty());
    CHECK(cache.prune(0) == 0);
    CHECK(cache.clear() == 0);
    CHECK(cache.total_bytes() == 0);
    CHECK_THROWS_AS(cache.export_bundle(dir + "/x.s2b"), Error);  // its folder is gone too
  }
}

TEST_CASE("faults: a FIFO where an entry should be is refused at once, never waited on") {
  // Regression: load() / list() / verify() / export used to open entries with a blocking open(),
  // so a FIFO named like an entry hung the process (the kernel loader included) forever.
  FaultDir tmp;
  const std::string dir = tmp / "cache";
  const DiskCache cache(dir);
  const auto a = fake(64, 3000, 1), b = fake(80, 3000, 2);
  REQUIRE(cache.store(b));
  REQUIRE(::mkfifo(cache.entry_path(a.key).c_str(), 0644) == 0);
  REQUIRE(::mkfifo((tmp / "bundle.fifo").c_str(), 0644) == 0);
  ++g_faults;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(20);  // a regression hangs: SIGALRM ends the child instead of the suite
    static int warn_count = 0;
    base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
    if (cache.load(a.key).has_value()) ::_exit(10);
    if (warn_count != 1) ::_exit(11);
    const auto listed = cache.list();
    if (listed.size() != 2) ::_exit(12);
    std::size_t checked = 0;
    const auto bad = cache.verify(false, &checked);
    if (checked != 2 || bad.size() != 1 || bad[0].problem.find("not a regular file") == std::string::npos) ::_exit(13);
    if (cache.export_bundle(tmp / "out.s2b") != 1) ::_exit(14);
    try {
      (void)DiskCache(tmp / "other").import_bundle(tmp / "bundle.fifo");
      ::_exit(15);
    } catch (const Error&) {
    }
    // The compiled kernel can still be used; storing it replaces the FIFO with a real entry.
    if (!cache.store(a)) ::_exit(16);
    auto got = cache.load(a.key);
    if (!got || got->cubin != a.cubin) ::_exit(17);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK_MESSAGE(!WIFSIGNALED(status), "the child was killed by signal " << WTERMSIG(status) << " (hung on the FIFO?)");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("faults: a directory deleted over and over under a running storer never yields a wrong kernel") {
  FaultDir tmp;
  const std::string dir = tmp / "cache";
  const DiskCache cache(dir);
  const auto a = fake(64, 20000, 1), b = fake(80, 20000, 2);
  Warnings warns;
  std::atomic<bool> stop{false};
  std::atomic<int> deletions{0};
  std::thread deleter([&] {
    while (!stop.load()) {
      for (const auto& n : names_in(dir)) ::unlink((dir + "/" + n).c_str());
      if (::rmdir(dir.c_str()) == 0) ++deletions;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  int stores_ok = 0, stores_failed = 0, hits = 0, misses = 0, wrong = 0;
  for (int i = 0; i < 300; ++i) {
    const auto& k = i % 2 ? a : b;
    (cache.store(k) ? stores_ok : stores_failed)++;
    for (const auto* want : {&a, &b}) {
      const auto got = cache.load(want->key);
      if (!got) {
        ++misses;
      } else if (got->key != want->key || got->cubin != want->cubin) {
        ++wrong;
      } else {
        ++hits;
      }
    }
  }
  stop = true;
  deleter.join();
  g_faults += deletions.load();
  CHECK(wrong == 0);
  // The race leaves no temp file behind in the end (the directory may or may not exist).
  for (const auto& n : names_in(dir)) CHECK(n.find(".tmp-") != 0);
  MESSAGE("directory deleted " << deletions.load() << " times during 300 stores (" << stores_ok << " ok, "
                               << stores_failed << " failed) and 600 loads (" << hits << " hits, " << misses
                               << " misses, " << wrong << " wrong); " << warns.count() << " warnings");
  MESSAGE("cache fault injections in tests/cpu/cache/test_faults.cpp so far: " << g_faults);
}
