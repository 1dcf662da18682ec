// Specification (CPU / CI): the GPU path of sage2-autotune, run against a fake CUDA driver.
//
// The fake (tests/cpu/fake_driver.hpp: a C file compiled by the test, loaded by the tool through
// SAGE2_LIBCUDA) reports one sm_90 device, keeps "device" memory in host memory, and runs no kernel: a launch advances a
// virtual clock by 0.002 ms + 1 ns per byte of dynamic shared memory, and events read that clock.
// Every driver entry point sage2 resolves (base/driver.hpp's X-macro, read at test time) is
// exported; the ones the tuner does not need fail with CUDA_ERROR_NOT_SUPPORTED.
// What this checks (everything but the kernels and real timings, which need the H100):
//  - the tool compiles, filters, allocates rotation copies, times every candidate with events,
//    stops a clearly slower candidate early, picks the fastest (the cost model's argmin), applies
//    the heuristic baseline and gain, writes one database entry per (specialisation, length
//    bucket), prints the table and the JSON report, and exits 0;
//  - the database it wrote is what a Context's planner then uses;
//  - Ctrl-C in the timing phase keeps the finished problems in the database and exits 130.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "plan/candidates.hpp"
#include "plan/planner.hpp"
#include "plan/tuning_db.hpp"
#include "kernels/attention_family.hpp"
#include "kernels/quantize_shape.hpp"
#include "runtime/attention_plan.hpp"
#include "fake_driver.hpp"

using namespace sage2;
using nlohmann::json;

namespace {

using test::fake;
using test::kFakeName;

struct FdDir {
  std::string path;
  FdDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-fake-tune-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~FdDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

struct Out {
  int code = -1;
  std::string out, err;
};

Out run_tool(const std::string& args, const std::string& env) {
  FdDir io;
  const std::string cmd = "SAGE2_LIBCUDA='" + fake().lib + "' " + env + " '" + std::string(SAGE2_TOOLS_DIR) +
                          "/sage2-autotune' " + args + " >'" + io.path + "/out' 2>'" + io.path + "/err'";
  const int status = std::system(cmd.c_str());
  Out r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(io.path + "/out"), e(io.path + "/err");
  r.out.assign(std::istreambuf_iterator<char>(o), std::istreambuf_iterator<char>());
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

kernels::KernelSpec attention_spec_of(const kernels::TileConfig& t) {
  plan::Specialisation s = plan::Specialisation::defaults(kernels::Arch::Sm90a, 64, CausalMode::None, DType::F16);
  s.family = kernels::KernelFamily::AttentionMma;
  return s.attention_spec(kernels::Arch::Sm90a, t);
}
std::size_t smem_of(const kernels::TileConfig& t) { return kernels::attention_kernel_config(attention_spec_of(t)).smem; }
// The fake clock's time of the default (split) quantize stage before attention tile t: four
// launches (statistics, Q, K, V) of 0.002 ms + 1 ns per byte of their dynamic shared memory. The
// tuner's calls are dense ones on the Auto path: sampled statistics (plan/attention_spec.cpp).
// at_once: channel_stats in its at-once form (kernels::stats_spec_for: a sampled head, few heads)
double quantize_stage_ms_of(const kernels::TileConfig& t, bool at_once) {
  kernels::KernelSpec spec = attention_spec_of(t);
  spec.sampled_stats = true;
  double ms = 0;
  for (kernels::QuantOp op : {kernels::QuantOp::ChannelStats, kernels::QuantOp::QuantizeQ, kernels::QuantOp::QuantizeK,
                              kernels::QuantOp::QuantizeV}) {
    const kernels::KernelSpec q = op == kernels::QuantOp::ChannelStats && at_once ? *kernels::stats_at_once_spec(spec)
                                                                                 : kernels::quantize_spec_for(spec, op);
    ms += 0.002 + kernels::quantize_kernel_config(q).dynamic_smem * 1e-6;
  }
  return ms;
}

}  // namespace

TEST_CASE("autotune: sage2-autotune tunes end to end on a fake driver and writes the database") {
  REQUIRE_MESSAGE(!fake().lib.empty(), fake().problem);
  FdDir cache;
  const std::string args = "--device 0 --family mma --head-dims 64 --dtypes f16 --causal none "
                           "--tiles 64x64x4x1,64x32x4x1,64x128x4x3 --seq-lens 256,1024 --heads 2 --batch 1 "
                           "--cache-dir '" + cache.path + "' --jobs 2 --no-progress";
  const Out r = run_tool(args + " --json", "");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["mode"] == "tune");
  CHECK(j["device"]["name"] == kFakeName);
  CHECK(j["arch"] == "sm_90a");
  CHECK(j["interrupted"] == false);
  CHECK(j["exit_code"] == 0);
  CHECK(j["database"]["written"] == 2);
  REQUIRE(j["results"].size() == 2);

