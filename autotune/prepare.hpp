// Preparing the kernels of the tuning candidates: filter, compile (or find in the disk cache),
// store, filter again on the ptxas facts. No driver, no GPU: this is all of --compile-only, and
// the first phase of tuning on a device (whose KernelLoader then finds every kernel on disk).
//
// For every specialisation:
//  1. candidates = the given tiles (default tile_candidates()) plus the heuristic default;
//     static_reject_reason() (spec rules, shared memory) rejects some without compiling;
//  2. the attention kernel of every remaining candidate is loaded from the disk cache or
//     compiled by NVRTC and stored; ptxas_reject_reason() (spills, stack, registers) rejects more;
//  3. the companion kernels (the quantize kernels of the path, ΔS with smooth Q) of the accepted candidates — and of
//     the heuristic default even when it was rejected, since it is what runs untuned — are loaded
//     or compiled and stored.
// Kernels shared by several candidates or specialisations are prepared once. Compiles run on
// `jobs` threads. When *stop becomes true no new compile starts; the ones running finish and are
// stored (each store is atomic), the rest are marked Skipped.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "plan/call_kernels.hpp"
#include "plan/candidates.hpp"
#include "cache/disk_cache.hpp"

namespace sage2::autotune {

enum class CandidateState { Pending, Ok, Rejected, CompileError, Skipped };
const char* candidate_state_name(CandidateState s) noexcept;

struct Candidate {
  kernels::TileConfig tile;
  kernels::KernelSpec spec;        // the attention spec a call with this tile runs (plan::attention_call_spec)
  CandidateState state = CandidateState::Pending;
  std::string reason;          // why rejected / the compile error / why skipped
  jit::PtxasFacts facts;       // of the attention kernel (when compiled or cached)
  bool attention_built = false;  // the attention kernel was compiled or found in the cache
  bool compiled = false;       // ... and its companion kernels too: the candidate can run
  bool heuristic = false;      // the heuristic default of the specialisation
};

struct SpecialisationPlan {
  plan::Specialisation spec;
  bool has_heuristic = false;
  kernels::TileConfig heuristic;
  std::string heuristic_problem;     // why there is none
  std::vector<Candidate> candidates;
  std::size_t count(CandidateState s) const;
  const Candidate* heuristic_candidate() const;
};

struct PrepareProgress {
  const char* phase = "compile";     // "compile" (attention kernels) or "companions"
  std::size_t done = 0, total = 0;   // total may shrink once the attention kernels are filtered
  std::string label;                 // the kernel just finished
};

struct PrepareOptions {
  kernels::Arch arch = kernels::Arch::Sm90a;
  bool ptx = false;                             // PTX kernels (a device the table lacks: KernelSpec::ptx)
  int max_smem_optin = 0;                       // 0: default_max_smem_optin(arch)
  // The quantize path calls take (the Context's ContextOptions::quant_path): the candidates are the
  // kernels calls run — Q quantized in the attention kernel or not (plan/call_kernels.hpp).
  QuantPath quant_path = QuantPath::Auto;
  int jobs = 1;
  std::vector<kernels::TileConfig> tiles;           // empty: tile_candidates(family, arch)
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const PrepareProgress&)> progress;  // serialised; called from worker threads
};

struct PrepareStats {
  std::size_t kernels = 0;          // unique kernels prepared successfully
  std::size_t compiled = 0, from_cache = 0, store_failed = 0, compile_errors = 0, skipped = 0;
  std::vector<std::string> keys;    // their disk cache keys (jit::KernelBuild::key), sorted
  std::vector<std::string> errors;  // "key: message" of every failed compile
  bool interrupted = false;
  double seconds = 0;
};

// The settings a call on `o`'s target has for specialisation `s` (its forced family, if any).
plan::CallSettings call_settings(const PrepareOptions& o, const plan::Specialisation& s);

// Compiles (or finds in the disk cache) and stores every spec of `specs` whose kernel is not in
// `stats.keys` yet, on `options.jobs` threads: the warm-up set (plan/warmup.hpp) after the
// candidates. Adds to `stats`.
void prepare_specs(const std::vector<kernels::KernelSpec>& specs, const cache::DiskCache& cache,
                   const PrepareOptions& options, PrepareStats& stats);

// Step 1 alone (no compile): each specialisation's candidates, their attention specs (what a
// call with that tile runs), the heuristic default and the static filter.
std::vector<SpecialisationPlan> plan_candidates(const std::vector<plan::Specialisation>& specs,
                                                const PrepareOptions& options);

std::vector<SpecialisationPlan> prepare_kernels(const std::vector<plan::Specialisation>& specs,
                                                const cache::DiskCache& cache, const PrepareOptions& options,
                                                PrepareStats& stats);

}  // namespace sage2::autotune
