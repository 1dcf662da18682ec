#include "runtime/kernel_loader.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>

#include "base/log.hpp"
#include "runtime/jit_worker.hpp"

namespace sage2::runtime {

KernelLoader::KernelLoader(CUcontext ctx, kernels::Arch arch, cache::DiskCache disk, bool ptx)
    : ctx_(ctx), arch_(arch), ptx_(ptx), disk_(std::move(disk)) {}

KernelLoader::~KernelLoader() {
  if (!base::driver::available()) return;
  const auto& a = base::driver::api();
  CUcontext cur = nullptr;
  a.cuCtxGetCurrent(&cur);
  const bool push = cur != ctx_;
  if (push && a.cuCtxPushCurrent_v2(ctx_) != CUDA_SUCCESS) return;  // context already gone
  for (auto& [key, slot] : slots_)
    if (slot->kernel && slot->kernel->module) a.cuModuleUnload(slot->kernel->module);
  if (push) {
    CUcontext popped;
    a.cuCtxPopCurrent_v2(&popped);
  }
}

std::size_t KernelLoader::loaded_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& [k, s] : slots_) n += s->kernel ? 1 : 0;
  return n;
}

std::vector<KernelLoader::LoadedInfo> KernelLoader::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoadedInfo> out;
  for (const auto& [k, s] : slots_)
    if (s->kernel) out.push_back({s->kernel->key, s->kernel->source, s->kernel->load_seconds, s->kernel->tier});
  return out;
}

kernels::KernelSpec KernelLoader::own(kernels::KernelSpec spec) const {
  spec.arch = arch_;
  spec.ptx = ptx_;
  return spec;
}

std::string KernelLoader::slot_key(const kernels::KernelSpec& spec, BuildTier tier) {
  return tier == BuildTier::Quick ? spec.key() + "|quick" : spec.key();
}

LoadedKernel& KernelLoader::get(kernels::KernelSpec spec, BuildTier tier) {
  spec = own(spec);
  const std::string key = slot_key(spec, tier);
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = slots_[key];
    if (!s) s = std::make_shared<Slot>();
    slot = s;
  }
  // call_once rethrows and lets a later caller retry when loading failed.
  bool loaded_here = false;
  std::call_once(slot->once, [&] {
    slot->kernel = load(spec, tier);
    loaded_here = true;
  });
  if (!loaded_here) counters_.memory_hit();  // also a caller that waited for another's load
  return *slot->kernel;
}

bool KernelLoader::optimized_available(kernels::KernelSpec spec) {
  spec = own(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = slots_.find(slot_key(spec, BuildTier::Optimized));
    if (it != slots_.end() && it->second->kernel) return true;
  }
  if (disk_.disabled()) return false;
  return disk_.load_build(jit::make_build(spec)).has_value();
}

