// Fuzz target: the bundle importer (cache::DiskCache::import_bundle). Each input is written to a
// file in a private temp directory ($TMPDIR, else /tmp) and imported into an empty cache there.
// Properties checked for every input:
//  - never a crash, a sanitizer report, an uncaught exception, a leak, or a temp file left behind;
//  - a file that is not a bundle (short, bad magic, header checksum, version) throws
//    Error(CacheError) and writes nothing;
//  - otherwise imported + rejected + failed == the header's entry count, failed == 0 (the
//    directory is writable), and every file in the cache afterwards is a valid entry whose
//    name matches its key (verify() finds nothing bad), at most one per imported entry, and
//    load(key) returns it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.hpp"

using sage2::cache::DiskCache;
namespace fz = sage2::fuzz;

namespace {

std::string g_root;  // private temp dir: <root>/in.s2b and <root>/cache/

void remove_root() {
  if (g_root.empty()) return;
  const std::string cmd = "rm -rf '" + g_root + "'";
  (void)std::system(cmd.c_str());
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
  return out;
}

void empty_dir(const std::string& dir) {
  for (const auto& n : names_in(dir)) ::unlink((dir + "/" + n).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::quiet_log();
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-fuzz-bundle-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    std::perror("sage2 fuzz: mkdtemp");
    std::abort();
  }
  g_root = buf.data();
  std::atexit(remove_root);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  fz::repair_bundle(data, size, seed % 4);
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = g_root + "/in.s2b";
  const std::string dir = g_root + "/cache";
  {
    const int fd = ::open(in.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    SAGE2_FUZZ_CHECK(fd >= 0, "cannot write the input file");
    std::size_t off = 0;
    while (off < size) {
      const ssize_t w = ::write(fd, data + off, size - off);
      SAGE2_FUZZ_CHECK(w > 0, "short write of the input file");
      off += static_cast<std::size_t>(w);
    }
    ::close(fd);
  }
  empty_dir(dir);

  const DiskCache cache(dir);
  DiskCache::ImportResult r;
  try {
    r = cache.import_bundle(in);
  } catch (const sage2::Error& e) {
    SAGE2_FUZZ_CHECK(e.code() == sage2::ErrorCode::CacheError, "import threw another error code");
    SAGE2_FUZZ_CHECK(names_in(dir).empty(), "a refused bundle wrote into the cache");
    return 0;
  }
  SAGE2_FUZZ_CHECK(size >= fz::kBundleHeader, "a file shorter than the header was imported");
  const std::uint64_t count = fz::rd64(data + 16);
  SAGE2_FUZZ_CHECK(r.imported + r.rejected + r.failed == count, "entries not accounted for");
  SAGE2_FUZZ_CHECK(r.failed == 0, "a writable cache failed to store an entry");

  const auto files = names_in(dir);
  SAGE2_FUZZ_CHECK(files.size() <= r.imported, "more files than imported entries (temp file left?)");
  std::size_t checked = 0;
  const auto bad = cache.verify(false, &checked);
  SAGE2_FUZZ_CHECK(bad.empty(), "an imported entry does not verify");
  SAGE2_FUZZ_CHECK(checked == files.size(), "a file in the cache that is not an entry");
  for (const auto& e : cache.list()) {
    const auto k = cache.load(e.key);
    SAGE2_FUZZ_CHECK(k.has_value() && k->key == e.key, "an imported entry does not load under its key");
  }
  return 0;
}
