// KernelSpec → CUfunction for one CUDA context: in-memory cache, then the disk cache, then NVRTC.
// Thread-safe; concurrent requests for one key compile it once. The in-memory cache is keyed by
// spec.key() (within one process the source, options and NVRTC of a spec never change); the
// disk cache by the build's key, computed once per kernel when it is first loaded. Each outcome
// is counted (stats(), sage2::KernelStats), and each compile logged at info level, once per key
// and process, with the reason the disk cache did not have it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "kernels/quantize_shape.hpp"
#include "base/driver.hpp"
#include "runtime/kernel_stats.hpp"

namespace sage2::runtime {

enum class KernelSource { Compiled, DiskCache };
// Optimized: the library's build, read from and written to the disk cache. Quick: the same
// specialisation compiled as fast as NVRTC can (jit::make_quick_build; issue 40's first tier),
// kept in memory only.
enum class BuildTier { Optimized, Quick };

struct LoadedKernel {
  std::string key;                    // the disk cache key (jit::KernelBuild::key)
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  jit::PtxasFacts facts;
  KernelSource source = KernelSource::Compiled;
  BuildTier tier = BuildTier::Optimized;
  double load_seconds = 0;            // compile (or disk read) + module load
  std::atomic<std::size_t> smem_limit_set{48 * 1024};  // dynamic smem the function is allowed (the driver's, at load)
  std::atomic<bool> carveout_set{false};               // a carveout preference was set
  int shared_per_sm = 0;                               // the arch's shared memory per SM (bytes)
};

class KernelLoader {
 public:
  // ptx: every kernel as PTX for arch (KernelSpec::ptx), JIT-compiled by the driver at load.
  KernelLoader(CUcontext ctx, kernels::Arch arch, cache::DiskCache disk, bool ptx = false);
  ~KernelLoader();
  KernelLoader(const KernelLoader&) = delete;
  KernelLoader& operator=(const KernelLoader&) = delete;

  // The spec's arch and ptx are overridden by the loader's (a context has one code target). The
  // two tiers of one spec are separate kernels.
  LoadedKernel& get(kernels::KernelSpec spec, BuildTier tier = BuildTier::Optimized);
  // get() for every spec, the ones not yet loaded compiled concurrently (one thread each): a
  // call's kernels are independent, and NVRTC + ptxas (0.2–0.7 s a kernel on the host CPU) is
  // what a cold call waits for. Rethrows the first failure in the given order once all finished.
  // Returns the kernels in the order of `specs`, so that callers need not ask get() again (each
  // such request would count as a memory hit).
  std::vector<LoadedKernel*> load_all(const std::vector<kernels::KernelSpec>& specs,
                                      BuildTier tier = BuildTier::Optimized);
  // Whether get(spec) would return at once or from the disk cache, without compiling: the
  // optimized kernel is loaded, or the disk cache holds a valid entry for it.
  bool optimized_available(kernels::KernelSpec spec);
  const cache::DiskCache& disk() const { return disk_; }
  std::size_t loaded_count() const;
  KernelStats stats() const { return counters_.snapshot(); }
  // What is loaded (for benchmarks and diagnostics): each kernel's key, source and load time.
  struct LoadedInfo {
    std::string key;
    KernelSource source;
    double load_seconds;
    BuildTier tier;
  };
  std::vector<LoadedInfo> loaded() const;

 private:
  struct Slot {
    std::once_flag once;
    std::unique_ptr<LoadedKernel> kernel;
  };
  std::unique_ptr<LoadedKernel> load(const kernels::KernelSpec& spec, BuildTier tier);
  kernels::KernelSpec own(kernels::KernelSpec spec) const;  // arch and ptx set to the loader's
  static std::string slot_key(const kernels::KernelSpec& spec, BuildTier tier);

  CUcontext ctx_;
  kernels::Arch arch_;
  bool ptx_ = false;
  cache::DiskCache disk_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
  KernelCounters counters_{KernelCounters::process()};
};

// Launches on `stream` with `params` (a pointer to the kernel's single by-value parameter
// struct), raising the function's dynamic shared memory limit first when needed.
void launch(LoadedKernel& k, const kernels::LaunchShape& shape, void* params, CUstream stream);

}  // namespace sage2::runtime
