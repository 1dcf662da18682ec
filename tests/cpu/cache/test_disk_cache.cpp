// Specification: the on-disk cache returns exactly what was stored for a key and nothing else.
// Any damaged, foreign or mismatched entry is a miss with one warning, the file is removed, and
// the next store+load works. An unusable directory degrades to in-memory compilation with one
// warning; concurrent writers leave one valid entry per key and no temp files.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/log.hpp"
#include "test_support.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("sage2-cache-test") {}
};

using WarnCapture = test::WarnCapture;

jit::CompiledKernel make_kernel(kernels::Arch arch = kernels::Arch::Sm90a, int head_dim = 128, std::size_t cubin_bytes = 4096,
                                unsigned seed = 1) {
  kernels::KernelSpec spec;
  spec.family = kernels::KernelFamily::AttentionMma;
  spec.arch = arch;
  spec.head_dim = head_dim;
  jit::CompiledKernel k;
  k.key = spec.key();
  k.arch = arch;
  k.entry = spec.entry_name();
  k.cubin.resize(cubin_bytes);
  std::mt19937 rng(seed * 1000003u + static_cast<unsigned>(head_dim));
  for (auto& c : k.cubin) c = static_cast<char>(rng());
  std::memcpy(k.cubin.data(), "\x7f" "ELF", 4);
  k.facts.registers = 128 + head_dim % 64;
  k.facts.spill_store_bytes = 0;
  k.facts.spill_load_bytes = 12;
  k.facts.stack_frame_bytes = 24;
  k.facts.static_shared_bytes = 49152;
  k.facts.constant_bytes = 400;
  k.compile_seconds = 0.25 + head_dim * 0.001;
  k.nvrtc_major = 13;
  k.nvrtc_minor = 0;
  k.log = "ptxas info: ok";
  return k;
}

void check_same(const jit::CompiledKernel& a, const jit::CompiledKernel& b) {
  CHECK(a.key == b.key);
  CHECK(a.arch == b.arch);
  CHECK(a.entry == b.entry);
  CHECK(a.cubin == b.cubin);
  CHECK(a.facts.registers == b.facts.registers);
  CHECK(a.facts.spill_store_bytes == b.facts.spill_store_bytes);
  CHECK(a.facts.spill_load_bytes == b.facts.spill_load_bytes);
  CHECK(a.facts.stack_frame_bytes == b.facts.stack_frame_bytes);
  CHECK(a.facts.static_shared_bytes == b.facts.static_shared_bytes);
  CHECK(a.facts.constant_bytes == b.facts.constant_bytes);
  CHECK(a.compile_seconds == b.compile_seconds);
  CHECK(a.nvrtc_major == b.nvrtc_major);
  CHECK(a.nvrtc_minor == b.nvrtc_minor);
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void spit(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void set_mtime(const std::string& p, double seconds_ago) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  struct timespec ts[2];
  ts[0] = now;
  ts[1].tv_sec = now.tv_sec - static_cast<time_t>(seconds_ago);
  ts[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, 0) == 0);
}