  // The cost model's fastest eligible candidate: the least dynamic shared memory.
  const kernels::TileConfig heuristic{64, 64, 4, 2};
  std::string best_tile;
  std::size_t best_smem = SIZE_MAX;
  const auto& sp = j["specialisations"][0];
  for (const auto& c : sp["candidates"]) {
    if (c["state"] != "ok") continue;
    const auto t = *plan::parse_tile(c["tile"].get<std::string>());
    if (smem_of(t) < best_smem) {
      best_smem = smem_of(t);
      best_tile = plan::tile_str(t);
    }
  }
  REQUIRE_FALSE(best_tile.empty());
  for (const auto& res : j["results"]) {
    CAPTURE(res.dump(1));
    CHECK(res["complete"] == true);
    CHECK(res["written"] == true);
    CHECK(res["best"]["tile"] == best_tile);
    CHECK(res["heuristic"]["tile"] == plan::tile_str(heuristic));
    CHECK(res["gain"].get<double>() > 0.02);
    CHECK(res["timings"][0]["heuristic"] == true);  // the baseline is timed first
    for (const auto& t : res["timings"]) {
      CHECK(t["ok"] == true);
      CHECK(t["agreement"].get<double>() >= 0.998);
      const kernels::TileConfig tile = *plan::parse_tile(t["tile"].get<std::string>());
      // (B 1 H 2: channel_stats at once over a sampled head (1024 keys), the walk over 256)
      const double ms = t["ms"].get<double>(), attn = 0.002 + smem_of(tile) * 1e-6;
      CHECK((ms == doctest::Approx(quantize_stage_ms_of(tile, false) + attn).epsilon(1e-3) ||
             ms == doctest::Approx(quantize_stage_ms_of(tile, true) + attn).epsilon(1e-3)));
      // The bk128 3-stage tile costs more than 1.25x the best so far: stopped after 3 calls.
      if (t["tile"] == "bq64.bk128.w4.s3") {
        CHECK(t["stopped_early"] == true);
        CHECK(t["reps"] == 3);
      } else {
        CHECK(t["reps"].get<int>() >= 5);
      }
    }
  }

  // The database: one entry per length bucket, read back by the planner of a Context.
  const std::string path = plan::db_path(cache.path, kFakeName, kernels::Arch::Sm90a);
  const plan::DbReadResult db = plan::read_db(path, kFakeName, kernels::Arch::Sm90a);
  REQUIRE(db.status == plan::DbStatus::Ok);
  REQUIRE(db.entries.size() == 2);
  std::set<int> buckets;
  for (const auto& e : db.entries) {
    buckets.insert(e.key.q_bucket);
    CHECK(plan::tile_str(e.tile) == best_tile);
    CHECK(e.heuristic_tile == heuristic);
    CHECK(e.tops > e.heuristic_tops);
    CHECK(e.q_heads == 2);
    CHECK(e.batch == 1);
    CHECK(e.code_version == plan::current_code_version());
    CHECK(e.driver_version == 13000);
  }
  CHECK(buckets == std::set<int>{256, 1024});
  CHECK(db.info.device_name == kFakeName);
  plan::AttentionProblem p;
  p.batch = 3;
  p.q_heads = p.kv_heads = 8;
  p.q_len = p.kv_len = 1000;
  p.head_dim = 64;
  p.qk_bits = 8;
  p.smooth_k = true;
  const plan::Planner planner(path, kFakeName, kernels::Arch::Sm90a, 232448);
  const plan::TileChoice choice = planner.choose(plan::attention_spec_for(p, kernels::Arch::Sm90a, kernels::KernelFamily::AttentionMma), p);
  CHECK(choice.tuned);
  CHECK(plan::tile_str(choice.tile) == best_tile);

  // The text report: the table with both tiles, TOPS and the gain; --no-db leaves the file alone.
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  FdDir rep;
  const Out t = run_tool(args + " --no-db --report '" + rep.path + "/report.json'", "");
  CHECK(t.code == 0);
  // --report: the same JSON report in a file while the table goes to stdout.
  std::ifstream rf(rep.path + "/report.json");
  const json rj = json::parse(std::string((std::istreambuf_iterator<char>(rf)), std::istreambuf_iterator<char>()));
  CHECK(rj["mode"] == "tune");
  CHECK(rj["results"].size() == 2);
  CHECK(rj["results"][0]["best"]["tile"] == best_tile);
  CHECK(rj["database"]["path"].is_null());
  for (const char* s : {"best tile", "heuristic", "gain", "bq64.bk64.w4.s2", "database: not written (--no-db)"})
    CHECK_MESSAGE(t.out.find(s) != std::string::npos, s);
  CHECK(t.out.find(best_tile) != std::string::npos);
  CHECK(t.out.find("0 compiled") != std::string::npos);  // the first run filled the cache
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);

  // --arch must match the device; --device out of range is exit 4.
  CHECK(run_tool("--device 0 --arch sm_89 --no-progress", "").code == 2);
  CHECK(run_tool("--device 3 --no-progress", "").code == 4);
}

