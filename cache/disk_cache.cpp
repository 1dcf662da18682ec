// On-disk cubin cache: file system side (atomic writes, loads that never trust the bytes,
// maintenance, bundles). The entry format itself is in cache/entry_format.cpp.
#include "cache/disk_cache.hpp"
#include "base/file_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/config.hpp"
#include "base/log.hpp"
#include "base/hash.hpp"
#include "base/sha256.hpp"

namespace sage2::cache {
namespace {
using namespace base::fs;  // the file utilities this file is built on

constexpr char kBundleMagic[8] = {'S', '2', 'B', 'U', 'N', 'D', 'L', 'E'};
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kTempSuffix = ".s2c-partial";
// The folder and any folder above it that store() creates: no one else may list or write it.
constexpr mode_t kFolderMode = 0700;
// O_NOFOLLOW: an entry is a file of its own, never a symlink to somewhere another user chose.
// O_NONBLOCK: a FIFO named like an entry must not block the open (it is refused as not regular).
constexpr int kOpenEntry = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW;

// Keys and reasons that come from a file may hold anything: keep messages short and printable.
std::string printable(const std::string& s, std::size_t max = 160) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && out.size() < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (out.size() >= max && s.size() > max) out += "...";
  return out;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// "<16 lower-case hex digits>.s2c"
bool is_entry_name(const std::string& name) {
  if (name.size() != 20 || !ends_with(name, ".s2c")) return false;
  for (int i = 0; i < 16; ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_temp_name(const std::string& name) {
  return name.rfind(kTempPrefix, 0) == 0 && ends_with(name, kTempSuffix);
}

std::uint32_t trusted_user(const Trust& t) { return t.user ? *t.user : static_cast<std::uint32_t>(::geteuid()); }

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0%03o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Why a cache folder or entry with this owner and mode may not be used; empty when it may. The
// text names the owner's uid and the mode, then the rule broken.
std::string distrust(const struct stat& st, const Trust& t) {
  const std::uint32_t me = trusted_user(t);
  const auto owner = static_cast<std::uint32_t>(st.st_uid);
  std::string rule;
  if (owner != me && !(owner == 0 && t.root))
    rule = owner == 0 ? "owned by root, used only when SAGE2_CACHE_TRUST_ROOT=1 (ContextOptions::cache_trust_root)"
                      : "owned by another user than uid " + std::to_string(me);
  else if (st.st_mode & S_IWOTH)
    rule = "writable by others";
  else if (st.st_mode & S_IWGRP)
    rule = "writable by its group";
  if (rule.empty()) return rule;
  return "owner uid " + std::to_string(owner) + ", mode " + mode_text(st.st_mode) + ": " + rule;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double mtime_seconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

// Reads up to n bytes; returns how many were read (short only at end of file), -1 on error.
ssize_t read_up_to(int fd, char* p, std::size_t n, int& err) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, std::min<std::size_t>(n - got, 1u << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

// Reads a whole regular file of at most max_bytes. Returns false with a reason otherwise.
bool read_file(int fd, const struct stat& st, std::uint64_t max_bytes, std::vector<char>& out, std::string& why) {
  if (!S_ISREG(st.st_mode)) { why = "not a regular file"; return false; }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) { why = "file of " + std::to_string(size) + " bytes exceeds the entry size limit"; return false; }
  out.resize(size + 1);  // one extra byte detects a file that grew since fstat
  int err = 0;
  const ssize_t got = read_up_to(fd, out.data(), out.size(), err);
  if (got < 0) { why = "read failed: " + errno_text(err); return false; }
  out.resize(static_cast<std::size_t>(got));
  return true;
}

// Unlinks `path` only if it is still the inode we examined (a concurrent writer may have
// replaced a bad entry with a good one in the meantime; a symlink is never followed or removed).
// Returns kRemoved (also when already gone), kSkipped (another file is there now), or an errno.
constexpr int kRemoved = 0, kSkipped = -1;
int remove_if_same(const std::string& path, dev_t dev, ino_t ino) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0) return errno == ENOENT ? kRemoved : errno;
  if (now.st_dev != dev || now.st_ino != ino) return kSkipped;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno;
  return kRemoved;
}

bool create_folder(const std::string& dir, std::string& why) {
  if (int e = make_dirs(dir, kFolderMode)) {
    why = "cannot create directory " + dir + ": " + errno_text(e);
    return false;
  }
  return true;
}

// SHA-256 of the whole file behind `fd` (read with pread: the file offset is left as it is).
std::string sha256_of_fd(int fd, const std::string& path) {
  base::Sha256 h;
  std::vector<char> buf(1u << 20);
  off_t at = 0;
  for (;;) {
    const ssize_t r = ::pread(fd, buf.data(), buf.size(), at);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::CacheError, "cannot read " + path + ": " + errno_text(errno));
    }
    if (r == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(r));
    at += r;
  }
  return h.hex_digest();
}

struct DirEntry {
  std::string name, path;
  struct stat st {};
};

// Lists entry files (and, when asked, temp files) of `dir`. Missing directory → empty.
std::vector<DirEntry> scan(const std::string& dir, bool temps) {
  std::vector<DirEntry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    throw Error(ErrorCode::CacheError, "cannot read cache directory " + dir + ": " + errno_text(errno));
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (temps ? !is_temp_name(name) : !is_entry_name(name)) continue;
    DirEntry de;
    de.path = join(dir, name);
    de.name = std::move(name);
    if (::stat(de.path.c_str(), &de.st) != 0) continue;  // vanished meanwhile
    out.push_back(std::move(de));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

// The key an entry file's header declares, without verifying anything else (load() does).
bool read_entry_key(const std::string& path, std::string& key) {
  Fd fd(::open(path.c_str(), kOpenEntry));
  if (fd.fd < 0) return false;
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  char header[kEntryHeaderBytes];
  int err = 0;
  if (read_up_to(fd.fd, header, sizeof header, err) != static_cast<ssize_t>(sizeof header)) return false;
  const std::uint32_t len = get_u32(header + 28);
  if (len == 0 || len > kMaxKeyBytes) return false;
  key.resize(len);
  return read_up_to(fd.fd, key.data(), len, err) == static_cast<ssize_t>(len);
}

void sweep_stale_temps(const std::string& dir) {
  const double now = now_seconds();
  for (const auto& t : scan(dir, /*temps=*/true))
    if (now - mtime_seconds(t.st) > kStaleTempSeconds) (void)remove_if_same(t.path, t.st.st_dev, t.st.st_ino);
}

// Reads and verifies one entry file: valid means it is trusted, the bytes deserialize and the file
// name is the one its key maps to. `bytes` receives the raw file content.
EntryInfo inspect(const DirEntry& de, const Trust& trust, std::vector<char>& bytes, dev_t& dev, ino_t& ino) {
  EntryInfo info;
  info.file = de.path;
  dev = de.st.st_dev;
  ino = de.st.st_ino;
  info.size_bytes = static_cast<std::uint64_t>(de.st.st_size);
  info.age_seconds = std::max(0.0, now_seconds() - mtime_seconds(de.st));
  Fd fd(::open(de.path.c_str(), kOpenEntry));
  if (fd.fd < 0) {
    info.problem = errno == ELOOP ? std::string("a symbolic link (not followed)") : "cannot open: " + errno_text(errno);
    return info;
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    info.problem = "cannot stat: " + errno_text(errno);
    return info;
  }
  dev = st.st_dev;
  ino = st.st_ino;
  if (std::string why = distrust(st, trust); !why.empty()) {
    info.problem = "not trusted (" + why + ")";
    return info;
  }
  info.size_bytes = static_cast<std::uint64_t>(st.st_size);
  info.age_seconds = std::max(0.0, now_seconds() - mtime_seconds(st));
  std::string why;
  if (!read_file(fd.fd, st, kMaxEntryBytes, bytes, why)) {
    info.problem = why;
    return info;
  }
  auto k = DiskCache::try_deserialize(bytes.data(), bytes.size(), &why);
  if (!k) {
    info.problem = why;
    return info;
  }
  info.key = k->key;
  info.arch = kernels::arch_name(k->arch);
  if (DiskCache::entry_file_name(k->key) != de.name) {
    info.problem = "file name does not match its key (expected " + DiskCache::entry_file_name(k->key) + ")";
    return info;
  }
  info.valid = true;
  return info;
}


}  // namespace

// The folder's stat, taken once: its owner and mode decide whether anything in it is used.
struct DiskCache::FolderState {
  std::mutex mu;
  bool known = false;
  struct stat st {};
};

DiskCache::DiskCache(std::string dir, bool disabled, Trust trust)
    : dir_(std::move(dir)), disabled_(disabled), trust_(trust), folder_(std::make_shared<FolderState>()) {}

DiskCache DiskCache::from_env() {
  const base::config::CacheConfig c = base::config::cache_config();
  return DiskCache(c.cache_dir, !c.disk_cache, Trust{c.trust_root, std::nullopt});
}

std::string DiskCache::folder_check(bool& exists) const {
  struct stat st {};
  {
    std::lock_guard<std::mutex> lock(folder_->mu);
    if (!folder_->known) {
      // Not kept while missing or not a folder: store() may create it later.
      exists = ::stat(dir_.c_str(), &folder_->st) == 0 && S_ISDIR(folder_->st.st_mode);
      if (!exists) return {};
      folder_->known = true;
    }
    st = folder_->st;
  }
  exists = true;
  return distrust(st, trust_);
}

std::string DiskCache::folder_problem() const {
  bool exists = false;
  return folder_check(exists);
}

bool DiskCache::folder_trusted() const {
  bool exists = false;
  const std::string problem = folder_check(exists);
  if (problem.empty()) return exists;  // missing: a miss (store() creates it first)
  base::log::warn_once("cache-untrusted:" + dir_, "kernel cache folder " + dir_ + " is not trusted (" + problem +
                                                     "); nothing is loaded from it or stored in it, kernels are "
                                                     "compiled and kept in memory");
  return false;
}

std::string DiskCache::entry_path(const std::string& key) const { return join(dir_, entry_file_name(key)); }

std::optional<jit::CompiledKernel> DiskCache::load(const std::string& key, std::string* rejected) const {
  if (disabled_) return std::nullopt;
  const std::string path = entry_path(key);
  try {
    if (!folder_trusted()) {
      if (rejected) *rejected = "the cache folder " + dir_ + " is not trusted (see the warning)";
      return std::nullopt;
    }
    Fd fd(::open(path.c_str(), kOpenEntry));
    if (fd.fd < 0) {
      const int e = errno;
      if (e != ENOENT && e != ENOTDIR) {
        if (rejected) *rejected = "cannot read " + path + ": " + errno_text(e);
        base::log::warn_once("cache-unreadable:" + path,
                             "cannot read kernel cache entry " + path + ": " +
                                 (e == ELOOP ? std::string("a symbolic link (not followed)") : errno_text(e)) +
                                 "; recompiling");
      }
      return std::nullopt;
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) {
      const int e = errno;
      if (rejected) *rejected = "cannot stat " + path + ": " + errno_text(e);
      return std::nullopt;
    }
    // Judged on the opened file itself: renaming another file into place afterwards changes nothing.
    if (const std::string why = distrust(st, trust_); !why.empty()) {
      if (rejected) *rejected = "not trusted: " + why;
      base::log::warn_once("cache-untrusted:" + path, "kernel cache entry " + path + " is not trusted (" + why +
                                                          "); not loaded, the kernel will be compiled");
      return std::nullopt;
    }

    std::string why;
    std::vector<char> bytes;
    std::optional<jit::CompiledKernel> k;
    if (read_file(fd.fd, st, kMaxEntryBytes, bytes, why)) {
      k = try_deserialize(bytes.data(), bytes.size(), &why);
      if (k && k->key != key) {
        why = "it holds another key ('" + printable(k->key) + "')";
        k.reset();
      }
    }
    if (k) {
      (void)::futimens(fd.fd, nullptr);  // last use, for prune(); harmless if not permitted
      return k;
    }
    std::string outcome = "removed it; the kernel will be recompiled";
    if (S_ISREG(st.st_mode)) {
      const int e = remove_if_same(path, st.st_dev, st.st_ino);
      if (e == kSkipped) outcome = "left it in place (replaced meanwhile, or a symlink)";
      else if (e != kRemoved) outcome = "could not remove it (" + errno_text(e) + "); the kernel will be recompiled";
    } else {
      outcome = "left it in place; the kernel will be compiled in memory";
    }
    if (rejected) *rejected = "bad entry " + path + ": " + why;
    base::log::warn_once("cache-bad-entry:" + path, "bad kernel cache entry " + path + " for key '" +
                                                  printable(key) + "': " + why + "; " + outcome);
    return std::nullopt;
  } catch (const std::exception& e) {
    if (rejected) *rejected = "cannot load " + path + ": " + e.what();
    base::log::warn_once("cache-bad-entry:" + path,
                   "cannot load kernel cache entry " + path + ": " + e.what() + "; recompiling");
    return std::nullopt;
  }
}

std::optional<jit::CompiledKernel> DiskCache::load_build(const jit::KernelBuild& b, std::string* rejected) const {
  if (b.toolchain.has_nvrtc()) return load(b.key, rejected);
  if (disabled_ || !folder_trusted()) return std::nullopt;
  // Candidates by the key in each header (the full check is load()'s); the newest NVRTC first.
  const std::string prefix = b.stem + jit::kNvrtcKeyTag;
  std::vector<std::pair<std::pair<int, int>, std::string>> found;
  try {
    for (const auto& de : scan(dir_, false)) {
      std::string key;
      if (!read_entry_key(de.path, key) || key.compare(0, prefix.size(), prefix) != 0) continue;
      int major = 0, minor = 0;
      if (std::sscanf(key.c_str() + prefix.size(), "%d.%d", &major, &minor) != 2) continue;
      found.push_back({{major, minor}, std::move(key)});
    }
  } catch (const std::exception& e) {
    base::log::warn_once("cache-unreadable:" + dir_, std::string("cannot search the kernel cache: ") + e.what());
    return std::nullopt;
  }
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (const auto& f : found)
    if (auto k = load(f.second, rejected)) {
      base::log::debug("no NVRTC: using " + k->key + ", built by NVRTC " + std::to_string(k->nvrtc_major) + "." +
                 std::to_string(k->nvrtc_minor));
      return k;
    }
  return std::nullopt;
}

bool DiskCache::store(const jit::CompiledKernel& k) const {
  if (disabled_) return false;
  try {
    const std::vector<char> bytes = serialize(k);
    std::string why;
    if (create_folder(dir_, why)) {
      if (!folder_trusted()) return false;  // warned once, as for loads
      const std::string name = entry_file_name(k.key);
      if (base::fs::write_file_atomic(dir_, name, bytes.data(), bytes.size(), kTempPrefix, kTempSuffix, why))
        return true;
    }
    base::log::warn_once("cache-unusable:" + dir_, "cannot write to the kernel cache in " + dir_ + " (" + why +
                                                 "); compiled kernels are kept in memory only");
  } catch (const std::exception& e) {
    base::log::warn_once("cache-unusable:" + dir_, std::string("cannot store a kernel in the disk cache ") + dir_ +
                                                 ": " + e.what() + "; compiled kernels are kept in memory only");
  }
  return false;
}

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> out;
  if (disabled_) return out;
  std::vector<char> bytes;
  for (const auto& de : scan(dir_, false)) {
    dev_t dev;
    ino_t ino;
    out.push_back(inspect(de, trust_, bytes, dev, ino));
  }
  std::stable_sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.key != b.key ? a.key < b.key : a.file < b.file;
  });
  return out;
}

