// Internals of sage2::Context (used by the API implementation, tools, benchmarks and tests).
#pragma once

#include <memory>
#include <optional>

#include "base/config.hpp"
#include "plan/call_kernels.hpp"
#include "runtime/background_compiles.hpp"
#include "runtime/call_cache.hpp"
#include "runtime/device.hpp"
#include "runtime/kernel_loader.hpp"
#include "runtime/workspace_pool.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {
class Planner;  // plan/planner.hpp: tuning-database lookups, memoised per problem signature
}

namespace sage2::runtime {
struct CallPlan;  // runtime/call_plan.hpp: one cached attention call plan
}

namespace sage2 {

class Context::Impl {
 public:
  Impl(int device, const ContextOptions& options);
  ~Impl();

  CUcontext cu_context() const { return ctx_; }
  const runtime::DeviceFacts& facts() const { return facts_; }
  kernels::Arch arch() const { return arch_; }    // the code target's arch (the path the calls get)
  bool ptx() const { return ptx_; }          // kernels are PTX, JIT-compiled by the driver
  runtime::KernelLoader& kernels() { return *loader_; }
  runtime::WorkspacePool& workspace() { return *workspace_; }
  plan::Planner& planner() const { return *planner_; }
  // The Context's settings, decided at construction (ContextOptions, else the environment).
  const base::config::ContextConfig& config() const { return config_; }
  const ContextOptions& options() const { return options_; }  // the same, as public options
  // config().family as a kernel family: nullopt for Auto (each call uses
  // kernels::default_attention_family()).
  std::optional<kernels::KernelFamily> family_override() const { return family_override_; }
  // Attention call plans by shape signature (runtime/call_plan.hpp).
  runtime::CallCache<runtime::CallPlan>& call_cache() { return call_cache_; }
  // The tiered compile's background builds (runtime/call_plan.hpp call_plan); joined first when
  // the Context is destroyed.
  runtime::BackgroundCompiles& background() { return background_; }
  // What this Context contributes to the kernels of its calls (plan/call_kernels.hpp): the one
  // input, besides a call's problem, of its plans and of its warm-ups.
  plan::CallSettings call_settings() const;
  DeviceInfo info;

 private:
  base::config::ContextConfig config_;
  ContextOptions options_;
  runtime::DeviceFacts facts_;
  kernels::Arch arch_;
  bool ptx_ = false;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  bool owns_primary_ = false;
  std::unique_ptr<runtime::KernelLoader> loader_;
  std::unique_ptr<runtime::WorkspacePool> workspace_;
  std::optional<kernels::KernelFamily> family_override_;
  std::shared_ptr<plan::Planner> planner_;  // shared by the Contexts of one device + cache dir
  runtime::CallCache<runtime::CallPlan> call_cache_;
  runtime::BackgroundCompiles background_;
};

}  // namespace sage2

namespace sage2::runtime {

// The way in to a Context's internals; Context befriends this class, so the public header need
// not expose them.
class ContextAccess {
 public:
  static Context::Impl& impl(Context& c) { return *c.impl_; }
  static const Context::Impl& impl(const Context& c) { return *c.impl_; }
};

inline Context::Impl& context_impl(Context& c) { return ContextAccess::impl(c); }
inline const Context::Impl& context_impl(const Context& c) { return ContextAccess::impl(c); }

}  // namespace sage2::runtime
