#include "jit/nvrtc_library.hpp"

#include <dlfcn.h>

#include <vector>

#include "runtime/config.hpp"
#include "runtime/log.hpp"
#include "sage2/sage2.hpp"

#ifndef SAGE2_BUILD_NVRTC_DIR
#define SAGE2_BUILD_NVRTC_DIR ""
#endif

namespace sage2::jit::nvrtc {
namespace {

template <typename F>
bool resolve(void* h, const char* name, F& fn, std::string& missing) {
  void* sym = dlsym(h, name);
  if (!sym) {
    missing += missing.empty() ? name : std::string(", ") + name;
    return false;
  }
  fn = reinterpret_cast<F>(sym);
  return true;
}

}  // namespace

std::vector<std::string> default_candidates() {
  std::vector<std::string> candidates;
  if (auto p = config::process_config().libnvrtc; !p.empty()) candidates.push_back(p);
  candidates.insert(candidates.end(), {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  if (std::string(SAGE2_BUILD_NVRTC_DIR).size() > 0)
    candidates.push_back(std::string(SAGE2_BUILD_NVRTC_DIR) + "/libnvrtc.so");
  return candidates;
}

LoadAttempt load_from(const std::vector<std::string>& candidates) {
  LoadAttempt r;
  for (const auto& c : candidates) {
    dlerror();
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      r.tried += "\n  " + c + ": " + (e ? e : "dlopen failed");
      continue;
    }
    Api a;
    a.path = c;
    std::string missing;
    resolve(h, "nvrtcVersion", a.version, missing);
    resolve(h, "nvrtcGetErrorString", a.get_error_string, missing);
    resolve(h, "nvrtcCreateProgram", a.create_program, missing);
    resolve(h, "nvrtcDestroyProgram", a.destroy_program, missing);
    resolve(h, "nvrtcCompileProgram", a.compile_program, missing);
    resolve(h, "nvrtcGetProgramLogSize", a.get_program_log_size, missing);
    resolve(h, "nvrtcGetProgramLog", a.get_program_log, missing);
    resolve(h, "nvrtcGetCUBINSize", a.get_cubin_size, missing);
    resolve(h, "nvrtcGetCUBIN", a.get_cubin, missing);
    resolve(h, "nvrtcGetPTXSize", a.get_ptx_size, missing);
    resolve(h, "nvrtcGetPTX", a.get_ptx, missing);
    if (!missing.empty()) {
      r.tried += "\n  " + c + ": loaded but lacks " + missing;
      dlclose(h);
      continue;
    }
    if (a.version(&a.major, &a.minor) != NVRTC_SUCCESS) {
      r.tried += "\n  " + c + ": nvrtcVersion failed";
      dlclose(h);
      continue;
    }
    if (a.major < 12) {
      r.tried += "\n  " + c + ": NVRTC " + std::to_string(a.major) + "." + std::to_string(a.minor) +
                   " is too old (sage2 needs 12.0 or newer for sm_90a)";
      dlclose(h);
      continue;
    }
    r.api = a;
    r.ok = true;
    log::debug("loaded NVRTC " + std::to_string(a.major) + "." + std::to_string(a.minor) + " from " + c);
    return r;
  }
  return r;
}

namespace {
const LoadAttempt& loaded() {
  static const LoadAttempt r = load_from(default_candidates());
  return r;
}
}  // namespace

const Api& api() {
  const LoadAttempt& r = loaded();
  if (!r.ok)
    throw Error(ErrorCode::NvrtcMissing,
                "libnvrtc could not be loaded (set SAGE2_LIBNVRTC to its path); tried:" + r.tried);
  return r.api;
}

const Api* try_api() noexcept {
  try {
    const LoadAttempt& r = loaded();
    return r.ok ? &r.api : nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace sage2::jit::nvrtc
