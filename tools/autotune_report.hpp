// sage2-autotune's reports: the JSON report (--json, --report FILE) and the printed tables of what
// was compiled, tuned and warmed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autotune/prepare.hpp"
#include "autotune/timing.hpp"
#include "autotune/tune.hpp"
#include "autotune/warmup.hpp"
#include "autotune_cli.hpp"
#include "jit/compiler.hpp"

namespace sage2::autotune_tool {

using nlohmann::json;

std::string nvrtc_string();  // the NVRTC of the tuning entries' CodeIdentity
json facts_json(const jit::PtxasFacts& f);
json plan_json(const autotune::SpecialisationPlan& p);
json stats_json(const autotune::PrepareStats& s);
void print_plans(const std::vector<autotune::SpecialisationPlan>& plans, bool verbose);
void print_stats(const autotune::PrepareStats& s);
json timing_json(const autotune::Timed& t);
// What the warm-up covers, for the report and the table: the selection, the archs, the kernels.
json warmup_json(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch);
void print_warmup(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch);
// Writes the JSON report to stdout (--json) and/or to --report FILE. Returns false when the
// file could not be written.
bool emit_report(const Options& o, const json& j);

}  // namespace sage2::autotune_tool