std::uint64_t u64_at(const std::vector<char>& b, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

TEST_CASE("disk cache: store then load returns the same kernel") {
  TempDir tmp;
  WarnCapture warns;
  DiskCache cache(tmp.path);
  const auto a = make_kernel(kernels::Arch::Sm90a, 128);
  const auto b = make_kernel(kernels::Arch::Sm89, 64, 100000);
  CHECK_FALSE(cache.load(a.key).has_value());  // a plain miss is silent
  REQUIRE(cache.store(a));
  REQUIRE(cache.store(b));
  auto la = cache.load(a.key);
  auto lb = cache.load(b.key);
  REQUIRE(la.has_value());
  REQUIRE(lb.has_value());
  check_same(*la, a);
  check_same(*lb, b);
  CHECK(exists(cache.entry_path(a.key)));
  CHECK(cache.entry_path(a.key) == tmp / DiskCache::entry_file_name(a.key));
  // Storing again replaces the entry atomically and leaves no temp files.
  auto a2 = a;
  a2.compile_seconds = 9.5;
  REQUIRE(cache.store(a2));
  CHECK(cache.load(a.key)->compile_seconds == 9.5);
  CHECK(names_in(tmp.path).size() == 2);
  CHECK(warns.count() == 0);
  const auto listed = cache.list();
  REQUIRE(listed.size() == 2);
  for (const auto& e : listed) {
    CHECK(e.valid);
    CHECK(e.problem.empty());
    CHECK((e.arch == "sm_89" || e.arch == "sm_90a"));
  }
}

TEST_CASE("disk cache: every kind of bad entry is a warned miss, removed, then replaced") {
  const auto k = make_kernel(kernels::Arch::Sm90a, 128, 2000);
  const std::size_t key_end = 64 + k.key.size();
  const std::size_t cubin_mid = key_end + k.cubin.size() / 2;
  const std::size_t meta_start = key_end + k.cubin.size();
  const std::size_t total = DiskCache::serialize(k).size();

  struct Damage {
    std::string name;
    std::function<void(std::vector<char>&)> apply;
  };
  std::vector<Damage> damages;
  for (std::size_t at : {std::size_t(0), std::size_t(1), std::size_t(8), std::size_t(63), std::size_t(64),
                         64 + k.key.size() / 2, cubin_mid, meta_start + 3, total - 1})
    damages.push_back({"truncated at " + std::to_string(at), [at](std::vector<char>& b) { b.resize(at); }});
  for (auto [what, at] : {std::pair<const char*, std::size_t>{"magic", 2}, {"version", 8}, {"arch", 16},
                          {"key length", 28}, {"cubin length", 41}, {"checksum", 60}, {"key", 64 + 5},
                          {"cubin", cubin_mid}, {"metadata", meta_start + 10}, {"last byte", total - 1}})
    damages.push_back({std::string("flipped byte in ") + what, [at = at](std::vector<char>& b) { b[at] ^= 0x20; }});
  damages.push_back({"garbage of the same size", [](std::vector<char>& b) {
                       std::mt19937 rng(7);
                       for (auto& c : b) c = static_cast<char>(rng());
                     }});
  damages.push_back({"short text file", [](std::vector<char>& b) {
                       const std::string t = "hello, not a cubin\n";
                       b.assign(t.begin(), t.end());
                     }});
  damages.push_back({"appended bytes", [](std::vector<char>& b) { b.push_back('x'); }});

  for (const auto& d : damages) {
    CAPTURE(d.name);
    TempDir tmp;
    DiskCache cache(tmp.path);
    REQUIRE(cache.store(k));
    const std::string path = cache.entry_path(k.key);
    auto bytes = slurp(path);
    REQUIRE(bytes.size() == total);
    d.apply(bytes);
    spit(path, bytes);

    WarnCapture warns;
    CHECK_FALSE(cache.load(k.key).has_value());
    CHECK(warns.count() == 1);
    CHECK(warns.all().find(path) != std::string::npos);
    CHECK_FALSE(exists(path));
    CHECK_FALSE(cache.load(k.key).has_value());  // now a plain miss: no second warning
    CHECK(warns.count() == 1);
    REQUIRE(cache.store(k));
    auto again = cache.load(k.key);
    REQUIRE(again.has_value());
    check_same(*again, k);
    CHECK(warns.count() == 1);
  }
}

TEST_CASE("disk cache: load says why an entry that was there could not be used; a plain miss says nothing") {
  // The runtime's compile notice quotes it ("entry rejected: ...", runtime/kernel_loader.cpp).
  TempDir tmp;
  DiskCache cache(tmp.path);
  WarnCapture warns;
  const auto k = make_kernel(kernels::Arch::Sm90a, 96);
  std::string why = "stale";
  CHECK_FALSE(cache.load(k.key, &why).has_value());
  CHECK(why == "stale");  // untouched by a plain miss
  why.clear();
  REQUIRE(cache.store(k));
  const std::string path = cache.entry_path(k.key);
  auto bytes = slurp(path);
  bytes[64 + 3] ^= 0x20;  // inside the key: the checksum no longer matches
  spit(path, bytes);
  CHECK_FALSE(cache.load(k.key, &why).has_value());
  CHECK(why.find("bad entry " + path + ": ") == 0);
  CHECK(why.size() > ("bad entry " + path + ": ").size());
  std::string after;
  CHECK_FALSE(cache.load(k.key, &after).has_value());  // removed: a plain miss again
  CHECK(after.empty());
  REQUIRE(::mkdir(path.c_str(), 0755) == 0);  // a directory in its place
  CHECK_FALSE(cache.load(k.key, &after).has_value());
  CHECK_FALSE(after.empty());
  std::string disabled;
  CHECK_FALSE(DiskCache(tmp.path, true).load(k.key, &disabled).has_value());
  CHECK(disabled.empty());
}

TEST_CASE("disk cache: an entry under another key's file name is never loaded for that key") {
  TempDir tmp;
  DiskCache cache(tmp.path);
  const auto mine = make_kernel(kernels::Arch::Sm90a, 128);
  const auto other = make_kernel(kernels::Arch::Sm90a, 64);
  REQUIRE(cache.store(other));
  REQUIRE(cache.store(mine));
  // Rename "other" over "mine" (as if the file name collided or someone moved files around).
  REQUIRE(::rename(cache.entry_path(other.key).c_str(), cache.entry_path(mine.key).c_str()) == 0);
  WarnCapture warns;
  CHECK_FALSE(cache.load(mine.key).has_value());
  CHECK(warns.count() == 1);
  CHECK(warns.all().find("another key") != std::string::npos);
  CHECK_FALSE(exists(cache.entry_path(mine.key)));
  REQUIRE(cache.store(mine));
  REQUIRE(cache.load(mine.key).has_value());
  CHECK(cache.load(mine.key)->key == mine.key);
}

TEST_CASE("disk cache: another arch's entry is never loaded (sm_89 cubin for an sm_90a key)") {
  TempDir tmp;
  DiskCache cache(tmp.path);
  const auto k89 = make_kernel(kernels::Arch::Sm89, 128);
  const auto k90 = make_kernel(kernels::Arch::Sm90a, 128);
  REQUIRE(k89.key != k90.key);
  REQUIRE(cache.store(k89));
  // Put the sm_89 entry where the sm_90a one belongs.
  spit(cache.entry_path(k90.key), slurp(cache.entry_path(k89.key)));
  WarnCapture warns;
  CHECK_FALSE(cache.load(k90.key).has_value());
  CHECK(warns.count() == 1);
  CHECK_FALSE(exists(cache.entry_path(k90.key)));
  auto still = cache.load(k89.key);  // the sm_89 entry itself is untouched and valid
  REQUIRE(still.has_value());
  CHECK(still->arch == kernels::Arch::Sm89);
  REQUIRE(cache.store(k90));
  auto l90 = cache.load(k90.key);
  REQUIRE(l90.has_value());
  CHECK(l90->arch == kernels::Arch::Sm90a);
  CHECK(l90->cubin == k90.cubin);
  // verify flags a renamed entry as well.
  spit(tmp / "0000000000000000.s2c", slurp(cache.entry_path(k89.key)));
  std::size_t checked = 0;
  const auto bad = cache.verify(false, &checked);
  CHECK(checked == 3);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].problem.find("file name") != std::string::npos);
  CHECK(bad[0].key == k89.key);
}

