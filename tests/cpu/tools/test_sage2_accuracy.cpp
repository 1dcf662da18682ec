// Specification: sage2-accuracy runs the study on small sizes, writes JSON with the exact command,
// one row per configuration, the emulation with every approximation off matching exact attention,
// and answers bad arguments with exit code 2 and a message naming the option.
// (The binary comes from the tools build; tests/CMakeLists.txt should list it as a dependency of
// sage2_cpu_tests like sage2-cache — until then build it first: --target sage2-accuracy.)
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include <doctest/doctest.h>

#include "test_support.hpp"

namespace {

using Run = sage2::test::CommandResult;

Run run_accuracy(const std::string& args, bool merge_stderr) {
  return sage2::test::run_command("'" + std::string(SAGE2_TOOLS_DIR) + "/sage2-accuracy' " + args +
                                  (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

}  // namespace

TEST_CASE("reference tool: sage2-accuracy --json - on a small GQA causal problem") {
  const std::string args = "--seed 3 --heads 2 --kv-heads 1 --q-len 90 --kv-len 70 --head-dim 40 --causal bottom-right --only sanity --threads 2 --json -";
  const Run r = run_accuracy(args, false);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["command"] == "sage2-accuracy " + args);
  CHECK(j["inputs"]["kv_heads"] == 1);
  CHECK(j["inputs"]["causal"] == "bottom_right");
  REQUIRE(j["results"].size() == 5u);
  const auto& exact = j["results"][0];
  CHECK(exact["name"] == "exact QK, f32 P/V, fp32 acc");
  CHECK(exact["rel_l1"].get<double>() < 1e-6);
  CHECK(exact["cos_sim"].get<double>() > 1 - 1e-9);
  CHECK(exact["lse_max_abs"].get<double>() < 1e-4);
  for (const auto& row : j["results"]) {
    CHECK(row["section"] == "sanity");
    CHECK(row["cos_sim"].get<double>() > 0.9);
  }
  // each approximation alone costs something
  for (std::size_t i = 1; i < j["results"].size(); ++i) CHECK(j["results"][i]["rel_l1"].get<double>() > 1e-5);
}

TEST_CASE("reference tool: text output has every section of the study") {
  const Run r = run_accuracy("--q-len 64 --heads 1 --head-dim 32 --threads 1", true);
  REQUIRE(r.code == 0);
  for (const char* s : {"## smoothing", "## granularity", "## pv", "## accumulator", "## hopper", "## onepass",
                        "## sanity", "Smooth Q+K", "per-thread", "E4M3", "fp22 acc, two-level", "wgmma int8",
                        "L1 x today"})
    CHECK(r.out.find(s) != std::string::npos);
}

TEST_CASE("reference tool: --only onepass follows each family's today row with its one-pass and sampled rows") {
  const Run r = run_accuracy("--q-len 200 --heads 1 --head-dim 32 --inputs student-t --only onepass --threads 1 --json -", false);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["inputs"]["inputs"] == "student-t");
  REQUIRE(j["results"].size() == 15u);
  for (std::size_t i = 0; i < 15; i += 3) {
    const auto& today = j["results"][i];
    const auto& one = j["results"][i + 1];
    const auto& sampled = j["results"][i + 2];
    CHECK(today["kv_tile_statistics"] == false);
    CHECK(today["sample_statistics"] == false);
    CHECK(one["kv_tile_statistics"] == true);
    CHECK(sampled["sample_statistics"] == true);
    for (const auto* x : {&one, &sampled}) {
      CHECK((*x)["baseline"] == today["name"]);
      CHECK((*x)["rel_l1_vs_baseline"].get<double>() ==
            doctest::Approx((*x)["rel_l1"].get<double>() / today["rel_l1"].get<double>()));
    }
  }
}

TEST_CASE("reference tool: usage errors exit 2 and name the option") {
  struct Case {
    const char* args;
    const char* needle;
  } cases[] = {{"--head-dim 0", "--head-dim"},
               {"--heads 3 --kv-heads 2", "--kv-heads 2"},
               {"--causal sideways", "--causal"},
               {"--inputs cauchy", "--inputs"},
               {"--only tables", "--only"},
               {"--frobnicate 1", "--frobnicate"},
               {"--seed", "--seed"}};
  for (const auto& c : cases) {
    const Run r = run_accuracy(c.args, true);
    CAPTURE(c.args);
    CHECK(r.code == 2);
    CHECK(r.out.find(c.needle) != std::string::npos);
  }
}
