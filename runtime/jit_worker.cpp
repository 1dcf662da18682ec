#include "runtime/jit_worker.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "kernels/arch.hpp"
#include "sage2/sage2.hpp"
#include "cache/disk_cache.hpp"
#include "jit/nvrtc_library.hpp"

extern char** environ;

namespace sage2::runtime {
namespace {

constexpr const char* kWorkerName = "sage2-jit-worker";
constexpr const char* kRequestMagic = "sage2-jit-request 1";

bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string find_worker() {
  if (const char* env = std::getenv("SAGE2_JIT_WORKER")) return executable(env) ? std::string(env) : std::string();
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&find_worker), &info) == 0 || !info.dli_fname) return {};
  std::string dir = info.dli_fname;
  const std::size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
  for (const char* sub : {"/tools/", "/_bin/", "/../bin/", "/../tools/"}) {
    const std::string p = dir + sub + kWorkerName;
    if (executable(p)) return p;
  }
  return {};
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A private scratch folder for one request (removed by the destructor).
struct Scratch {
  std::string dir;
  Scratch() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-jit-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      throw Error(ErrorCode::CompileError, std::string("jit worker: mkdtemp in ") + tmpl + ": " + std::strerror(errno));
    dir = buf.data();
  }
  ~Scratch() {
    for (const char* f : {"/request", "/kernel", "/log"}) ::unlink((dir + f).c_str());
    ::rmdir(dir.c_str());
  }
};

}  // namespace

const std::string& jit_worker_path() {
  static const std::string path = find_worker();
  return path;
}

jit::CompiledKernel compile_in_worker(const jit::KernelBuild& b, const std::string& worker) {
  const jit::CompileTarget t = jit::compile_target(b.spec);
  Scratch scratch;
  const std::string request = scratch.dir + "/request", out = scratch.dir + "/kernel", log = scratch.dir + "/log";
  {
    // Lines: magic, key, entry, arch, ptx, library, NVRTC major and minor, option count, the
    // options (no newlines in any), then the source's byte count and the source.
    std::ofstream f(request, std::ios::binary);
    f << kRequestMagic << '\n' << b.key << '\n' << t.entry << '\n' << kernels::arch_name(t.arch) << '\n'
      << (t.ptx ? 1 : 0) << '\n' << b.toolchain.library << '\n' << b.toolchain.nvrtc_major << ' '
      << b.toolchain.nvrtc_minor << '\n' << b.options.size() << '\n';
    for (const std::string& o : b.options) f << o << '\n';
    f << b.source.size() << '\n' << b.source;
    if (!f) throw Error(ErrorCode::CompileError, "jit worker: cannot write " + request);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv = {const_cast<char*>(worker.c_str()), const_cast<char*>(request.c_str()),
                             const_cast<char*>(out.c_str()), nullptr};
  // The worker loads the NVRTC this process loaded (its version is in the build's key): a process
  // may have found it where the worker would not (e.g. beside a framework's libraries).
  std::vector<std::string> env_text;
  const jit::nvrtc::Api* api = jit::nvrtc::try_api();
  for (char** e = environ; e && *e; ++e)
    if (!api || std::strncmp(*e, "SAGE2_LIBNVRTC=", 15) != 0) env_text.emplace_back(*e);
  if (api) env_text.push_back("SAGE2_LIBNVRTC=" + (api->file.empty() ? api->path : api->file));
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, worker.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(ErrorCode::CompileError, "jit worker: cannot run " + worker + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(ErrorCode::CompileError, "jit worker " + worker + " failed for " + b.key + " (status " +
                                             std::to_string(status) + "):\n" + read_all(log));
  const std::string bytes = read_all(out);
  jit::CompiledKernel k = cache::DiskCache::deserialize(bytes.data(), bytes.size());
  if (k.key != b.key)
    throw Error(ErrorCode::CompileError, "jit worker " + worker + " returned " + k.key + " for " + b.key);
  return k;
}

int jit_worker_main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s REQUEST OUT  (run by libsage2 for the quick compile tier)\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream f(argv[1], std::ios::binary);
    std::string magic, arch, library;
    jit::KernelBuild b;
    jit::CompileTarget t;
    int ptx = 0;
    std::size_t n_options = 0, n_source = 0;
    std::getline(f, magic);
    if (magic != kRequestMagic) throw Error(ErrorCode::InvalidArgument, std::string("not a request: ") + argv[1]);
    std::getline(f, b.key);
    std::getline(f, t.entry);
    std::getline(f, arch);
    f >> ptx;
    f.ignore(1);
    std::getline(f, b.toolchain.library);
    f >> b.toolchain.nvrtc_major >> b.toolchain.nvrtc_minor >> n_options;
    f.ignore(1);
    for (std::size_t i = 0; i < n_options; ++i) {
      std::string o;
      std::getline(f, o);
      b.options.push_back(o);
    }
    f >> n_source;
    f.ignore(1);
    b.source.resize(n_source);
    f.read(b.source.data(), static_cast<std::streamsize>(n_source));
    if (!f) throw Error(ErrorCode::InvalidArgument, std::string("truncated request: ") + argv[1]);
    t.arch = kernels::parse_arch(arch);
    t.ptx = ptx != 0;
    const jit::CompiledKernel k = jit::compile(b, t);
    const std::vector<char> bytes = cache::DiskCache::serialize(k);
    std::ofstream o(argv[2], std::ios::binary);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!o) throw Error(ErrorCode::CompileError, std::string("cannot write ") + argv[2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

}  // namespace sage2::runtime
