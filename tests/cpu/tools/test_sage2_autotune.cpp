// Specification (CPU / CI): the sage2-autotune program.
//  - --help documents the exit codes; usage errors exit 2; tuning without a driver exits 3;
//  - --arch sm_90a --compile-only fills a cache directory with exactly the kernels of the
//    candidates that pass the filters (attention + quantize, ΔS with smooth Q), verified through
//    `sage2-cache list --json`; a second run compiles nothing; --json reports it all;
//  - Ctrl-C (SIGINT) during --compile-only finishes the compile in progress, leaves only valid
//    entries and no temporary files, and exits 130;
//  - --arch takes every arch of the table and a list of them (one cache for a mixed fleet, one
//    exported bundle holding every arch); --pv selects the P̃V precision; INT4 is skipped on
//    Blackwell and FP8 on Ampere.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "autotune/prepare.hpp"
#include "plan/call_kernels.hpp"
#include "plan/attention_spec.hpp"
#include "plan/warmup.hpp"

#include "kernels/attention_family.hpp"
#include "plan/candidates.hpp"
#include "plan/tuning_db.hpp"
#include "cache/disk_cache.hpp"

using namespace sage2;
using nlohmann::json;

namespace {

struct ToolDir {
  std::string path;
  ToolDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-autotune-tool-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~ToolDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& n) const { return path + "/" + n; }
};

std::string tools_dir() { return SAGE2_TOOLS_DIR; }

struct Ran {
  int code = -1;
  std::string out, err;
};

// Runs a tool with stdout and stderr captured separately; `env` is prepended to the command.
Ran run(const std::string& tool, const std::string& args, const std::string& env = "") {
  ToolDir io;
  const std::string cmd = env + (env.empty() ? "" : " ") + "'" + tools_dir() + "/" + tool + "' " + args + " >'" +
                          io.path + "/out' 2>'" + io.path + "/err'";
  const int status = std::system(cmd.c_str());
  Ran r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(io.path + "/out"), e(io.path + "/err");
  r.out.assign(std::istreambuf_iterator<char>(o), std::istreambuf_iterator<char>());
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> v;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") v.push_back(n);
    }
    ::closedir(d);
  }
  return v;
}

std::size_t count_entries(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& f : names(dir)) n += f.size() == 20 && f.substr(16) == ".s2c";
  return n;
}

// The kernels --compile-only must produce for one specialisation and a list of tiles (plus the
// heuristic default), given which attention kernels pass the filters (computed here from the
// tool's own JSON report of the ptxas facts, checked against the filter separately), and then the
// warm-up set of the selection (`warm`: plan/warmup.hpp, on sm_90a's settings).
std::set<std::string> expected_keys(const json& report, const plan::WarmupSelection& warm) {
  std::set<std::string> keys;
  for (const auto& sp : report["specialisations"]) {
    plan::Specialisation s;
    s.head_dim = sp["head_dim"];
    s.causal = sp["causal"] == "none" ? CausalMode::None : sp["causal"] == "top_left" ? CausalMode::TopLeft
                                                                                     : CausalMode::BottomRight;
    s.dtype = sp["dtype"] == "f16" ? DType::F16 : DType::BF16;
    s.qk_bits = sp["qk_bits"];
    s.smooth_q = sp["smooth_q"];
    s.smooth_k = sp["smooth_k"];
    s.smooth_v = sp["smooth_v"];
    s.return_lse = sp["return_lse"];
    s.family = kernels::parse_attention_family(sp["family"].get<std::string>());
    REQUIRE(s.family);
    for (const auto& c : sp["candidates"]) {
      const auto tile = plan::parse_tile(c["tile"].get<std::string>());
      REQUIRE(tile);
      autotune::PrepareOptions o;  // sm_90a, the default quantize path: what calls run
      const kernels::KernelSpec spec = plan::attention_call_spec(s.problem(), autotune::call_settings(o, s), *tile);
      if (c.contains("ptxas")) keys.insert(jit::make_build(spec).key);  // compiled (accepted or not)
      if (c["state"] == "ok" || (c["heuristic"] == true && c.contains("ptxas")))
        for (const auto& k : plan::companion_specs(spec)) keys.insert(jit::make_build(k).key);
    }
  }
  plan::CallSettings settings;
  settings.arch = kernels::Arch::Sm90a;
  settings.device.max_smem_optin = plan::default_max_smem_optin(settings.arch);
  for (const auto& k : plan::warmup_kernel_specs(warm, settings).specs) keys.insert(jit::make_build(k).key);
  return keys;
}

}  // namespace

