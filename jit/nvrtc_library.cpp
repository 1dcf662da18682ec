#include "jit/nvrtc_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <vector>

#include "base/config.hpp"
#include "base/dynlib.hpp"
#include "base/log.hpp"
#include "sage2/sage2.hpp"

#ifndef SAGE2_BUILD_NVRTC_DIR
#define SAGE2_BUILD_NVRTC_DIR ""
#endif

namespace sage2::jit::nvrtc {
namespace {

// Candidates added before the first load (the Python binding's NVIDIA-wheel paths). `searched`
// turns further additions away: the search runs once per process and is never redone.
std::mutex g_mutex;
std::vector<Candidate> g_added;
bool g_searched = false;

// Loads libnvrtc-builtins.so.<major>.<minor> from the directory of `file` (or of the file it links
// to) when it is there; returns its path, "" otherwise. Never closed, like libnvrtc.
std::string preload_builtins(const std::string& file, int major, int minor) {
  if (file.find('/') == std::string::npos) return "";
  const std::string name = "libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
  std::error_code ec;
  std::vector<std::filesystem::path> dirs{std::filesystem::path(file).parent_path()};
  const auto real = std::filesystem::canonical(file, ec);
  if (!ec && real.parent_path() != dirs[0]) dirs.push_back(real.parent_path());
  for (const auto& d : dirs) {
    const std::string p = (d / name).string();
    if (!std::filesystem::exists(p, ec)) continue;
    if (dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return p;
    base::log::warn("NVRTC builtins " + p + " beside " + file + " could not be loaded: " + dlerror());
  }
  return "";
}

// The file the dynamic linker mapped for handle `h` (a bare soname resolves to its full path).
std::string mapped_file(void* h, const std::string& fallback) {
  link_map* lm = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) return lm->l_name;
  return fallback;
}
}  // namespace

bool add_candidate(const std::string& path, const std::string& rule) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_searched || path.empty()) return false;
  const bool dup = std::any_of(g_added.begin(), g_added.end(), [&](const Candidate& c) { return c.path == path; });
  if (!dup) g_added.emplace_back(path, rule);
  return true;
}

std::vector<Candidate> default_candidates() {
  std::vector<Candidate> candidates;
  if (auto p = base::config::process_config().libnvrtc; !p.empty()) candidates.emplace_back(p, "$SAGE2_LIBNVRTC");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    candidates.insert(candidates.end(), g_added.begin(), g_added.end());
  }
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    candidates.emplace_back(name, "system library name, found by the dynamic linker");
  if (std::string(SAGE2_BUILD_NVRTC_DIR).size() > 0)
    candidates.emplace_back(std::string(SAGE2_BUILD_NVRTC_DIR) + "/libnvrtc.so", "toolkit sage2 was built with");
  return candidates;
}

LoadAttempt load_from(const std::vector<Candidate>& candidates) {
  LoadAttempt r;
  for (const auto& cand : candidates) {
    const std::string c = cand.path + " (" + cand.rule + ")";  // as the failure lines name it
    dlerror();
    void* h = dlopen(cand.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      r.tried += "\n  " + c + ": " + (e ? e : "dlopen failed");
      continue;
    }
    Api a;
    a.path = cand.path;
    a.rule = cand.rule;
    a.file = mapped_file(h, cand.path);
    using base::dynlib::symbol;
    const std::string missing = base::dynlib::resolve(
        h, symbol("nvrtcVersion", a.version), symbol("nvrtcGetErrorString", a.get_error_string),
        symbol("nvrtcCreateProgram", a.create_program), symbol("nvrtcDestroyProgram", a.destroy_program),
        symbol("nvrtcCompileProgram", a.compile_program), symbol("nvrtcGetProgramLogSize", a.get_program_log_size),
        symbol("nvrtcGetProgramLog", a.get_program_log), symbol("nvrtcGetCUBINSize", a.get_cubin_size),
        symbol("nvrtcGetCUBIN", a.get_cubin), symbol("nvrtcGetPTXSize", a.get_ptx_size),
        symbol("nvrtcGetPTX", a.get_ptx));
    // Optional: nvrtcGetSupportedArchs came with CUDA 11.2; both or neither.
    if (!base::dynlib::resolve(h, symbol("nvrtcGetNumSupportedArchs", a.get_num_supported_archs),
                               symbol("nvrtcGetSupportedArchs", a.get_supported_archs))
             .empty())
      a.get_num_supported_archs = nullptr, a.get_supported_archs = nullptr;
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
    a.builtins = preload_builtins(a.file, a.major, a.minor);
    r.api = a;
    r.ok = true;
    base::log::debug("loaded NVRTC " + std::to_string(a.major) + "." + std::to_string(a.minor) + " from " + a.file +
               " (" + a.rule + ")");
    return r;
  }
  return r;
}

const LoadAttempt& attempt() {
  static const LoadAttempt r = [] {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_searched = true;
    }
    return load_from(default_candidates());
  }();
  return r;
}

const Api& api() {
  const LoadAttempt& r = attempt();
  if (!r.ok)
    throw Error(ErrorCode::NvrtcMissing,
                "libnvrtc could not be loaded (set SAGE2_LIBNVRTC to its path, or install a CUDA toolkit or "
                "torch's NVIDIA wheels); tried, in order:" + r.tried);
  return r.api;
}

const Api* try_api() noexcept {
  try {
    const LoadAttempt& r = attempt();
    return r.ok ? &r.api : nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace sage2::jit::nvrtc
