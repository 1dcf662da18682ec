// Small file-system and byte-order helpers shared by the disk cache, its entry format and the
// tuning database (one definition of each).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sage2::base::fs {

std::string join(const std::string& dir, const std::string& name);
std::string parent_dir(const std::string& path);  // "." for a bare name, "/" for the root
// mkdir -p; 0 or an errno value. Every folder it creates gets `mode` (less the umask); existing
// ones are left as they are.
int make_dirs(const std::string& dir, mode_t mode);
std::string errno_text(int e);

// Little-endian fixed-width fields of the on-disk formats.
void put_u32(char* p, std::uint32_t v);
void put_u64(char* p, std::uint64_t v);
std::uint32_t get_u32(const char* p);
std::uint64_t get_u64(const char* p);

// A file descriptor closed on destruction.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset();
};

// Writes all n bytes (retrying short writes and EINTR); false with the errno in err.
bool write_all(int fd, const char* p, std::size_t n, int& err);

// A file written under a temporary name in the target directory, then fsync'ed and renamed over
// the final name (and the directory fsync'ed), so readers only ever see the old file or the
// complete new one. The temporary name is "<temp_prefix><pid>-<n>-<8 hex><temp_suffix>", unique
// per process and call; each user picks its own prefix/suffix so that it can sweep the ones a
// killed writer left behind. The destructor removes the temporary file unless commit() succeeded.
class AtomicFile {
 public:
  AtomicFile(std::string temp_prefix, std::string temp_suffix)
      : temp_prefix_(std::move(temp_prefix)), temp_suffix_(std::move(temp_suffix)) {}
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Each returns false with a reason in `why`.
  bool open(const std::string& dir, const std::string& final_name, std::string& why);
  bool write(const char* p, std::size_t n, std::string& why);
  bool pwrite_at(const char* p, std::size_t n, off_t off, std::string& why);  // rewrite written bytes
  bool commit(std::string& why);  // finish() then publish()
  // The two halves of commit(), for a writer that stages several files and publishes them only
  // when all of them are good: finish() makes the temporary file durable and closes it (no
  // descriptor is held afterwards); publish() renames it over the final name.
  bool finish(std::string& why);
  bool publish(std::string& why);

 private:
  std::string temp_prefix_, temp_suffix_;
  std::string dir_, final_path_, temp_path_;
  Fd fd_;
};

// dir/name := the n bytes at data, through an AtomicFile (the directory must exist).
bool write_file_atomic(const std::string& dir, const std::string& name, const char* data, std::size_t n,
                       const std::string& temp_prefix, const std::string& temp_suffix, std::string& why);

}  // namespace sage2::base::fs