TEST_CASE("autotune: sage2-autotune --help, usage errors, and no driver") {
  Ran h = run("sage2-autotune", "--help");
  CHECK(h.code == 0);
  for (const char* s : {"--compile-only", "--arch", "--head-dims", "--seq-lens", "--dtypes", "--json", "--progress",
                        "exit codes", "130", "no CUDA"})
    CHECK_MESSAGE(h.out.find(s) != std::string::npos, s);

  for (const char* bad : {"--bogus", "--compile-only", "--arch sm_75 --compile-only", "--arch sm_80,sm_89",
                          "--pv fp12 --arch sm_80 --compile-only", "--tiles 64x64 --arch sm_90a --compile-only",
                          "--heads 32 --kv-heads 5", "--head-dims 0", "--head-dims 513", "--dtypes f32", "--reps",
                          "--json=1", "--causal sideways"}) {
    CAPTURE(bad);
    const Ran r = run("sage2-autotune", bad);
    CHECK(r.code == 2);
    CHECK(r.err.find("sage2-autotune:") != std::string::npos);
  }
  // Tuning needs a driver: exit 3 and a pointer to --compile-only (the libcuda path is forced
  // to a missing file so this holds on GPU machines too).
  const Ran nd = run("sage2-autotune", "--device 0 --no-progress", "SAGE2_LIBCUDA=/nonexistent/libcuda.so.1");
  CHECK(nd.code == 3);
  CHECK(nd.err.find("--compile-only") != std::string::npos);
}

TEST_CASE("autotune: sage2-autotune --compile-only fills the cache with exactly the candidates' and the warm-up's kernels") {
  ToolDir cache;
  const std::string args = "--arch sm_90a --compile-only --family mma --head-dims 64 --dtypes f16 --tiles 64x64x4x1,128x64x8x1 "
                           "--cache-dir '" + cache.path + "' --json --no-progress";
  const Ran r = run("sage2-autotune", args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["mode"] == "compile-only");
  CHECK(j["arch"] == "sm_90a");
  CHECK(j["interrupted"] == false);
  CHECK(j["exit_code"] == 0);
  CHECK(j["cache_dir"] == cache.path);
  REQUIRE(j["specialisations"].size() == 2);  // causal none and top-left (the default list)
  for (const auto& sp : j["specialisations"]) {
    CHECK(sp["head_dim"] == 64);
    CHECK(sp["dtype"] == "f16");
    CHECK(sp["qk_bits"] == 8);  // sm_90a default
    CHECK(sp["heuristic"] == "bq64.bk64.w4.s2");
    CHECK(sp["candidates"].size() == 3);  // the two given + the heuristic default
    CHECK(sp["compile_errors"] == 0);
    for (const auto& c : sp["candidates"]) {
      CAPTURE(c.dump());
      REQUIRE(c.contains("ptxas"));
      // The verdict is the filter's on the reported facts.
      jit::PtxasFacts f;
      f.registers = c["ptxas"]["registers"];
      f.spill_store_bytes = c["ptxas"]["spill_store_bytes"];
      f.spill_load_bytes = c["ptxas"]["spill_load_bytes"];
      f.stack_frame_bytes = c["ptxas"]["stack_frame_bytes"];
      plan::Specialisation s = plan::Specialisation::defaults(kernels::Arch::Sm90a, 64, CausalMode::None, DType::F16);
      s.family = kernels::KernelFamily::AttentionMma;
      const auto spec = s.attention_spec(kernels::Arch::Sm90a, *plan::parse_tile(c["tile"].get<std::string>()));
      CHECK((c["state"] == "ok") == !plan::ptxas_reject_reason(spec, f).has_value());
    }
  }
  plan::WarmupSelection warm;  // the selection's calls: head dim 64, f16, both causal modes, mma
  warm.head_dims = {64};
  warm.dtypes = {DType::F16};
  warm.families = {kernels::KernelFamily::AttentionMma};
  const std::set<std::string> expected = expected_keys(j, warm);
  CHECK(expected.size() >= 6 + 4);  // 6 attention kernels, quantize kernels shared between them
  CHECK(j["warmup"]["kernels"].get<std::size_t>() >= 2 * 3 + 4 + 1);  // 2 quantized calls, direct tiles, merge
  CHECK(j["warmup"]["left_out"].empty());
  const auto& reported = j["kernels"]["keys"];
  CHECK(std::set<std::string>(reported.begin(), reported.end()) == expected);
  CHECK(j["kernels"]["compiled"] == expected.size());
  CHECK(j["kernels"]["from_cache"] == 0);

  // What sage2-cache sees: the same keys, all valid, nothing else (no temp files, no DB).
  const Ran list = run("sage2-cache", "--dir '" + cache.path + "' list --json");
  REQUIRE(list.code == 0);
  const json lj = json::parse(list.out);
  std::set<std::string> listed;
  for (const auto& e : lj["entries"]) {
    CHECK(e["valid"] == true);
    CHECK(e["arch"] == "sm_90a");
    listed.insert(e["key"].get<std::string>());
  }
  CHECK(listed == expected);
  CHECK(names(cache.path).size() == expected.size());
  std::size_t checked = 0;
  CHECK(cache::DiskCache(cache.path).verify(false, &checked).empty());
  CHECK(checked == expected.size());

  // Again: everything is already there.
  const Ran r2 = run("sage2-autotune", args);
  REQUIRE(r2.code == 0);
  const json j2 = json::parse(r2.out);
  CHECK(j2["kernels"]["compiled"] == 0);
  CHECK(j2["kernels"]["from_cache"] == expected.size());

  // The text report names the cache and the heuristic default.
  const Ran t = run("sage2-autotune", "--arch sm_90a --compile-only --family mma --head-dims 64 --dtypes f16 --causal none "
                                      "--tiles 64x64x4x1 --cache-dir '" + cache.path + "' --no-progress");
  CHECK(t.code == 0);
  CHECK(t.out.find(cache.path) != std::string::npos);
  CHECK(t.out.find("bq64.bk64.w4.s2") != std::string::npos);
  CHECK(t.out.find("already cached") != std::string::npos);
}

