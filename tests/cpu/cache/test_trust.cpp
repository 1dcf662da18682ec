// Specification (issue 43, item 6: a cache nobody else can write into): a cubin from the disk
// cache runs inside the process, so the cache uses only what no one but the user could have put
// there. The folder is created 0700. Nothing is loaded from, or stored into, a folder owned by
// another user or writable by its group or others; no entry is loaded whose file is another
// user's, writable by group or others, or a symlink. Root's folder and entries (a read-only fleet
// cache) pass only with Trust::root (SAGE2_CACHE_TRUST_ROOT=1, ContextOptions::cache_trust_root).
// Each refusal is a miss with one warning per folder or entry naming the path, the owner's uid and
// the mode; the caller compiles instead.
//
// CI runs as root in a container: another owner is made with chown to uid 12345, root-owned files
// are simply the ones the test creates, and "another user looking at root's cache" is a DiskCache
// whose Trust::user names uid 12345. Without root, the cases that need chown say "skipped".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "base/config.hpp"
#include "base/log.hpp"
#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "scoped_env.hpp"
#include "test_support.hpp"

using namespace sage2;
using sage2::cache::DiskCache;
using sage2::cache::Trust;

namespace {

constexpr std::uint32_t kOtherUid = 12345;

struct TrustDir : test::TempDir {
  TrustDir() : test::TempDir("sage2-trust") {}
};

using Warnings = test::WarnCapture;

// Restores the process's umask when the scope ends.
struct ScopedUmask {
  mode_t old;
  explicit ScopedUmask(mode_t m) : old(::umask(m)) {}
  ~ScopedUmask() { ::umask(old); }
};

jit::CompiledKernel kernel(int head_dim = 128) {
  kernels::KernelSpec spec;
  spec.family = kernels::KernelFamily::AttentionMma;
  spec.arch = kernels::Arch::Sm90a;
  spec.head_dim = head_dim;
  jit::CompiledKernel k;
  k.key = spec.key();
  k.arch = spec.arch;
  k.entry = spec.entry_name();
  k.cubin.resize(3000);
  std::mt19937 rng(static_cast<unsigned>(head_dim));
  for (auto& c : k.cubin) c = static_cast<char>(rng());
  k.nvrtc_major = 13;
  return k;
}

mode_t mode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// chown, or the reason it cannot be done here (not root).
std::string try_chown(const std::string& p, std::uint32_t uid) {
  if (::lchown(p.c_str(), uid, uid) == 0) return {};
  return std::string("chown to uid ") + std::to_string(uid) + " failed: " + std::strerror(errno) +
         " (needs root; CI runs as root)";
}

}  // namespace

TEST_CASE("cache trust: the cache folder and every folder store() creates above it are 0700, whatever the umask") {
  TrustDir tmp;
  const ScopedUmask open_umask(0);  // without the fix the folders came out 0755 here
  const std::string dir = tmp / "a/b/cache";
  const DiskCache cache(dir);
  REQUIRE(cache.store(kernel()));
  CHECK(mode_of(tmp / "a") == 0700);
  CHECK(mode_of(tmp / "a/b") == 0700);
  CHECK(mode_of(dir) == 0700);
  // The entries themselves: readable, writable by the owner only.
  CHECK((mode_of(cache.entry_path(kernel().key)) & 022) == 0);
  CHECK(DiskCache(dir).load(kernel().key).has_value());
}

TEST_CASE("cache trust: a group- or world-writable folder is neither loaded from nor stored into") {
  TrustDir tmp;
  const auto k = kernel(128), fresh = kernel(64);
  for (const mode_t mode : {mode_t(0770), mode_t(0757)}) {
    CAPTURE(mode);
    const std::string shown = mode == 0770 ? "mode 0770" : "mode 0757";
    const std::string dir = tmp / ("cache-" + shown.substr(5));  // one folder each: warned once per folder
    REQUIRE(DiskCache(dir).store(k));
    REQUIRE(::chmod(dir.c_str(), mode) == 0);
    Warnings warns;
    const DiskCache cache(dir);
    CHECK_FALSE(cache.load(k.key).has_value());  // a miss: the caller compiles
    REQUIRE(warns.count() == 1);
    const std::string w = warns.all();
    CHECK(contains(w, dir));
    CHECK(contains(w, "owner uid " + std::to_string(::geteuid())));
    CHECK(contains(w, shown));
    CHECK(contains(w, mode == 0770 ? "writable by its group" : "writable by others"));
    CHECK(contains(w, "compiled and kept in memory"));
    // Not stored either: the kernel stays in memory; no file, no temp file, and no second warning
    // (one per folder and process).
    CHECK_FALSE(cache.store(fresh));
    CHECK_FALSE(exists(cache.entry_path(fresh.key)));
    CHECK_FALSE(cache.load(k.key).has_value());
    CHECK(warns.count() == 1);
    CHECK(contains(cache.folder_problem(), shown));
    // Not exported either: a planted entry must not reach a fleet.
    CHECK_THROWS_WITH_AS(cache.export_bundle(tmp / "b.s2b"), doctest::Contains("not trusted"), Error);
    CHECK_FALSE(exists(tmp / "b.s2b"));
    // The owner tightens the folder: a new DiskCache (a new process) uses it again.
    REQUIRE(::chmod(dir.c_str(), 0700) == 0);
    const DiskCache again(dir);
    CHECK(again.load(k.key).has_value());
    CHECK(again.store(fresh));
    CHECK(warns.count() == 1);
  }
}

