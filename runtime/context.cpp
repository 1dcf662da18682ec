#include <utility>

#include "plan/planner.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/direct_stage.hpp"
#include "base/log.hpp"

namespace sage2 {

Context::Impl::Impl(int device, const ContextOptions& options)
    : config_(base::config::context_config(options)), options_(base::config::to_options(config_)) {
  const auto& a = base::driver::api();
  facts_ = runtime::device_facts(device);
  const kernels::CodeTarget target = runtime::context_target(facts_, config_.target_arch);
  arch_ = target.arch;
  ptx_ = target.ptx;
  if (!target.note.empty()) {
    // one line per process and device: a GPU newer than the table or an old NVRTC (a warning),
    // or the target the caller asked for (information)
    const std::string line = "device " + std::to_string(device) + " (" + facts_.name + ", " + facts_.cc_string() +
                             "): " + target.note;
    if (config_.target_arch.empty())
      base::log::warn_once("target:" + line, line);
    else
      base::log::info(line);
  }
  // Before the primary context is retained: a refused family must leave nothing to release.
  family_override_ = runtime::attention_family_override(config_.family, facts_, arch_);
  if (config_.quant_path == QuantPath::Cluster && arch_ != kernels::Arch::Sm90a)
    throw Error(ErrorCode::Unsupported, "quantize path cluster (ContextOptions::quant_path or SAGE2_QUANT_PATH) needs "
                                        "thread-block clusters (sm_90a); device " + std::to_string(facts_.ordinal) +
                                            " (" + facts_.name + ") is " + kernels::arch_name(arch_));
  base::driver::check(a.cuDeviceGet(&dev_, device), "cuDeviceGet");
  // Prefer the caller's current context on this device (framework interop).
  CUcontext cur = nullptr;
  base::driver::check(a.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  CUdevice cur_dev = -1;
  if (cur && a.cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS && cur_dev == dev_) {
    ctx_ = cur;
  } else {
    base::driver::check(a.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    owns_primary_ = true;
  }
  const cache::Trust trust{config_.cache_trust_root, std::nullopt};
  loader_ = std::make_unique<runtime::KernelLoader>(
      ctx_, arch_, cache::DiskCache(config_.cache_dir, !config_.disk_cache, trust), ptx_);
  workspace_ = std::make_unique<runtime::WorkspacePool>(ctx_);
  // The tuning database lives beside the cubin cache; without a disk cache (or with tuning off)
  // every call uses the heuristic default.
  planner_ = plan::shared_planner(plan::context_db_path(config_, facts_.name, arch_), facts_.name, arch_,
                                      facts_.max_shared_per_block_optin);
  info.ordinal = device;
  info.name = facts_.name;
  info.arch = kernels::arch_name(arch_);
  info.ptx = ptx_;
  info.path = kernels::arch_path(arch_);
  info.target_note = target.note;
  info.sm_count = facts_.sm_count;
  info.total_memory = facts_.total_memory;
}

plan::CallSettings Context::Impl::call_settings() const {
  plan::CallSettings s;
  s.arch = arch_;
  s.ptx = ptx_;
  s.device = runtime::direct_device(facts_);
  s.quant_path = config_.quant_path;
  s.family = family_override_;
  s.planner = planner_.get();
  return s;
}

Context::Impl::~Impl() {
  background_.join_all();  // its tasks use the loader and the call cache
  workspace_.reset();  // frees device memory and unloads modules while the context is alive
  loader_.reset();
  if (owns_primary_ && base::driver::available()) base::driver::api().cuDevicePrimaryCtxRelease_v2(dev_);
}

Context::Context(int device, ContextOptions options) : impl_(new Impl(device, options)) {}
Context::~Context() { delete impl_; }
Context::Context(Context&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    delete impl_;
    impl_ = std::exchange(o.impl_, nullptr);
  }
  return *this;
}
const DeviceInfo& Context::device() const { return impl_->info; }
const ContextOptions& Context::options() const { return impl_->options(); }
KernelStats Context::kernel_stats() const noexcept { return impl_->kernels().stats(); }
const std::string& Context::cache_dir() const {
  static const std::string none;
  const auto& d = impl_->kernels().disk();
  return d.disabled() ? none : d.dir();
}

int device_count() noexcept {
  try {
    return runtime::device_count();
  } catch (...) {
    return 0;
  }
}

VersionInfo version_info() {
  VersionInfo v;
  v.library = SAGE2_VERSION;
  auto [maj, min] = jit::nvrtc_version();
  v.nvrtc_major = maj;
  v.nvrtc_minor = min;
  if (base::driver::available()) base::driver::api().cuDriverGetVersion(&v.driver_version);
  return v;
}

}  // namespace sage2