std::vector<EntryInfo> DiskCache::verify(bool remove_bad, std::size_t* checked) const {
  std::vector<EntryInfo> bad;
  if (checked) *checked = 0;
  if (disabled_) return bad;
  std::vector<char> bytes;
  const auto entries = scan(dir_, false);
  if (checked) *checked = entries.size();
  for (const auto& de : entries) {
    dev_t dev;
    ino_t ino;
    EntryInfo info = inspect(de, trust_, bytes, dev, ino);
    if (info.valid) continue;
    if (remove_bad) {
      const int e = remove_if_same(de.path, dev, ino);
      if (e == kRemoved) info.removed = true;
      else if (e == kSkipped) info.problem += " (not removed: the file was replaced or is a symlink)";
      else info.problem += " (could not remove: " + errno_text(e) + ")";
    }
    bad.push_back(std::move(info));
  }
  if (remove_bad) sweep_stale_temps(dir_);
  return bad;
}

std::uint64_t DiskCache::total_bytes() const {
  if (disabled_) return 0;
  std::uint64_t total = 0;
  for (const auto& de : scan(dir_, false)) total += static_cast<std::uint64_t>(de.st.st_size);
  return total;
}

std::uint64_t DiskCache::prune(std::uint64_t max_bytes) const {
  if (disabled_) return 0;
  sweep_stale_temps(dir_);
  auto entries = scan(dir_, false);
  std::uint64_t total = 0;
  for (const auto& de : entries) total += static_cast<std::uint64_t>(de.st.st_size);
  // Oldest first; ties broken by name so the result is deterministic.
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) {
    const double ta = mtime_seconds(a.st), tb = mtime_seconds(b.st);
    return ta != tb ? ta < tb : a.name < b.name;
  });
  std::uint64_t freed = 0;
  for (const auto& de : entries) {
    if (total <= max_bytes) break;
    if (remove_if_same(de.path, de.st.st_dev, de.st.st_ino) == kRemoved) {
      const auto sz = static_cast<std::uint64_t>(de.st.st_size);
      freed += sz;
      total -= sz;
    }
  }
  return freed;
}