TEST_CASE("cache trust: a bundle is not imported into an untrusted folder") {
  TrustDir tmp;
  const auto k = kernel();
  const DiskCache src(tmp / "src");
  REQUIRE(src.store(k));
  REQUIRE(src.export_bundle(tmp / "one.s2b") == 1);
  const std::string dir = tmp / "shared";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(::chmod(dir.c_str(), 0775) == 0);
  Warnings warns;
  CHECK_THROWS_WITH_AS(DiskCache(dir).import_bundle(tmp / "one.s2b"), doctest::Contains("mode 0775"), Error);
  CHECK_FALSE(exists(DiskCache(dir).entry_path(k.key)));
}

TEST_CASE("cache trust: a group- or world-writable entry is refused, left in place, and replaced by the next store") {
  TrustDir tmp;
  const DiskCache cache(tmp.path);
  for (const mode_t mode : {mode_t(0666), mode_t(0620)}) {
    CAPTURE(mode);
    const auto k = kernel(mode == 0666 ? 128 : 64);  // one entry each: warned once per entry
    REQUIRE(cache.store(k));
    const std::string path = cache.entry_path(k.key);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    Warnings warns;
    CHECK_FALSE(cache.load(k.key).has_value());
    REQUIRE(warns.count() == 1);
    const std::string w = warns.all();
    CHECK(contains(w, path));
    CHECK(contains(w, "owner uid " + std::to_string(::geteuid())));
    CHECK(contains(w, mode == 0666 ? "mode 0666" : "mode 0620"));
    CHECK(contains(w, mode == 0666 ? "writable by others" : "writable by its group"));
    CHECK_FALSE(cache.load(k.key).has_value());
    CHECK(warns.count() == 1);  // once per entry
    CHECK(exists(path));        // not the library's to delete: a miss, not damage
    // list/verify say what load() would do; verify --remove deletes it.
    const auto bad = cache.verify(false);
    REQUIRE(bad.size() == 1);
    CHECK(bad[0].file == path);
    CHECK(contains(bad[0].problem, "not trusted"));
    // The compiled kernel replaces the file (rename: a fresh inode of the user's, 0644).
    REQUIRE(cache.store(k));
    CHECK((mode_of(path) & 022) == 0);
    CHECK(cache.load(k.key).has_value());
    CHECK(cache.verify(false).empty());
  }
}

TEST_CASE("cache trust: an entry that is a symlink is not followed") {
  TrustDir tmp;
  const auto k = kernel();
  const DiskCache elsewhere(tmp / "elsewhere"), cache(tmp / "cache");
  REQUIRE(elsewhere.store(k));
  REQUIRE(cache.store(kernel(64)));  // creates the folder
  REQUIRE(::symlink(elsewhere.entry_path(k.key).c_str(), cache.entry_path(k.key).c_str()) == 0);
  Warnings warns;
  CHECK_FALSE(cache.load(k.key).has_value());
  REQUIRE(warns.count() == 1);
  CHECK(contains(warns.all(), cache.entry_path(k.key)));
  CHECK(contains(warns.all(), "symbolic link"));
  REQUIRE(cache.store(k));  // replaces the link itself, not its target
  CHECK(cache.load(k.key).has_value());
  CHECK(exists(elsewhere.entry_path(k.key)));
}

