// libnvrtc loaded with dlopen (the library never links it, so it starts — and says plainly what
// is missing — on machines without it). Search order, each candidate with the rule that put it
// there (shown by sage2-info, `python -m sage2 info` and the NvrtcMissing error):
//   1. $SAGE2_LIBNVRTC;
//   2. candidates added with add_candidate() before the first load — the Python binding adds the
//      NVIDIA wheels next to the running torch (nvidia/cu13/lib/libnvrtc.so.13,
//      nvidia/cuda_nvrtc/lib/libnvrtc.so.12), since a pip-installed torch brings its own NVRTC;
//   3. the system's names libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so (dynamic linker search);
//   4. SAGE2_BUILD_NVRTC_DIR "/libnvrtc.so" (the toolkit the library was built against).
// A candidate that fails is recorded and the next one tried. Loaded once per process; the
// handle is never closed. NVRTC opens libnvrtc-builtins.so.<major>.<minor> by bare name, which the
// dynamic linker would not look for beside a wheel's libnvrtc (or would take from another CUDA
// version's toolkit): when that file is beside the loaded libnvrtc, it is loaded first, so that
// NVRTC's own lookup finds it already loaded.
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

namespace sage2::jit::nvrtc {

struct Api {
  std::string path;  // the candidate that was loaded, as given to dlopen
  std::string file;  // the file the dynamic linker mapped for it (absolute when known)
  std::string rule;  // why it was tried (the search rule that produced the candidate)
  std::string builtins;  // libnvrtc-builtins preloaded from beside `file` ("" when not)
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
  // Optional (null when the library lacks them): the real architectures it compiles for.
  nvrtcResult (*get_num_supported_archs)(int*) = nullptr;
  nvrtcResult (*get_supported_archs)(int*) = nullptr;
};

struct Candidate {
  std::string path;  // a file path or a bare soname for the dynamic linker to search
  std::string rule;
  Candidate(std::string p, std::string r = "given") : path(std::move(p)), rule(std::move(r)) {}
  Candidate(const char* p) : Candidate(std::string(p)) {}
};

// Adds a candidate after $SAGE2_LIBNVRTC and the ones added before it, ahead of the system's
// names. Returns false (and adds nothing) once NVRTC has been loaded or the search has run.
bool add_candidate(const std::string& path, const std::string& rule);

// The candidates tried, in the order above.
std::vector<Candidate> default_candidates();

struct LoadAttempt {
  bool ok = false;
  Api api;
  std::string tried;  // one line per candidate that failed ("\n  path (rule): why")
};
// Tries `candidates` in order; the first usable one wins (the others stay closed).
LoadAttempt load_from(const std::vector<Candidate>& candidates);

// The process's search (default_candidates(), run once at the first use).
const LoadAttempt& attempt();
// The loaded API; throws Error(NvrtcMissing) naming every candidate tried and why it failed.
const Api& api();
// nullptr when NVRTC cannot be loaded (never throws).
const Api* try_api() noexcept;

}  // namespace sage2::jit::nvrtc