std::size_t DiskCache::clear() const {
  if (disabled_) return 0;
  std::size_t removed = 0;
  for (const auto& de : scan(dir_, false))
    if (::unlink(de.path.c_str()) == 0) ++removed;
  sweep_stale_temps(dir_);
  return removed;
}

std::size_t DiskCache::export_bundle(const std::string& path) const {
  auto fail = [&](const std::string& why) -> void {
    throw Error(ErrorCode::CacheError, "cannot export the cache to " + path + ": " + why);
  };
  const std::string dir = parent_dir(path);
  const std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (name.empty()) fail("the bundle path names a directory");
  // A bundle goes to a fleet: what the library would not load here must not travel.
  if (const std::string p = disabled_ ? std::string() : folder_problem(); !p.empty())
    fail("the cache folder " + dir_ + " is not trusted (" + p + ")");
  std::string why;
  base::fs::AtomicFile f(kTempPrefix, kTempSuffix);
  if (!f.open(dir, name, why)) fail(why);
  char header[kBundleHeaderBytes] = {};
  std::memcpy(header, kBundleMagic, sizeof kBundleMagic);
  if (!f.write(header, sizeof header, why)) fail(why);  // rewritten with the count at the end

  std::uint64_t count = 0;
  std::vector<char> bytes;
  const auto entries = disabled_ ? std::vector<DirEntry>{} : scan(dir_, false);
  for (const auto& de : entries) {
    dev_t dev;
    ino_t ino;
    const EntryInfo info = inspect(de, trust_, bytes, dev, ino);
    if (!info.valid) {
      base::log::warn("not exporting bad cache entry " + info.file + ": " + info.problem);
      continue;
    }
    char len[8];
    put_u64(len, bytes.size());
    if (!f.write(len, sizeof len, why) || !f.write(bytes.data(), bytes.size(), why)) fail(why);
    ++count;
  }
  header[8] = static_cast<char>(kBundleFormatVersion & 0xff);
  header[9] = static_cast<char>((kBundleFormatVersion >> 8) & 0xff);
  header[10] = static_cast<char>((kBundleFormatVersion >> 16) & 0xff);
  header[11] = static_cast<char>((kBundleFormatVersion >> 24) & 0xff);
  put_u64(header + 16, count);
  put_u64(header + 24, base::fnv1a64(header, 24));
  if (!f.pwrite_at(header, sizeof header, 0, why) || !f.commit(why)) fail(why);
  return static_cast<std::size_t>(count);
}