TEST_CASE("cache trust: another user's entry or folder is not loaded (chown; skipped without root)") {
  TrustDir tmp;
  const std::string dir = tmp / "cache";
  const DiskCache cache(dir);
  const auto k = kernel();
  REQUIRE(cache.store(k));
  const std::string path = cache.entry_path(k.key);
  if (const std::string why = try_chown(path, kOtherUid); !why.empty()) {
    MESSAGE("skipped: another user's entry cannot be made here: " << why);
    return;
  }
  SUBCASE("the entry") {
    Warnings warns;
    CHECK_FALSE(cache.load(k.key).has_value());
    REQUIRE(warns.count() == 1);
    CHECK(contains(warns.all(), path));
    CHECK(contains(warns.all(), "owner uid 12345"));
    CHECK(contains(warns.all(), "mode 0644"));
    CHECK(contains(warns.all(), "owned by another user than uid " + std::to_string(::geteuid())));
    CHECK(exists(path));
    // ... not even with the option that trusts root.
    CHECK_FALSE(DiskCache(dir, false, Trust{true, std::nullopt}).load(k.key).has_value());
  }
  SUBCASE("the folder") {
    REQUIRE(try_chown(path, ::geteuid()).empty());
    REQUIRE(try_chown(dir, kOtherUid).empty());
    Warnings warns;
    const DiskCache theirs(dir);
    CHECK_FALSE(theirs.load(k.key).has_value());
    CHECK_FALSE(theirs.store(kernel(64)));
    REQUIRE(warns.count() == 1);
    CHECK(contains(warns.all(), "kernel cache folder " + dir));
    CHECK(contains(warns.all(), "owner uid 12345, mode 0700"));
  }
}

TEST_CASE("cache trust: root's folder and entries are refused without the option and used with it") {
  // Root's files are the ones a root test creates; "another user" is the Trust::user of uid 12345.
  if (::geteuid() != 0) {
    MESSAGE("skipped: root-owned entries cannot be made without root (CI runs as root)");
    return;
  }
  TrustDir tmp;
  const std::string dir = tmp / "fleet";
  const auto k = kernel();
  REQUIRE(DiskCache(dir).store(k));  // as root: folder and entry owned by uid 0
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  const Trust user{/*root=*/false, kOtherUid}, user_trusting_root{/*root=*/true, kOtherUid};
  CHECK(DiskCache(dir).load(k.key).has_value());  // root's own cache needs no option

  SUBCASE("a root-owned folder") {
    Warnings warns;
    const DiskCache plain(dir, false, user);
    CHECK_FALSE(plain.load(k.key).has_value());
    REQUIRE(warns.count() == 1);
    CHECK(contains(warns.all(), "kernel cache folder " + dir));
    CHECK(contains(warns.all(), "owner uid 0, mode 0755"));
    CHECK(contains(warns.all(), "SAGE2_CACHE_TRUST_ROOT=1"));
    const auto loaded = DiskCache(dir, false, user_trusting_root).load(k.key);
    REQUIRE(loaded.has_value());
    CHECK(loaded->cubin == k.cubin);
    CHECK(warns.count() == 1);
  }
  SUBCASE("a root-owned entry in the user's folder") {
    REQUIRE(::chown(dir.c_str(), kOtherUid, kOtherUid) == 0);
    Warnings warns;
    CHECK_FALSE(DiskCache(dir, false, user).load(k.key).has_value());
    REQUIRE(warns.count() == 1);
    CHECK(contains(warns.all(), "kernel cache entry " + DiskCache(dir).entry_path(k.key)));
    CHECK(contains(warns.all(), "owner uid 0, mode 0644"));
    CHECK(DiskCache(dir, false, user_trusting_root).load(k.key).has_value());
  }
  SUBCASE("root's, but writable by its group: refused even with the option") {
    REQUIRE(::chmod(dir.c_str(), 0775) == 0);
    Warnings warns;
    CHECK_FALSE(DiskCache(dir, false, user_trusting_root).load(k.key).has_value());
    CHECK(contains(warns.all(), "writable by its group"));
  }
}

TEST_CASE("cache trust: SAGE2_CACHE_TRUST_ROOT and ContextOptions::cache_trust_root set Trust::root") {
  test::ScopedEnv dir("SAGE2_CACHE_DIR", "/tmp/sage2-trust-config");
  {
    test::ScopedEnv unset("SAGE2_CACHE_TRUST_ROOT", nullptr);
    CHECK_FALSE(DiskCache::from_env().trust().root);
    CHECK(resolve_context_options().cache_trust_root == false);
  }
  test::ScopedEnv on("SAGE2_CACHE_TRUST_ROOT", "1");
  CHECK(DiskCache::from_env().trust().root);
  CHECK(base::config::context_config().cache_trust_root);
  CHECK(resolve_context_options().cache_trust_root == true);
  ContextOptions o;
  o.cache_trust_root = false;  // a setting in code wins over the environment
  CHECK_FALSE(base::config::context_config(o).cache_trust_root);
  CHECK(resolve_context_options(o).cache_trust_root == false);
}