TEST_CASE("autotune: sage2-autotune --compile-only takes every arch of the table, and several in one cache") {
  ToolDir cache;
  const Ran r = run("sage2-autotune", "--arch sm_80,sm_89,sm_120 --compile-only --head-dims 64 --dtypes f16 --causal none "
                                      "--bits auto,4 --pv auto,fp8,fp16 --tiles 64x64x4x2 --cache-dir '" + cache.path +
                                      "' --json --no-progress");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["archs"] == json::array({"sm_80", "sm_89", "sm_120"}));
  REQUIRE(j["reports"].size() == 3);
  std::map<std::string, std::set<std::string>> specs;  // arch -> "int<bits> <pv>"
  for (const auto& rep : j["reports"]) {
    CHECK(rep["exit_code"] == 0);
    for (const auto& s : rep["specialisations"])
      specs[rep["arch"].get<std::string>()].insert("int" + std::to_string(s["qk_bits"].get<int>()) + " " +
                                                   s["pv"].get<std::string>());
  }
  // Ampere: no FP8; Blackwell: no INT4; Ada: everything
  CHECK(specs["sm_80"] == std::set<std::string>{"int8 fp16", "int4 fp16"});
  CHECK(specs["sm_89"] == std::set<std::string>{"int8 fp8", "int8 fp16", "int4 fp8", "int4 fp16"});
  CHECK(specs["sm_120"] == std::set<std::string>{"int8 fp8", "int8 fp16"});
  std::map<std::string, int> per_arch;
  for (const auto& e : cache::DiskCache(cache.path).list()) {
    CHECK(e.valid);
    ++per_arch[e.arch];
  }
  CHECK(per_arch.size() == 3);
  for (const char* a : {"sm_80", "sm_89", "sm_120"}) CHECK(per_arch[a] > 0);
  // one bundle holds them all
  const Ran ex = run("sage2-cache", "--dir '" + cache.path + "' export '" + cache / "fleet.s2b" + "'");
  REQUIRE(ex.code == 0);
  ToolDir other;
  const Ran im = run("sage2-cache", "--dir '" + other.path + "' import '" + cache / "fleet.s2b" + "'");
  REQUIRE(im.code == 0);
  std::map<std::string, int> imported;
  for (const auto& e : cache::DiskCache(other.path).list()) ++imported[e.arch];
  CHECK(imported == per_arch);
  // every other arch of the table compiles too (one small specialisation each)
  for (const char* a : {"sm_86", "sm_87", "sm_90a", "sm_100", "sm_103", "sm_121"}) {
    CAPTURE(a);
    const Ran one = run("sage2-autotune", std::string("--arch ") + a + " --compile-only --head-dims 64 --dtypes f16 "
                                          "--causal none --tiles 64x64x4x2 --cache-dir '" + cache.path + "' --json --no-progress");
    CHECK(one.code == 0);
    CHECK(json::parse(one.out)["arch"] == a);
  }
}