DiskCache::ImportResult DiskCache::import_bundle(const std::string& path, const std::string& expected_sha256) const {
  auto fail = [&](const std::string& why) -> void {
    throw Error(ErrorCode::CacheError, "cannot import bundle " + path + ": " + why);
  };
  std::optional<std::string> expected;
  if (!expected_sha256.empty()) {
    expected = base::parse_sha256_hex(expected_sha256);
    if (!expected)
      throw Error(ErrorCode::InvalidArgument, "expected SHA-256 '" + printable(expected_sha256) +
                                                  "' of bundle " + path + " is not 64 hex digits");
    if (const std::string why = base::sha256_unavailable_reason(); !why.empty())
      throw Error(ErrorCode::Unsupported,
                  "cannot import bundle " + path + ": its SHA-256 cannot be checked (" + why + "); nothing imported");
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // a FIFO is refused, not waited on
  if (fd.fd < 0) fail(errno_text(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail("not a regular file");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  // A wrong bundle is refused before anything is read from it (one clear message) ...
  if (expected) {
    const std::string actual = sha256_of_fd(fd.fd, path);
    if (actual != *expected)
      fail("its SHA-256 is " + actual + ", not the expected " + *expected + "; nothing imported");
  }
  // ... and the bytes the entries are read from are hashed again, so that a bundle changed in
  // between is refused too: entries are only staged until the end.
  std::optional<base::Sha256> hash;
  if (expected) hash.emplace();
  int err = 0;
  auto read_next = [&](char* p, std::size_t n) -> ssize_t {
    const ssize_t got = read_up_to(fd.fd, p, n, err);
    if (hash && got > 0) hash->update(p, static_cast<std::size_t>(got));
    return got;
  };

  char header[kBundleHeaderBytes];
  const ssize_t got = read_next(header, sizeof header);
  if (got < 0) fail("read failed: " + errno_text(err));
  if (static_cast<std::size_t>(got) < sizeof header) fail("too short to be a sage2 cache bundle");
  if (std::memcmp(header, kBundleMagic, sizeof kBundleMagic) != 0) fail("not a sage2 cache bundle (bad magic)");
  if (get_u64(header + 24) != base::fnv1a64(header, 24)) fail("the bundle header is corrupt (checksum mismatch)");
  const std::uint32_t version = get_u32(header + 8);
  if (version != kBundleFormatVersion)
    fail("bundle format version " + std::to_string(version) + " (this build reads " +
         std::to_string(kBundleFormatVersion) + ")");
  const std::uint64_t count = get_u64(header + 16);

  std::string why;
  if (!disabled_) {
    if (!create_folder(dir_, why)) base::log::warn("cannot import bundle " + path + " into " + dir_ + ": " + why);
    else if (const std::string p = folder_problem(); !p.empty())
      fail("the cache folder " + dir_ + " is not trusted (" + p + "); nothing imported");
  }

  ImportResult r;
  std::vector<std::unique_ptr<base::fs::AtomicFile>> staged;  // finished temp files, no descriptor held
  std::uint64_t offset = kBundleHeaderBytes;
  bool damaged = false;
  std::vector<char> blob;
  for (std::uint64_t i = 0; i < count; ++i) {
    char len_bytes[8];
    const ssize_t n = read_next(len_bytes, sizeof len_bytes);
    const std::uint64_t remaining = file_size > offset + 8 ? file_size - offset - 8 : 0;
    const std::uint64_t len = n == 8 ? get_u64(len_bytes) : 0;
    if (n != 8 || len > kMaxEntryBytes || len > remaining) {
      const std::uint64_t rest = count - i;
      base::log::warn("bundle " + path + " is damaged at byte " + std::to_string(offset) + " (entry " +
                std::to_string(i + 1) + " of " + std::to_string(count) + "); the " + std::to_string(rest) +
                " remaining entries are rejected");
      r.rejected += static_cast<std::size_t>(rest);
      damaged = true;
      break;
    }
    offset += 8;
    blob.resize(static_cast<std::size_t>(len));
    const ssize_t b = read_next(blob.data(), blob.size());
    if (b != static_cast<ssize_t>(len)) {
      const std::uint64_t rest = count - i;
      base::log::warn("bundle " + path + " could not be read at byte " + std::to_string(offset) + "; the " +
                std::to_string(rest) + " remaining entries are rejected");
      r.rejected += static_cast<std::size_t>(rest);
      damaged = true;
      break;
    }
    offset += len;
    auto k = try_deserialize(blob.data(), blob.size(), &why);
    if (!k) {
      base::log::warn("bundle " + path + ": entry " + std::to_string(i + 1) + " rejected: " + why);
      ++r.rejected;
      continue;
    }
    if (disabled_) {
      ++r.failed;
      continue;
    }
    // The verified bytes are stored as they are, so the imported file is identical to the exported one.
    auto f = std::make_unique<base::fs::AtomicFile>(kTempPrefix, kTempSuffix);
    if (f->open(dir_, entry_file_name(k->key), why) && f->write(blob.data(), blob.size(), why) && f->finish(why)) {
      staged.push_back(std::move(f));
    } else {
      base::log::warn("cannot store entry " + std::to_string(i + 1) + " of bundle " + path + ": " + why);
      ++r.failed;
    }
  }
  if (!damaged && offset < file_size)
    base::log::warn("bundle " + path + " has " + std::to_string(file_size - offset) +
              " unexpected bytes after its last entry; ignored");
  if (hash) {
    char tail[1 << 16];
    while (read_next(tail, sizeof tail) > 0) {  // the rest of the file: the digest covers every byte
    }
    if (err != 0) fail("read failed: " + errno_text(err) + "; nothing imported");
    const std::string actual = hash->hex_digest();
    if (actual != *expected)
      fail("it changed while it was imported (its SHA-256 is now " + actual + ", not the expected " + *expected +
           "); nothing imported");  // the staged files are removed with `staged`
  }
  for (auto& f : staged) {
    if (f->publish(why)) {
      ++r.imported;
    } else {
      base::log::warn("cannot store an entry of bundle " + path + ": " + why);
      ++r.failed;
    }
  }
  return r;
}

std::string DiskCache::bundle_sha256(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.fd < 0) throw Error(ErrorCode::CacheError, "cannot read " + path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw Error(ErrorCode::CacheError, "cannot stat " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::CacheError, path + " is not a regular file");
  return sha256_of_fd(fd.fd, path);
}

}  // namespace sage2::cache