TEST_CASE("disk cache: a directory where the entry should be is a warned miss, never a crash") {
  TempDir tmp;
  DiskCache cache(tmp.path);
  const auto k = make_kernel();
  REQUIRE(::mkdir(cache.entry_path(k.key).c_str(), 0755) == 0);
  WarnCapture warns;
  CHECK_FALSE(cache.load(k.key).has_value());
  CHECK(warns.count() == 1);
  CHECK_FALSE(cache.store(k));  // rename over a directory fails: degrade, one warning
  CHECK(warns.count() == 2);
  CHECK(names_in(tmp.path).size() == 1);  // no temp file left
}

TEST_CASE("disk cache: a missing directory is created on store; load does not create it") {
  TempDir tmp;
  const std::string dir = tmp / "a/b/c";
  DiskCache cache(dir);
  WarnCapture warns;
  const auto k = make_kernel();
  CHECK_FALSE(cache.load(k.key).has_value());
  CHECK_FALSE(exists(dir));
  CHECK(cache.list().empty());
  CHECK(cache.verify(true).empty());
  CHECK(cache.prune(0) == 0);
  REQUIRE(cache.store(k));
  CHECK(exists(dir));
  REQUIRE(cache.load(k.key).has_value());
  CHECK(warns.count() == 0);
}