std::vector<LoadedKernel*> KernelLoader::load_all(const std::vector<kernels::KernelSpec>& specs, BuildTier tier) {
  std::vector<LoadedKernel*> out(specs.size(), nullptr);
  std::vector<std::size_t> missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto it = slots_.find(slot_key(own(specs[i]), tier));
      if (it == slots_.end() || !it->second->kernel) missing.push_back(i);
    }
  }
  if (missing.size() < 2) {  // nothing to overlap
    for (std::size_t i = 0; i < specs.size(); ++i) out[i] = &get(specs[i], tier);
    return out;
  }
  std::vector<std::exception_ptr> errors(missing.size());
  std::vector<std::thread> threads;
  threads.reserve(missing.size());
  for (std::size_t m = 0; m < missing.size(); ++m)
    threads.emplace_back([&, m] {
      try {
        out[missing[m]] = &get(specs[missing[m]], tier);
      } catch (...) {
        errors[m] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (!out[i]) out[i] = &get(specs[i], tier);  // held before the call: memory hits
  return out;
}

std::unique_ptr<LoadedKernel> KernelLoader::load(const kernels::KernelSpec& spec, BuildTier tier) {
  const auto t0 = std::chrono::steady_clock::now();
  auto k = std::make_unique<LoadedKernel>();
  k->tier = tier;
  k->shared_per_sm = kernels::sm_shared_bytes(arch_);  // the SM's (as kernels/ plans it)
  const bool quick = tier == BuildTier::Quick;
  // The source is generated here, once per kernel and context: the disk key hashes it. Quick
  // builds never meet the disk cache (it holds only optimized kernels).
  const jit::KernelBuild build = quick ? jit::make_quick_build(spec) : jit::make_build(spec);
  std::string rejected;
  std::optional<jit::CompiledKernel> compiled;
  if (!quick) compiled = disk_.load_build(build, &rejected);
  k->source = compiled ? KernelSource::DiskCache : KernelSource::Compiled;
  // A compile costs the caller 0.2–2 s: say which kernel and why, once per kernel and process
  // (warm-ups compile many; the default level, warn, shows none of them).
  auto compile = [&](const std::string& why) {
    base::log::info_once("compile:" + build.key, "compiling kernel " + spec.key() + " (" + why + ")");
    const auto c0 = std::chrono::steady_clock::now();
    // (quick builds in a worker process: runtime/jit_worker.hpp)
    compiled = quick ? compile_in_worker(build, jit_worker_path()) : jit::compile(build);
    counters_.compiled(std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
    if (!quick) disk_.store(*compiled);
  };
  if (!compiled) {
    if (quick) compile("quick tier: the optimized build follows in the background");
    else if (disk_.disabled()) compile("disk cache disabled");
    else if (!rejected.empty()) compile("entry rejected: " + rejected);
    else compile("not in the disk cache " + disk_.dir());
  }
  k->key = compiled->key;
  k->facts = compiled->facts;
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(ctx_);
  CUresult r = a.cuModuleLoadData(&k->module, compiled->cubin.data());
  if (r != CUDA_SUCCESS && k->source == KernelSource::DiskCache) {
    // A verified entry the driver still refuses (e.g. written by a newer toolchain than this
    // driver accepts): recompile here and replace it.
    base::log::warn_once("cache-driver-refused:" + k->key, "the driver refused the cached cubin of " + k->key + " (" +
                                                         base::driver::error_text(r) + "); recompiling");
    compile("the driver refused the cached cubin");
    k->key = compiled->key;
    k->source = KernelSource::Compiled;
    k->facts = compiled->facts;
    r = a.cuModuleLoadData(&k->module, compiled->cubin.data());
  }
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::DriverError,
                "cuModuleLoadData for kernel " + k->key + ": " + base::driver::error_text(r) +
                    (spec.ptx ? " (PTX: the driver JIT-compiles it and must support the PTX version of the NVRTC "
                                "that wrote it; an older driver than that NVRTC refuses it)"
                              : std::string()));
  const std::string entry = spec.entry_name();
  const CUresult r2 = a.cuModuleGetFunction(&k->function, k->module, entry.c_str());
  if (r2 != CUDA_SUCCESS) {
    a.cuModuleUnload(k->module);
    throw Error(ErrorCode::Internal,
                "kernel " + k->key + " has no entry '" + entry + "': " + base::driver::error_text(r2));
  }
  if (spec.ptx) {
    // No ptxas ran here: the facts are the driver's, after its JIT compile.
    int regs = -1, local = 0;
    if (a.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->function) == CUDA_SUCCESS) k->facts.registers = regs;
    if (a.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->function) == CUDA_SUCCESS)
      k->facts.stack_frame_bytes = local;
  }
  // Static shared memory from the loaded function itself (a carveout is planned from it).
  if (int shared = 0; a.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function) == CUDA_SUCCESS)
    k->facts.static_shared_bytes = shared;
  // The dynamic shared memory a launch may use without raising the limit: 48 KiB less the
  // kernel's static shared memory (a kernel with both must raise it sooner).
  int dyn_limit = 0;
  if (a.cuFuncGetAttribute(&dyn_limit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->function) == CUDA_SUCCESS &&
      dyn_limit >= 0)
    k->smem_limit_set.store(static_cast<std::size_t>(dyn_limit), std::memory_order_relaxed);
  if (k->source == KernelSource::DiskCache) counters_.disk_load();
  counters_.loaded();
  k->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  base::log::debug(std::string(k->source == KernelSource::DiskCache ? "loaded from disk cache " : "compiled ") +
             k->key + " in " + std::to_string(k->load_seconds * 1e3) + " ms");
  return k;
}

