#include "base/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "base/config.hpp"
#include "sage2/sage2.hpp"

namespace sage2::base::driver {
namespace {

struct Loaded {
  Api api;
  bool ok = false;
  ErrorCode code = ErrorCode::NoDriver;
  std::string reason;
};

Loaded load() {
  Loaded l;
  const std::string lib = base::config::process_config().libcuda;
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.reason = "no CUDA driver found: could not load " + lib + " (" + (e ? e : "unknown") +
               "); install the NVIDIA driver or set SAGE2_LIBCUDA";
    return l;
  }
  std::string missing;
#define SAGE2_DRIVER_RESOLVE(name)                                        \
  l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));      \
  if (!l.api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SAGE2_DRIVER_FUNCTIONS(SAGE2_DRIVER_RESOLVE)
#undef SAGE2_DRIVER_RESOLVE
  if (!missing.empty()) {
    l.reason = lib + " is too old: missing " + missing;
    return l;
  }
  const CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.api.cuGetErrorName(r, &name);
    l.code = ErrorCode::DriverError;
    l.reason = std::string("cuInit failed: ") + (name ? name : "?") + " (no usable GPU?)";
    return l;
  }
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.ok) throw Error(l.code, l.reason);
  return l.api;
}

bool available() noexcept { return loaded().ok; }
std::string unavailable_reason() { return loaded().ok ? std::string() : loaded().reason; }

std::string error_text(CUresult r) {
  const Api& a = loaded().api;
  const char* name = nullptr;
  const char* text = nullptr;
  if (a.cuGetErrorName) a.cuGetErrorName(r, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA_ERROR_?") + " (" + (text ? text : "no description") + ")";
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const ErrorCode code = r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::OutOfMemory : ErrorCode::DriverError;
  throw Error(code, std::string(what) + ": " + error_text(r));
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const Api& a = api();
  CUcontext cur = nullptr;
  check(a.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur != ctx) {
    check(a.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    api().cuCtxPopCurrent_v2(&popped);
  }
}

}  // namespace sage2::base::driver