TEST_CASE("disk cache: an unwritable directory degrades to memory-only with one warning") {
  TempDir tmp;
  const auto k = make_kernel();
  SUBCASE("parent of the cache directory is a regular file") {
    spit(tmp / "file", {'x'});
    DiskCache cache(tmp / "file/cache");
    WarnCapture warns;
    CHECK_FALSE(cache.store(k));
    CHECK(warns.count() == 1);
    CHECK(warns.all().find(tmp / "file/cache") != std::string::npos);
    CHECK_FALSE(cache.store(k));
    CHECK_FALSE(cache.store(make_kernel(kernels::Arch::Sm89)));
    CHECK(warns.count() == 1);  // once per directory
    CHECK_FALSE(cache.load(k.key).has_value());
    CHECK(warns.count() == 1);
  }
  SUBCASE("chmod 0555 directory") {
    const std::string dir = tmp / "ro";
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    DiskCache cache(dir);
    const auto before = make_kernel(kernels::Arch::Sm89);
    REQUIRE(cache.store(before));
    REQUIRE(::chmod(dir.c_str(), 0555) == 0);
    const std::string probe = dir + "/probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      MESSAGE("running with permission override (root): chmod 0555 does not stop writes here, so the "
              "unwritable path is covered by the 'parent is a regular file' subcase only");
      ::chmod(dir.c_str(), 0755);
      return;
    }
    MESSAGE("chmod 0555 directory is really read-only here: testing it directly");
    WarnCapture warns;
    CHECK_FALSE(cache.store(k));
    CHECK(warns.count() == 1);
    CHECK_FALSE(cache.store(k));
    CHECK(warns.count() == 1);
    auto loaded = cache.load(before.key);  // existing entries are still served
    REQUIRE(loaded.has_value());
    CHECK(loaded->cubin == before.cubin);
    CHECK(names_in(dir).size() == 1);
    // A bad entry that cannot be removed is still never loaded, and says so once.
    auto bytes = slurp(cache.entry_path(before.key));
    bytes[bytes.size() / 2] ^= 1;
    spit(cache.entry_path(before.key), bytes);
    CHECK_FALSE(cache.load(before.key).has_value());
    CHECK(warns.count() == 2);
    CHECK(warns.all().find("could not remove") != std::string::npos);
    CHECK_FALSE(cache.load(before.key).has_value());
    CHECK(warns.count() == 2);
    ::chmod(dir.c_str(), 0755);
  }
}

TEST_CASE("disk cache: a write that runs out of space leaves nothing behind (RLIMIT_FSIZE child)") {
  TempDir tmp;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Child: writes beyond 8 KiB fail with EFBIG, like a full disk fails with ENOSPC.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {8192, 8192};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(10);
    static int warn_count = 0;
    base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
    DiskCache cache(tmp.path);
    const auto small = make_kernel(kernels::Arch::Sm90a, 64, 1000);
    const auto big = make_kernel(kernels::Arch::Sm90a, 128, 64 * 1024);
    if (!cache.store(small)) ::_exit(11);
    if (cache.store(big)) ::_exit(12);
    if (cache.store(big)) ::_exit(12);
    if (warn_count != 1) ::_exit(13);
    if (cache.load(big.key).has_value()) ::_exit(14);
    if (!cache.load(small.key).has_value()) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(names_in(tmp.path).size() == 1);  // the small entry only; no partial temp file
}

