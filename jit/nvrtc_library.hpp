// libnvrtc loaded with dlopen (the library never links it, so it starts — and says plainly what
// is missing — on machines without it). Search order:
//   $SAGE2_LIBNVRTC, libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so,
//   then SAGE2_BUILD_NVRTC_DIR "/libnvrtc.so" (the toolkit the library was built against).
// Loaded once per process; the handle is never closed.
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

namespace sage2::jit::nvrtc {

struct Api {
  std::string path;  // the library that was loaded
  int major = 0, minor = 0;
  nvrtcResult (*version)(int*, int*) = nullptr;
  const char* (*get_error_string)(nvrtcResult) = nullptr;
  nvrtcResult (*create_program)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                const char* const*) = nullptr;
  nvrtcResult (*destroy_program)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compile_program)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*get_program_log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_program_log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_ptx)(nvrtcProgram, char*) = nullptr;
};

// The libraries tried, in order ($SAGE2_LIBNVRTC first when set, the build toolkit's last).
std::vector<std::string> default_candidates();

struct LoadAttempt {
  bool ok = false;
  Api api;
  std::string tried;  // one line per library that failed, and why
};
// Tries `candidates` in order; the first usable one wins (the others stay closed).
LoadAttempt load_from(const std::vector<std::string>& candidates);

// The loaded API (default_candidates(), once per process); throws Error(NvrtcMissing) naming
// every library tried and why it failed.
const Api& api();
// nullptr when NVRTC cannot be loaded (never throws).
const Api* try_api() noexcept;

}  // namespace sage2::jit::nvrtc
