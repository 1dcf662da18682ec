#include "autotune_report.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "plan/candidates.hpp"

namespace sage2::autotune_tool {

std::string nvrtc_string() { return jit::Toolchain::current().nvrtc_str(); }

json facts_json(const jit::PtxasFacts& f) {
  return json{{"registers", f.registers},
              {"spill_store_bytes", f.spill_store_bytes},
              {"spill_load_bytes", f.spill_load_bytes},
              {"stack_frame_bytes", f.stack_frame_bytes}};
}

json plan_json(const autotune::SpecialisationPlan& p) {
  json j = {{"name", p.spec.str()},
            {"family", p.spec.family ? json(kernels::family_name(*p.spec.family)) : json("auto")},
            {"head_dim", p.spec.head_dim},
            {"causal", causal_mode_name(p.spec.causal)},
            {"dtype", dtype_name(p.spec.dtype)},
            {"qk_bits", p.spec.qk_bits},
            {"smooth_q", p.spec.smooth_q},
            {"smooth_k", p.spec.smooth_k},
            {"smooth_v", p.spec.smooth_v},
            {"return_lse", p.spec.return_lse},
            {"pv", p.spec.pv_fp16 ? "fp16" : "fp8"},
            {"heuristic", p.has_heuristic ? json(plan::tile_str(p.heuristic)) : json(nullptr)},
            {"ok", p.count(autotune::CandidateState::Ok)},
            {"rejected", p.count(autotune::CandidateState::Rejected)},
            {"compile_errors", p.count(autotune::CandidateState::CompileError)},
            {"skipped", p.count(autotune::CandidateState::Skipped)},
            {"candidates", json::array()}};
  if (!p.has_heuristic) j["heuristic_problem"] = p.heuristic_problem;
  for (const auto& c : p.candidates) {
    json cj = {{"tile", plan::tile_str(c.tile)},
               {"state", autotune::candidate_state_name(c.state)},
               {"heuristic", c.heuristic}};
    if (!c.reason.empty()) cj["reason"] = c.reason;
    if (c.attention_built) cj["ptxas"] = facts_json(c.facts);
    j["candidates"].push_back(cj);
  }
  return j;
}

json stats_json(const autotune::PrepareStats& s) {
  return json{{"prepared", s.kernels},     {"compiled", s.compiled},         {"from_cache", s.from_cache},
              {"store_failed", s.store_failed}, {"compile_errors", s.compile_errors}, {"skipped", s.skipped},
              {"seconds", s.seconds},      {"keys", s.keys},                 {"errors", s.errors}};
}

void print_plans(const std::vector<autotune::SpecialisationPlan>& plans, bool verbose) {
  std::printf("%-30s %6s %4s %8s %6s  %s\n", "specialisation", "tiles", "ok", "rejected", "errors", "heuristic default");
  for (const auto& p : plans) {
    std::printf("%-30s %6zu %4zu %8zu %6zu  %s\n", p.spec.str().c_str(), p.candidates.size(),
                p.count(autotune::CandidateState::Ok), p.count(autotune::CandidateState::Rejected),
                p.count(autotune::CandidateState::CompileError),
                p.has_heuristic ? plan::tile_str(p.heuristic).c_str() : p.heuristic_problem.c_str());
    if (!verbose) continue;
    for (const auto& c : p.candidates) {
      std::string extra;
      if (c.attention_built) extra = " regs " + std::to_string(c.facts.registers);
      std::printf("    %-18s %-13s%s%s%s\n", plan::tile_str(c.tile).c_str(), autotune::candidate_state_name(c.state),
                  c.heuristic ? " (heuristic)" : "", extra.c_str(), c.reason.empty() ? "" : ("  " + c.reason).c_str());
    }
  }
}

void print_stats(const autotune::PrepareStats& s) {
  std::printf("kernels: %zu ready (%zu compiled, %zu already cached)", s.kernels, s.compiled, s.from_cache);
  if (s.compile_errors) std::printf(", %zu failed to compile", s.compile_errors);
  if (s.store_failed) std::printf(", %zu not written to the cache", s.store_failed);
  if (s.skipped) std::printf(", %zu skipped (interrupted)", s.skipped);
  std::printf("; %.1f s\n", s.seconds);
  for (const auto& e : s.errors) std::printf("compile error: %s\n", e.c_str());
}

json timing_json(const autotune::Timed& t) {
  json j = {{"tile", plan::tile_str(t.c.tile)}, {"ok", t.r.ok}, {"ms", t.r.ms}, {"tops", t.r.tops},
            {"reps", t.r.reps}, {"stopped_early", t.r.stopped_early}, {"heuristic", t.c.heuristic},
            {"eligible", t.c.state == autotune::CandidateState::Ok}};
  if (!std::isnan(t.r.agreement)) j["agreement"] = t.r.agreement;
  if (!t.r.problem.empty()) j["problem"] = t.r.problem;
  return j;
}

json warmup_json(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch) {
  return json{{"selection", w.describe()},
              {"arch", kernels::arch_name(arch)},
              {"combinations", r.set.combinations},
              {"kernels", r.set.specs.size()},
              {"left_out", r.set.left_out},
              {"compiled", r.stats.compiled},
              {"from_cache", r.stats.from_cache},
              {"compile_errors", r.stats.compile_errors}};
}

void print_warmup(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch) {
  std::printf("warm-up for %s: %zu kernels cover every call with %s\n", kernels::arch_name(arch), r.set.specs.size(),
              w.describe().c_str());
  for (const auto& why : r.set.left_out) std::printf("  not covered (nothing runs it on %s): %s\n", kernels::arch_name(arch), why.c_str());
}

bool emit_report(const Options& o, const json& j) {
  const std::string text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (o.json) std::cout << text << std::flush;
  if (o.report.empty()) return true;
  std::FILE* f = std::fopen(o.report.c_str(), "w");
  const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) return false;
  if (!ok) std::fprintf(stderr, "sage2-autotune: cannot write the report to %s\n", o.report.c_str());
  return ok;
}

}  // namespace sage2::autotune_tool