TEST_CASE("disk cache: a disabled cache never touches the disk") {
  TempDir tmp;
  const std::string dir = tmp / "never";
  DiskCache cache(dir, /*disabled=*/true);
  WarnCapture warns;
  const auto k = make_kernel();
  CHECK(cache.disabled());
  CHECK_FALSE(cache.store(k));
  CHECK_FALSE(cache.load(k.key).has_value());
  CHECK(cache.list().empty());
  CHECK_FALSE(exists(dir));
  CHECK(warns.count() == 0);
  // A valid entry written by someone else is still not read while disabled.
  REQUIRE(DiskCache(dir).store(k));
  CHECK_FALSE(cache.load(k.key).has_value());
}

TEST_CASE("disk cache: from_env honours SAGE2_CACHE_DIR and SAGE2_DISABLE_DISK_CACHE") {
  auto save = [](const char* n) -> std::optional<std::string> {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v) ::setenv(n, v->c_str(), 1);
    else ::unsetenv(n);
  };
  const auto dir0 = save("SAGE2_CACHE_DIR"), dis0 = save("SAGE2_DISABLE_DISK_CACHE"), xdg0 = save("XDG_CACHE_HOME");
  ::setenv("SAGE2_CACHE_DIR", "/some/where", 1);
  ::unsetenv("SAGE2_DISABLE_DISK_CACHE");
  CHECK(DiskCache::from_env().dir() == "/some/where");
  CHECK_FALSE(DiskCache::from_env().disabled());
  ::setenv("SAGE2_DISABLE_DISK_CACHE", "1", 1);
  CHECK(DiskCache::from_env().disabled());
  ::unsetenv("SAGE2_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(DiskCache::from_env().dir() == "/xdg/sage2");
  restore("SAGE2_CACHE_DIR", dir0);
  restore("SAGE2_DISABLE_DISK_CACHE", dis0);
  restore("XDG_CACHE_HOME", xdg0);
}

TEST_CASE("disk cache: concurrent writer processes leave one valid entry per key and no temp files") {
  TempDir tmp;
  constexpr int kProcs = 8, kRounds = 12;
  const auto shared = make_kernel(kernels::Arch::Sm90a, 128, 30000);
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      static int warn_count = 0;
      base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
      DiskCache cache(tmp.path);
      const auto own_a = make_kernel(kernels::Arch::Sm89, 16 + p, 5000, 100 + p);
      const auto own_b = make_kernel(kernels::Arch::Sm90a, 200 + p, 9000, 200 + p);
      for (int r = 0; r < kRounds; ++r) {
        if (!cache.store(shared)) ::_exit(20);
        if (!cache.store(r % 2 ? own_a : own_b)) ::_exit(21);
        auto got = cache.load(shared.key);  // whatever it finds must be complete and right
        if (!got || got->cubin != shared.cubin) ::_exit(22);
        auto mine = cache.load((r % 2 ? own_a : own_b).key);
        if (!mine || mine->cubin != (r % 2 ? own_a : own_b).cubin) ::_exit(23);
      }
      ::_exit(warn_count == 0 ? 0 : 24);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  DiskCache cache(tmp.path);
  std::size_t checked = 0;
  CHECK(cache.verify(false, &checked).empty());
  CHECK(checked == 1 + 2 * kProcs);
  for (const auto& n : names_in(tmp.path)) {
    CAPTURE(n);
    CHECK(n.size() == 20);  // entry names only: no ".tmp-..." leftovers
    CHECK(n.substr(16) == ".s2c");
  }
  auto got = cache.load(shared.key);
  REQUIRE(got.has_value());
  CHECK(got->cubin == shared.cubin);
}