TEST_CASE("autotune: a selection that tunes nothing on the device's arch is refused with exit 2 (issue 32)") {
  REQUIRE_MESSAGE(!fake().lib.empty(), fake().problem);
  FdDir cache;
  // The fake device is sm_90a, where the wgmma family has no 4-bit kernel.
  const auto why = kernels::family_runs_why_not(kernels::attention_family(kernels::KernelFamily::AttentionWgmma),
                                                kernels::Arch::Sm90a, 4, 64, false);
  REQUIRE(why);
  const Out r = run_tool("--device 0 --family wgmma --bits 4 --head-dims 64 --dtypes f16 --causal none --seq-lens 256 "
                         "--no-progress --cache-dir '" + cache.path + "'",
                         "");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("sage2-autotune: device 0 is sm_90a: the selection tunes nothing: " + *why + "\n", 0) == 0);
  struct stat st {};
  CHECK(::stat(plan::db_path(cache.path, kFakeName, kernels::Arch::Sm90a).c_str(), &st) != 0);  // no database
}

TEST_CASE("autotune: under SAGE2_TARGET_ARCH it tunes that arch's kernels with that arch's defaults and says so") {
  REQUIRE_MESSAGE(!fake().lib.empty(), fake().problem);
  FdDir cache;
  // The fake sm_90 device running sm_80's code through PTX: --pv auto is sm_80's FP16 P̃V (FP8 does
  // not exist there), the family the mma one, and the table and the report name sm_80.
  const std::string args = "--device 0 --head-dims 64 --dtypes f16 --causal none --tiles 64x64x4x2 --seq-lens 256 "
                           "--heads 2 --batch 1 --no-db --no-progress --jobs 2 --cache-dir '" + cache.path + "'";
  const Out r = run_tool(args + " --json", "SAGE2_TARGET_ARCH=sm_80");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["arch"] == "sm_80");
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["specialisation"].get<std::string>().find("pv16") != std::string::npos);
  REQUIRE_FALSE(j["kernels"]["keys"].empty());
  for (const auto& k : j["kernels"]["keys"]) {
    const std::string key = k.get<std::string>();
    CAPTURE(key);
    CHECK(key.find("|sm_80|") != std::string::npos);
    CHECK(key.find("|ptx|") != std::string::npos);
  }
  // --arch names the arch the calls run: the target's, not the device's
  CHECK(run_tool(args + " --arch sm_80", "SAGE2_TARGET_ARCH=sm_80").code == 0);
  const Out wrong = run_tool(args + " --arch sm_90a", "SAGE2_TARGET_ARCH=sm_80");
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("runs SAGE2_TARGET_ARCH's sm_80") != std::string::npos);
}

TEST_CASE("autotune: Ctrl-C while tuning keeps the finished problems in the database and exits 130") {
  REQUIRE_MESSAGE(!fake().lib.empty(), fake().problem);
  FdDir cache, io;
  const std::string path = plan::db_path(cache.path, kFakeName, kernels::Arch::Sm90a);
  const std::string tool = std::string(SAGE2_TOOLS_DIR) + "/sage2-autotune";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open((io.path + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((io.path + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("SAGE2_LIBCUDA", fake().lib.c_str(), 1);
    ::setenv("FAKE_CUDA_SYNC_SLEEP_MS", "25", 1);  // each timed call takes 25 ms of wall time
    ::execl(tool.c_str(), tool.c_str(), "--device", "0", "--family", "mma", "--head-dims", "64", "--dtypes", "f16", "--causal", "none",
            "--tiles", "64x64x4x1", "--seq-lens", "128,256,512,1024,2048,4096", "--heads", "2", "--batch", "1",
            "--cache-dir", cache.path.c_str(), "--json", "--no-progress", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The database appears when the first problem is done; interrupt then.
  const auto t0 = std::chrono::steady_clock::now();
  struct stat st {};
  while (::stat(path.c_str(), &st) != 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(180))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(::stat(path.c_str(), &st) == 0);
  REQUIRE(::kill(pid, SIGINT) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  std::ifstream o(io.path + "/out"), e(io.path + "/err");
  const std::string out((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
  const std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  INFO(err);
  CHECK(err.find("interrupted") != std::string::npos);
  const json j = json::parse(out);
  CHECK(j["interrupted"] == true);
  CHECK(j["exit_code"] == 130);
  std::size_t written = 0;
  for (const auto& r : j["results"]) written += r["written"] == true;
  CHECK(written >= 1);
  CHECK(written < 6);  // stopped before the end
  CHECK(j["database"]["written"] == written);
  const plan::DbReadResult db = plan::read_db(path, kFakeName, kernels::Arch::Sm90a);
  REQUIRE(db.status == plan::DbStatus::Ok);
  CHECK(db.entries.size() == written);
  for (const auto& n : [&] {
         std::vector<std::string> v;
         if (DIR* d = ::opendir(cache.path.c_str())) {
           while (dirent* x = ::readdir(d)) v.push_back(x->d_name);
           ::closedir(d);
         }
         return v;
       }()) {
    CAPTURE(n);
    CHECK(n.find("tmp") == std::string::npos);
  }
}