TEST_CASE("autotune: sage2-autotune --compile-only --progress draws on stderr only") {
  ToolDir cache;
  const Ran r = run("sage2-autotune", "--arch sm_89 --compile-only --head-dims 64 --dtypes f16 --causal none "
                                      "--bits 4 --tiles 64x64x4x1 --cache-dir '" + cache.path + "' --json --progress --jobs 1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["arch"] == "sm_89");  // stdout is pure JSON
  CHECK(r.err.find("ETA") != std::string::npos);
  CHECK(r.err.find("quantize") != std::string::npos);
  // 4-bit takes smooth Q: the ΔS kernel is among the kernels.
  bool has_delta_s = false;
  for (const auto& e : cache::DiskCache(cache.path).list()) has_delta_s |= e.key.rfind("delta_s|", 0) == 0;
  CHECK(has_delta_s);
  // Without --progress and without a terminal: silent stderr.
  const Ran q = run("sage2-autotune", "--arch sm_89 --compile-only --head-dims 64 --dtypes f16 --causal none "
                                      "--tiles 64x64x4x1 --cache-dir '" + cache.path + "' --json");
  CHECK(q.code == 0);
  CHECK(q.err.empty());
}

TEST_CASE("autotune: Ctrl-C during sage2-autotune --compile-only leaves a consistent cache and exits 130") {
  ToolDir cache, io;
  const std::string tool = tools_dir() + "/sage2-autotune";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open((io.path + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((io.path + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    // Every candidate of two head dims on one job: far more than is compiled before the signal.
    ::execl(tool.c_str(), tool.c_str(), "--arch", "sm_90a", "--compile-only", "--head-dims", "64,128", "--dtypes", "f16",
            "--causal", "none", "--jobs", "1", "--json", "--cache-dir", cache.path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for the first entry, then interrupt.
  const auto t0 = std::chrono::steady_clock::now();
  while (count_entries(cache.path) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(count_entries(cache.path) > 0);
  REQUIRE(::kill(pid, SIGINT) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  std::ifstream o(io.path + "/out");
  const std::string out((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
  const json j = json::parse(out);
  CHECK(j["interrupted"] == true);
  CHECK(j["exit_code"] == 130);
  CHECK(j["kernels"]["skipped"].get<int>() > 0);
  // Every kernel it reports is in the cache, valid; nothing partial is left behind.
  std::size_t checked = 0;
  CHECK(cache::DiskCache(cache.path).verify(false, &checked).empty());
  CHECK(checked == j["kernels"]["keys"].size());
  for (const auto& n : names(cache.path)) {
    CAPTURE(n);
    CHECK(n.find(".tmp-") == std::string::npos);
  }
  // A later run completes the job from where it stopped.
  const Ran again = run("sage2-autotune", "--arch sm_90a --compile-only --head-dims 64 --dtypes f16 --causal none "
                                          "--tiles 64x64x4x1 --cache-dir '" + cache.path + "' --json");
  CHECK(again.code == 0);
}

TEST_CASE("autotune: sage2-autotune says --arch outside the table plainly; usage errors are one line (issue 32)") {
  for (const char* args : {"--arch sm_75 --compile-only", "--arch sm_75", "--arch sm_89,sm_75 --compile-only"}) {
    CAPTURE(args);
    const Ran r = run("sage2-autotune", args);
    CHECK(r.code == 2);
    CHECK(r.err.rfind("sage2-autotune: --arch sm_75: ", 0) == 0);
    CHECK(r.err.find("invalid_argument") == std::string::npos);  // no internal error prefix
    for (const auto& a : kernels::arch_table()) CHECK_MESSAGE(r.err.find(a.name) != std::string::npos, a.name);
  }
  // A usage error is one line naming the flag (then the pointer to --help).
  const Ran flag = run("sage2-autotune", "--json=1");
  CHECK(flag.code == 2);
  CHECK(flag.err.substr(0, flag.err.find('\n')) == "sage2-autotune: --json takes no value");
  const Ran unknown = run("sage2-autotune", "--bogus");
  CHECK(unknown.err.substr(0, unknown.err.find('\n')) == "sage2-autotune: unknown option '--bogus'");
}

TEST_CASE("autotune: sage2-autotune --compile-only refuses a selection that compiles nothing for an arch (issue 32)") {
  ToolDir cache;
  const std::string common = " --compile-only --head-dims 64 --dtypes f16 --causal none --tiles 64x64x4x2 --no-progress "
                             "--cache-dir '" + cache.path + "'";
  // The reasons are the library's own (the rule autotune::specialisations applies).
  const auto& mma = kernels::attention_family(kernels::KernelFamily::AttentionMma);
  const auto no_fp8 = kernels::family_runs_why_not(mma, kernels::Arch::Sm80, 8, 64, /*pv_fp16=*/false);
  const auto no_int4 = kernels::family_runs_why_not(mma, kernels::Arch::Sm100, 4, 64, /*pv_fp16=*/false);
  REQUIRE(no_fp8);
  REQUIRE(no_int4);
  struct Case {
    const char* args;
    const char* arch;
    std::string why;
  };
  for (const Case& c : {Case{"--arch sm_80 --pv fp8", "sm_80", *no_fp8}, Case{"--arch sm_100 --bits 4", "sm_100", *no_int4},
                        // several archs: checked before anything is compiled for the first
                        Case{"--arch sm_89,sm_80 --pv fp8", "sm_80", *no_fp8}}) {
    CAPTURE(c.args);
    const Ran r = run("sage2-autotune", c.args + common + " --json");
    CHECK(r.code == 2);
    CHECK(r.out.empty());  // no report, no table
    CHECK(r.err.rfind(std::string("sage2-autotune: --arch ") + c.arch + ": the selection compiles nothing: " + c.why +
                          "\n",
                      0) == 0);
    CHECK(count_entries(cache.path) == 0);
  }
  // What an arch half-runs is still compiled (the rest skipped), exit 0.
  const Ran part = run("sage2-autotune", "--arch sm_80 --pv fp8,fp16" + common + " --json");
  CHECK(part.code == 0);
  CHECK(json::parse(part.out)["specialisations"].size() == 1);
}

TEST_CASE("autotune: sage2-autotune warns of options that do nothing in the chosen mode (issue 32)") {
  ToolDir cache;
  const Ran r = run("sage2-autotune", "--arch sm_89 --compile-only --head-dims 64 --dtypes f16 --causal none "
                                      "--tiles 64x64x4x1 --seq-lens 1024 --device 1 --reps 7 --no-db --cache-dir '" +
                                          cache.path + "' --json");
  INFO(r.err);
  CHECK(r.code == 0);  // unchanged: a warning only
  CHECK(json::parse(r.out)["arch"] == "sm_89");
  for (const char* o : {"--seq-lens", "--device", "--reps", "--no-db"})
    CHECK_MESSAGE(r.err.find(std::string("sage2-autotune: warning: ") + o + " does nothing with --compile-only") !=
                      std::string::npos,
                  o);
  for (const char* o : {"--head-dims", "--tiles", "--cache-dir", "--json", "--arch"})  // these do something
    CHECK_MESSAGE(r.err.find(std::string("warning: ") + o + " ") == std::string::npos, o);
  // The other way round: --max-smem filters --compile-only's candidates only. The tuning run
  // stops at the missing driver (exit 3 as before), after the warning.
  const Ran t = run("sage2-autotune", "--max-smem 65536 --no-progress --cache-dir '" + cache.path + "'",
                    "SAGE2_LIBCUDA=/nonexistent/libcuda.so.1");
  CHECK(t.code == 3);
  CHECK(t.err.find("sage2-autotune: warning: --max-smem does nothing without --compile-only") != std::string::npos);
}