TEST_CASE("disk cache: threads of one process storing and loading the same keys") {
  TempDir tmp;
  WarnCapture warns;
  const DiskCache cache(tmp.path);
  const auto a = make_kernel(kernels::Arch::Sm90a, 128, 20000);
  const auto b = make_kernel(kernels::Arch::Sm89, 64, 20000);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) {
        const auto& k = (t + r) % 2 ? a : b;
        if (!cache.store(k)) ++failures;
        auto got = cache.load(k.key);
        if (!got || got->cubin != k.cubin) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(warns.count() == 0);
  CHECK(names_in(tmp.path).size() == 2);
}

TEST_CASE("disk cache: prune keeps the most recently used entries under the size") {
  TempDir tmp;
  DiskCache cache(tmp.path);
  std::vector<jit::CompiledKernel> ks;
  for (int i = 0; i < 6; ++i) {
    ks.push_back(make_kernel(kernels::Arch::Sm90a, 32 + i, 10000 + 1000 * i));
    REQUIRE(cache.store(ks.back()));
    set_mtime(cache.entry_path(ks.back().key), 1000.0 - 100.0 * i);  // i = 5 is the newest
  }
  auto size_of = [&](int i) {
    struct stat st {};
    REQUIRE(::stat(cache.entry_path(ks[i].key).c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_size);
  };
  std::uint64_t all = 0;
  for (int i = 0; i < 6; ++i) all += size_of(i);
  CHECK(cache.total_bytes() == all);
  CHECK(cache.prune(all) == 0);  // already small enough
  const std::uint64_t newest3 = size_of(3) + size_of(4) + size_of(5);
  const std::uint64_t oldest3 = all - newest3;
  CHECK(cache.prune(newest3) == oldest3);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(exists(cache.entry_path(ks[i].key)));
  for (int i = 3; i < 6; ++i) CHECK(cache.load(ks[i].key).has_value());
  // A load counts as use: make 3 the oldest by mtime, load it, then 4 is the least recent.
  for (int i = 3; i < 6; ++i) set_mtime(cache.entry_path(ks[i].key), 1000.0 - 100.0 * i);
  REQUIRE(cache.load(ks[3].key).has_value());
  CHECK(cache.prune(size_of(3) + size_of(5)) == size_of(4));
  CHECK(exists(cache.entry_path(ks[3].key)));
  CHECK_FALSE(exists(cache.entry_path(ks[4].key)));
  CHECK(cache.prune(0) == size_of(3) + size_of(5));
  CHECK(names_in(tmp.path).empty());
}

TEST_CASE("disk cache: prune, verify and clear sweep stale temp files only") {
  TempDir tmp;
  DiskCache cache(tmp.path);
  REQUIRE(cache.store(make_kernel()));
  spit(tmp / ".tmp-1-2-deadbeef.s2c-partial", {'p'});
  spit(tmp / ".tmp-1-3-deadbeef.s2c-partial", {'q'});
  spit(tmp / "notes.txt", {'n'});  // not ours: never touched
  set_mtime(tmp / ".tmp-1-2-deadbeef.s2c-partial", 2 * cache::kStaleTempSeconds);
  CHECK(cache.prune(1u << 30) == 0);
  CHECK_FALSE(exists(tmp / ".tmp-1-2-deadbeef.s2c-partial"));
  CHECK(exists(tmp / ".tmp-1-3-deadbeef.s2c-partial"));  // may belong to a live writer
  CHECK(cache.clear() == 1);
  CHECK(names_in(tmp.path) == std::vector<std::string>{".tmp-1-3-deadbeef.s2c-partial", "notes.txt"});
}

TEST_CASE("disk cache: export/import a bundle; damaged bundles import the good prefix") {
  TempDir tmp;
  DiskCache src(tmp / "src");
  std::vector<jit::CompiledKernel> ks;
  for (int i = 0; i < 5; ++i) {
    ks.push_back(make_kernel(i % 2 ? kernels::Arch::Sm89 : kernels::Arch::Sm90a, 64 + i, 3000 + 500 * i));
    REQUIRE(src.store(ks.back()));
  }
  const std::string bundle = tmp / "warm.s2b";
  WarnCapture warns;
  REQUIRE(src.export_bundle(bundle) == 5);
  CHECK(warns.count() == 0);
  const auto good = slurp(bundle);
  REQUIRE(good.size() > 32);
  CHECK(std::memcmp(good.data(), "S2BUNDLE", 8) == 0);
  CHECK(u64_at(good, 16) == 5);
  // Entry offsets, from the documented framing.
  std::vector<std::size_t> starts;  // offset of each length prefix
  for (std::size_t off = 32; off < good.size(); off += 8 + u64_at(good, off)) starts.push_back(off);
  REQUIRE(starts.size() == 5);

  SUBCASE("into an empty directory: identical entries") {
    DiskCache dst(tmp / "dst");
    const auto r = dst.import_bundle(bundle);
    CHECK(r.imported == 5);
    CHECK(r.rejected == 0);
    CHECK(r.failed == 0);
    CHECK(names_in(tmp / "src") == names_in(tmp / "dst"));
    for (const auto& n : names_in(tmp / "src")) CHECK(slurp(tmp / ("src/" + n)) == slurp(tmp / ("dst/" + n)));
    for (const auto& k : ks) {
      auto l = dst.load(k.key);
      REQUIRE(l.has_value());
      check_same(*l, k);
    }
  }
  SUBCASE("truncated in the middle of the third entry") {
    auto b = good;
    b.resize(starts[2] + 8 + 100);
    spit(bundle, b);
    DiskCache dst(tmp / "dst");
    const auto r = dst.import_bundle(bundle);
    CHECK(r.imported == 2);
    CHECK(r.rejected == 3);
    CHECK(dst.list().size() == 2);
    CHECK(dst.verify(false).empty());
  }
  SUBCASE("a flipped byte inside the second entry rejects that entry only") {
    auto b = good;
    b[starts[1] + 8 + 64 + 200] ^= 1;
    spit(bundle, b);
    DiskCache dst(tmp / "dst");
    const auto r = dst.import_bundle(bundle);
    CHECK(r.imported == 4);
    CHECK(r.rejected == 1);
  }
  SUBCASE("a corrupt length prefix rejects everything from there on") {
    auto b = good;
    b[starts[3] + 6] = 0x7f;
    spit(bundle, b);
    DiskCache dst(tmp / "dst");
    const auto r = dst.import_bundle(bundle);
    CHECK(r.imported == 3);
    CHECK(r.rejected == 2);
  }
  SUBCASE("a garbage or foreign file is refused as a whole") {
    for (std::vector<char> b : {std::vector<char>{}, std::vector<char>(1000, 'z'),
                                std::vector<char>(good.begin(), good.begin() + 20)}) {
      spit(bundle, b);
      DiskCache dst(tmp / "dst");
      try {
        (void)dst.import_bundle(bundle);
        FAIL("a non-bundle was imported");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::CacheError);
        CHECK(std::string(e.what()).find(bundle) != std::string::npos);
      }
    }
    auto b = good;
    b[17] ^= 1;  // the entry count is covered by the header checksum
    spit(bundle, b);
    CHECK_THROWS_AS(DiskCache(tmp / "dst").import_bundle(bundle), Error);
    CHECK_THROWS_AS(DiskCache(tmp / "dst").import_bundle(tmp / "does-not-exist"), Error);
  }
  SUBCASE("export skips bad entries") {
    auto e = slurp(src.entry_path(ks[0].key));
    e[e.size() / 2] ^= 1;
    spit(src.entry_path(ks[0].key), e);
    CHECK(src.export_bundle(bundle) == 4);
    DiskCache dst(tmp / "dst");
    CHECK(dst.import_bundle(bundle).imported == 4);
    CHECK_FALSE(dst.load(ks[0].key).has_value());
  }
  SUBCASE("export to an unwritable place throws and leaves nothing") {
    spit(tmp / "file", {'x'});
    CHECK_THROWS_AS(src.export_bundle(tmp / "file/b.s2b"), Error);
    CHECK_THROWS_AS(src.export_bundle(tmp / "no/such/dir/b.s2b"), Error);
  }
}
