#include "base/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>
#include <system_error>

#include "base/hash.hpp"

namespace sage2::base::fs {

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

int make_dirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return ENOENT;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  const std::string parent = parent_dir(dir);
  if (parent != dir && parent != "." && parent != "/") {
    if (int e = make_dirs(parent, mode)) return e;
  }
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return errno;
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

void put_u32(char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
void put_u64(char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

void Fd::reset() {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool write_all(int fd, const char* p, std::size_t n, int& err) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<std::size_t>(n, 1u << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return false;
    }
    if (w == 0) {
      err = EIO;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool AtomicFile::open(const std::string& dir, const std::string& final_name, std::string& why) {
  dir_ = dir;
  final_path_ = join(dir, final_name);
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t n = counter.fetch_add(1);
    char tag[64];
    std::snprintf(tag, sizeof tag, "%ld-%llu-%08llx", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(n),
                  static_cast<unsigned long long>(base::fnv1a64(&n, sizeof n, salt) & 0xffffffffull));
    temp_path_ = join(dir, temp_prefix_ + tag + temp_suffix_);
    const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd_.fd = fd;
      return true;
    }
    if (errno != EEXIST) {
      why = "cannot create " + temp_path_ + ": " + errno_text(errno);
      temp_path_.clear();
      return false;
    }
  }
  why = "cannot create a unique temporary file in " + dir;
  temp_path_.clear();
  return false;
}

bool AtomicFile::write(const char* p, std::size_t n, std::string& why) {
  int err = 0;
  if (!write_all(fd_.fd, p, n, err)) {
    why = "write to " + temp_path_ + " failed: " + errno_text(err);
    return false;
  }
  return true;
}

bool AtomicFile::pwrite_at(const char* p, std::size_t n, off_t off, std::string& why) {
  const ssize_t w = ::pwrite(fd_.fd, p, n, off);
  if (w != static_cast<ssize_t>(n)) {
    why = "write to " + temp_path_ + " failed: " + errno_text(w < 0 ? errno : EIO);
    return false;
  }
  return true;
}

bool AtomicFile::commit(std::string& why) { return finish(why) && publish(why); }

bool AtomicFile::finish(std::string& why) {
  if (::fsync(fd_.fd) != 0) {
    why = "fsync of " + temp_path_ + " failed: " + errno_text(errno);
    return false;
  }
  const int fd = fd_.fd;
  fd_.fd = -1;
  if (::close(fd) != 0) {
    why = "close of " + temp_path_ + " failed: " + errno_text(errno);
    return false;
  }
  return true;
}

bool AtomicFile::publish(std::string& why) {
  if (temp_path_.empty() || fd_.fd >= 0) {
    why = "internal: publish() of " + final_path_ + " without a finished temporary file";
    return false;
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    why = "rename to " + final_path_ + " failed: " + errno_text(errno);
    return false;
  }
  temp_path_.clear();
  // Make the rename itself durable; failure here does not undo a complete, visible file.
  Fd d(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd >= 0) (void)::fsync(d.fd);
  return true;
}

AtomicFile::~AtomicFile() {
  fd_.reset();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

bool write_file_atomic(const std::string& dir, const std::string& name, const char* data, std::size_t n,
                       const std::string& temp_prefix, const std::string& temp_suffix, std::string& why) {
  AtomicFile f(temp_prefix, temp_suffix);
  return f.open(dir, name, why) && f.write(data, n, why) && f.commit(why);
}

}  // namespace sage2::base::fs