void launch(LoadedKernel& k, const kernels::LaunchShape& s, void* params, CUstream stream) {
  const auto& a = base::driver::api();
  // Shared memory over L1 in the SM's carveout: kernels planned for several CTAs per SM (the
  // one-warpgroup attention design: 3 × 73 KB) get them only with the largest carveout, which the
  // driver's default choice need not be; a launch shape may ask for it with less (cluster quantize).
  const bool big = s.dynamic_smem > k.smem_limit_set.load(std::memory_order_relaxed);
  if ((big || s.max_shared_carveout || s.planned_ctas_per_sm > 0) && !k.carveout_set.load(std::memory_order_relaxed)) {
    // A planned CTA count: the smallest carveout (percent of the SM's shared memory) that holds
    // that many CTAs, each with 1 KB reserved; the driver rounds up to a configuration it has.
    int percent = CU_SHAREDMEM_CARVEOUT_MAX_SHARED;
    if (!big && !s.max_shared_carveout) {
      const double need = s.planned_ctas_per_sm * (k.facts.static_shared_bytes + static_cast<double>(s.dynamic_smem) + 1024.0);
      percent = std::min(100, static_cast<int>(std::ceil(100.0 * need / k.shared_per_sm)));
    }
    base::driver::check(a.cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent),
                        ("cuFuncSetAttribute(shared memory carveout " + std::to_string(percent) + " %) for " + k.key).c_str());
    k.carveout_set.store(true, std::memory_order_relaxed);
  }
  if (big) {
    base::driver::check(a.cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(s.dynamic_smem)),
                  ("cuFuncSetAttribute(max dynamic smem) for " + k.key).c_str());
    k.smem_limit_set.store(s.dynamic_smem, std::memory_order_relaxed);
  }
  void* args[] = {params};
  CUresult r;
  if (s.cluster_x > 1 || s.overlap_previous) {
    // Thread-block clusters: the cluster size is a launch attribute (one compiled kernel serves
    // every size the plan picks). Overlap with the previous kernel: programmatic stream
    // serialization (the kernel's pdl_wait orders its memory accesses).
    CUlaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (s.cluster_x > 1) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = s.cluster_x;
      attrs[n].value.clusterDim.y = 1;
      attrs[n].value.clusterDim.z = 1;
      ++n;
    }
    if (s.overlap_previous) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    CUlaunchConfig cfg{};
    cfg.gridDimX = s.grid[0];
    cfg.gridDimY = s.grid[1];
    cfg.gridDimZ = s.grid[2];
    cfg.blockDimX = s.block[0];
    cfg.blockDimY = s.block[1];
    cfg.blockDimZ = s.block[2];
    cfg.sharedMemBytes = static_cast<unsigned>(s.dynamic_smem);
    cfg.hStream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = n;
    r = a.cuLaunchKernelEx(&cfg, k.function, args, nullptr);
  } else {
    r = a.cuLaunchKernel(k.function, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2],
                         static_cast<unsigned>(s.dynamic_smem), stream, args, nullptr);
  }
  if (r != CUDA_SUCCESS)
    throw Error(r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::OutOfMemory : ErrorCode::DriverError,
                std::string(s.cluster_x > 1 || s.overlap_previous
                                ? "cuLaunchKernelEx (cluster " + std::to_string(s.cluster_x) +
                                      (s.overlap_previous ? ", overlapping the previous kernel) " : ") ")
                                : "cuLaunchKernel ") + k.key + " grid(" + std::to_string(s.grid[0]) + "," + std::to_string(s.grid[1]) +
                    "," + std::to_string(s.grid[2]) + ") block(" + std::to_string(s.block[0]) + "," +
                    std::to_string(s.block[1]) + "," + std::to_string(s.block[2]) + ") smem " +
                    std::to_string(s.dynamic_smem) + ": " + base::driver::error_text(r));
}

}  // namespace sage2::runtime
