// Specification (CPU / CI): the tuning database and the planner.
//  - problem signatures: size buckets, GQA buckets, key strings;
//  - a database written and read back gives the same entries; merging keeps other keys and
//    replaces the same key; writes leave no temporary files;
//  - a truncated, garbage, wrong-schema or foreign-device file is reported once, ignored (the
//    planner uses the heuristic default) and replaced by the next write;
//  - forked writer processes merging at once lose no entry, and a reader never sees a partial file;
//  - the planner returns the tuned tile, memoises per signature, is thread-safe, and falls back to
//    the heuristic for a miss, another code version, or a tile the device cannot hold;
//  - an entry measured on other compiled code (another build's code version, another NVRTC, or
//    a database written by an older libsage2) is read without error, not used, and reported in
//    one log line.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "plan/candidates.hpp"
#include "plan/attention_spec.hpp"
#include "plan/planner.hpp"
#include "plan/tuning_db.hpp"
#include "jit/kernel_build.hpp"
#include "kernels/attention_family.hpp"
#include "runtime/attention_plan.hpp"
#include "base/log.hpp"
#include "test_support.hpp"

using namespace sage2;
using namespace sage2::plan;

namespace {

struct DbTempDir : test::TempDir {
  DbTempDir() : test::TempDir("sage2-tune-test") {}
};

using DbWarnCapture = test::WarnCapture;

const std::string kDevice = "NVIDIA H100 80GB HBM3";
constexpr kernels::Arch kArch = kernels::Arch::Sm90a;
constexpr int kSmem = 227 * 1024;

plan::TuningKey make_key(int head_dim = 128, int q = 4096, int kv = 4096, int g = 1, bool causal = false,
                   DType dt = DType::F16) {
  plan::TuningKey k;
  k.head_dim = head_dim;
  k.causal = causal;
  k.dtype = dt;
  k.q_bucket = q;
  k.kv_bucket = kv;
  k.gqa_bucket = g;
  return k;
}

plan::TuningEntry make_entry(const plan::TuningKey& key, kernels::TileConfig tile = {128, 64, 8, 2}, double tops = 800) {
  plan::TuningEntry e;
  e.key = key;
  e.tile = tile;
  e.tops = tops;
  e.ms = 1.5;
  e.heuristic_tile = {64, 64, 4, 2};
  e.heuristic_tops = 700;
  e.heuristic_ms = 1.7;
  e.batch = 4;
  e.q_heads = 32;
  e.kv_heads = 32 / key.gqa_bucket;
  e.q_len = key.q_bucket;
  e.kv_len = key.kv_bucket;
  e.timed = 12;
  e.rejected = 24;
  e.code_version = plan::current_code_version();  // measured by this build, with this process's NVRTC
  e.driver_version = 13000;
  e.nvrtc_version = plan::CodeIdentity::current().nvrtc_version;
  e.tuned_unix = 1763820000;
  return e;
}

plan::DbInfo make_info(const std::string& device = kDevice, kernels::Arch arch = kArch) {
  plan::DbInfo i;
  i.device_name = device;
  i.arch = arch;
  i.sm_count = 132;
  i.driver_version = 13000;
  i.nvrtc_version = "13.0";
  i.library_version = plan::library_version();
  i.updated_unix = 1763820000;
  return i;
}

void check_same(const plan::TuningEntry& a, const plan::TuningEntry& b) {
  CHECK(a.key == b.key);
  CHECK(a.tile == b.tile);
  CHECK(a.ms == b.ms);
  CHECK(a.tops == b.tops);
  CHECK(a.heuristic_tile == b.heuristic_tile);
  CHECK(a.heuristic_ms == b.heuristic_ms);
  CHECK(a.heuristic_tops == b.heuristic_tops);
  CHECK(a.batch == b.batch);
  CHECK(a.q_heads == b.q_heads);
  CHECK(a.kv_heads == b.kv_heads);
  CHECK(a.q_len == b.q_len);
  CHECK(a.kv_len == b.kv_len);
  CHECK(a.timed == b.timed);
  CHECK(a.rejected == b.rejected);
  CHECK(a.code_version == b.code_version);
  CHECK(a.driver_version == b.driver_version);
  CHECK(a.nvrtc_version == b.nvrtc_version);
  CHECK(a.tuned_unix == b.tuned_unix);
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void spit(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

plan::AttentionProblem problem(int head_dim, std::int64_t q_len, std::int64_t kv_len, std::int64_t hq = 32,
                                  std::int64_t hkv = 32, CausalMode causal = CausalMode::None) {
  plan::AttentionProblem p;
  p.batch = 2;
  p.q_heads = hq;
  p.kv_heads = hkv;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.head_dim = head_dim;
  p.dtype = DType::F16;
  p.causal = causal;
  p.qk_bits = 8;
  p.smooth_k = true;
  p.sm_scale = 0.1f;
  return p;
}

// The planner tests use the portable family's tiles (the sm_90a default would be wgmma).
kernels::KernelSpec base_spec(const plan::AttentionProblem& p) {
  return plan::attention_spec_for(p, kArch, kernels::KernelFamily::AttentionMma);
}

}  // namespace

TEST_CASE("autotune: sequence-length and GQA buckets") {
  CHECK(plan::seq_bucket(1) == 64);
  CHECK(plan::seq_bucket(64) == 64);
  CHECK(plan::seq_bucket(65) == 128);
  CHECK(plan::seq_bucket(1000) == 1024);
  CHECK(plan::seq_bucket(1024) == 1024);
  CHECK(plan::seq_bucket(4097) == 8192);
  CHECK(plan::seq_bucket(131072) == 131072);
  CHECK(plan::seq_bucket(10'000'000) == 131072);
  for (std::int64_t n = 1; n < 300000; n = n * 3 + 1) {
    CAPTURE(n);
    CHECK(plan::is_seq_bucket(plan::seq_bucket(n)));
    CHECK((plan::seq_bucket(n) >= n || plan::seq_bucket(n) == plan::kMaxSeqBucket));
  }
  CHECK(plan::gqa_bucket(32, 32) == 1);
  CHECK(plan::gqa_bucket(32, 16) == 2);
  CHECK(plan::gqa_bucket(32, 8) == 4);
  CHECK(plan::gqa_bucket(28, 4) == 8);   // group 7 → 8
  CHECK(plan::gqa_bucket(48, 8) == 8);   // group 6 → 8
  CHECK(plan::gqa_bucket(64, 1) == 16);  // MQA, clamped
  CHECK(plan::gqa_bucket(3, 1) == 4);

  const plan::TuningKey k = plan::tuning_key(problem(128, 3000, 5000, 32, 8, CausalMode::BottomRight));
  CHECK(k.str() == "attn_mma|d128|causal|int8|sq0.sk1.sv0|f16|q4096.kv8192.g4");
  CHECK(k.specialisation_str() == "attn_mma|d128|causal|int8|sq0.sk1.sv0|f16");
  // Both causal masks share entries; full attention does not.
  CHECK(plan::tuning_key(problem(128, 3000, 5000, 32, 8, CausalMode::TopLeft)) == k);
  CHECK_FALSE(plan::tuning_key(problem(128, 3000, 5000, 32, 8, CausalMode::None)) == k);
  // Sizes inside one bucket give one key (and one hash).
  CHECK(plan::tuning_key(problem(64, 2049, 4096)) == plan::tuning_key(problem(64, 4000, 3000)));
  CHECK(plan::TuningKeyHash{}(plan::tuning_key(problem(64, 2049, 4096))) == plan::TuningKeyHash{}(plan::tuning_key(problem(64, 4000, 3000))));
  CHECK(plan::bucket_distance(make_key(128, 1024, 4096, 1), make_key(128, 4096, 4096, 4)) == 4);
}

TEST_CASE("autotune: file names are per device and arch") {
  const std::string a = plan::db_file_name(kDevice, kernels::Arch::Sm90a);
  CHECK(a.rfind("tuning-v1-nvidia-h100-80gb-hbm3-", 0) == 0);
  CHECK(a.size() > 5);
  CHECK(a.substr(a.size() - 12) == "-sm_90a.json");
  CHECK(plan::db_file_name(kDevice, kernels::Arch::Sm89) != a);
  CHECK(plan::db_file_name("NVIDIA H100 80GB HBM3 ", kernels::Arch::Sm90a) != a);  // the exact name is hashed in
  CHECK(plan::db_file_name("", kernels::Arch::Sm89).rfind("tuning-v1-device-", 0) == 0);
  CHECK(plan::db_file_name("../../etc/x", kernels::Arch::Sm89).find('/') == std::string::npos);
  CHECK(plan::db_path("/c", kDevice, kArch) == "/c/" + a);
  // Never mistaken for a cubin cache entry ("<16 hex>.s2c").
  CHECK(a.find(".s2c") == std::string::npos);
}

TEST_CASE("autotune: a database written and read back gives the same entries") {
  DbTempDir tmp;
  DbWarnCapture warns;
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  std::vector<plan::TuningEntry> entries = {make_entry(make_key(128)), make_entry(make_key(64, 1024, 1024, 4, true), {64, 32, 4, 1}, 321.5),
                                      make_entry(make_key(96, 16384, 16384, 1, false, DType::BF16), {128, 128, 8, 3})};
  // A text round trip (serialize → parse) and a file round trip (merge → read).
  const plan::DbReadResult text = plan::parse_db(plan::serialize_db(make_info(), entries), kDevice, kArch);
  REQUIRE(text.status == plan::DbStatus::Ok);
  REQUIRE(text.entries.size() == entries.size());
  const plan::DbWriteResult w = plan::merge_into_db(path, make_info(), entries);
  REQUIRE_MESSAGE(w.ok, w.problem);
  CHECK(w.previous == plan::DbStatus::Missing);
  CHECK(w.entries == 3);
  const plan::DbReadResult r = plan::read_db(path, kDevice, kArch);
  REQUIRE(r.status == plan::DbStatus::Ok);
  CHECK(r.info.device_name == kDevice);
  CHECK(r.info.arch == kArch);
  CHECK(r.info.sm_count == 132);
  CHECK(r.info.driver_version == 13000);
  CHECK(r.info.nvrtc_version == "13.0");
  CHECK(r.info.library_version == plan::library_version());
  REQUIRE(r.entries.size() == 3);
  for (const auto& e : entries) {
    const auto it = std::find_if(r.entries.begin(), r.entries.end(), [&](const plan::TuningEntry& x) { return x.key == e.key; });
    REQUIRE(it != r.entries.end());
    check_same(*it, e);
  }
  // The file is plain JSON with the documented header.
  const auto j = nlohmann::json::parse(slurp(path));
  CHECK(j["schema"] == "sage2-tuning");
  CHECK(j["schema_version"] == plan::kTuningSchemaVersion);
  CHECK(j["device"]["name"] == kDevice);
  CHECK(j["entries"].size() == 3);

  // Merging: a new key is added, the same key is replaced, the others are kept.
  auto changed = make_entry(make_key(128), {64, 64, 4, 1}, 900);
  const plan::DbWriteResult w2 = plan::merge_into_db(path, make_info(), {changed, make_entry(make_key(256))});
  REQUIRE(w2.ok);
  CHECK(w2.previous == plan::DbStatus::Ok);
  const plan::DbReadResult r2 = plan::read_db(path, kDevice, kArch);
  REQUIRE(r2.status == plan::DbStatus::Ok);
  CHECK(r2.entries.size() == 4);
  const plan::TuningDb db(r2.entries);
  const plan::TuningEntry* got = db.find(make_key(128), plan::CodeIdentity::current());
  REQUIRE(got);
  check_same(*got, changed);
  // Only the database and its lock file are in the directory: no temporary files.
  CHECK(dir_names(tmp.path) == std::vector<std::string>{plan::db_file_name(kDevice, kArch), plan::db_file_name(kDevice, kArch) + ".lock"});
  CHECK(warns.count() == 0);
}

TEST_CASE("autotune: lookups use the nearest size bucket of the same specialisation and code") {
  std::vector<plan::TuningEntry> entries = {make_entry(make_key(128, 1024, 1024), {64, 64, 4, 1}),
                                      make_entry(make_key(128, 16384, 16384), {128, 64, 8, 2}),
                                      make_entry(make_key(64, 4096, 4096), {64, 32, 4, 1})};
  auto old = make_entry(make_key(128, 4096, 4096), {128, 128, 8, 3});
  old.code_version = "0.0.1+0000000000000000";
  entries.push_back(old);
  const plan::TuningDb db(entries);
  const plan::CodeIdentity code = plan::CodeIdentity::current();
  // Exact hits.
  REQUIRE(db.find(make_key(128, 1024, 1024), code));
  CHECK(db.find(make_key(128, 1024, 1024), code)->tile == kernels::TileConfig{64, 64, 4, 1});
  CHECK(db.find(make_key(128, 16384, 16384), code)->tile == kernels::TileConfig{128, 64, 8, 2});
  // 2048² is 2 steps from 1024² and 6 from 16384²; 8192² is 2 from 16384².
  CHECK(db.find(make_key(128, 2048, 2048), code)->tile == kernels::TileConfig{64, 64, 4, 1});
  CHECK(db.find(make_key(128, 8192, 8192), code)->tile == kernels::TileConfig{128, 64, 8, 2});
  // 4096²: 4 steps from both: too far (kMaxLookupDistance = 3) — and the entry measured at
  // 4096² with other kernel code is never used.
  CHECK(db.find(make_key(128, 4096, 4096), code) == nullptr);
  CHECK(db.find(make_key(128, 4096, 4096), code, 4)->tile == kernels::TileConfig{128, 64, 8, 2});  // tie → larger
  CHECK(db.find(make_key(128, 4096, 4096), plan::CodeIdentity{"0.0.1+0000000000000000", code.nvrtc_version})->tile ==
        kernels::TileConfig{128, 128, 8, 3});
  // Only between measured sizes: below 1024² or above 16384² (any axis), or at another GQA group
  // than the measured one, there is no entry (the heuristic) — a tile is not extrapolated.
  CHECK(db.find(make_key(128, 512, 512), code) == nullptr);
  CHECK(db.find(make_key(128, 1024, 512), code) == nullptr);
  CHECK(db.find(make_key(128, 32768, 32768), code) == nullptr);
  CHECK(db.find(make_key(128, 1024, 1024, 4), code) == nullptr);
  CHECK(db.find(make_key(128, 1024, 1024, 16), code) == nullptr);
  // GQA counts in the distance where groups were measured; other specialisations never match.
  std::vector<plan::TuningEntry> gqa = entries;
  gqa.push_back(make_entry(make_key(128, 1024, 1024, 8), {64, 64, 4, 2}));
  const plan::TuningDb dg(gqa);
  CHECK(dg.find(make_key(128, 1024, 1024, 2), code)->tile == kernels::TileConfig{64, 64, 4, 1});
  CHECK(dg.find(make_key(128, 1024, 1024, 4), code)->tile == kernels::TileConfig{64, 64, 4, 2});  // tie → larger g
  CHECK(db.find(make_key(128, 1024, 1024, 1, true), code) == nullptr);
  CHECK(db.find(make_key(128, 1024, 1024, 1, false, DType::BF16), code) == nullptr);
  CHECK(db.find(make_key(96, 1024, 1024), code) == nullptr);
  CHECK(plan::TuningDb().find(make_key(), code) == nullptr);
}

TEST_CASE("autotune: a corrupt, truncated, foreign or wrong-schema database is reported once, ignored and replaced") {
  const std::string good = plan::serialize_db(make_info(), {make_entry(make_key(128)), make_entry(make_key(64))});
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(good);
    edit(j);
    return j.dump(1);
  };
  struct Case {
    std::string name, text;
    plan::DbStatus status;
  };
  std::vector<Case> cases;
  for (std::size_t at : {std::size_t(0), std::size_t(1), std::size_t(40), good.size() / 2, good.size() - 3})
    cases.push_back({"truncated at " + std::to_string(at), good.substr(0, at), plan::DbStatus::Corrupt});
  cases.push_back({"garbage", std::string("\x7f" "ELF\x01\x02\x00garbage", 14), plan::DbStatus::Corrupt});
  cases.push_back({"not an object", "[1, 2, 3]", plan::DbStatus::Corrupt});
  cases.push_back({"another program's JSON", R"({"hello": "world"})", plan::DbStatus::WrongSchema});
  cases.push_back({"schema version 2", with([](auto& j) { j["schema_version"] = 2; }), plan::DbStatus::WrongSchema});
  cases.push_back({"schema version as a string", with([](auto& j) { j["schema_version"] = "1"; }), plan::DbStatus::WrongSchema});
  cases.push_back({"another device", with([](auto& j) { j["device"]["name"] = "NVIDIA L40S"; }), plan::DbStatus::Foreign});
  cases.push_back({"another arch", with([](auto& j) { j["device"]["arch"] = "sm_89"; }), plan::DbStatus::Foreign});
  cases.push_back({"arch of the table, another one", with([](auto& j) { j["device"]["arch"] = "sm_80"; }), plan::DbStatus::Foreign});
  cases.push_back({"unknown arch", with([](auto& j) { j["device"]["arch"] = "sm_75"; }), plan::DbStatus::Corrupt});
  cases.push_back({"entries not an array", with([](auto& j) { j["entries"] = 5; }), plan::DbStatus::Corrupt});
  cases.push_back({"tile field missing", with([](auto& j) { j["entries"][0]["tile"].erase("bk"); }), plan::DbStatus::Corrupt});
  cases.push_back({"tile not runnable", with([](auto& j) { j["entries"][1]["tile"]["bq"] = 48; }), plan::DbStatus::Corrupt});
  cases.push_back({"bucket not a power of two", with([](auto& j) { j["entries"][0]["q_bucket"] = 3000; }), plan::DbStatus::Corrupt});
  cases.push_back({"wrong type", with([](auto& j) { j["entries"][0]["causal"] = "no"; }), plan::DbStatus::Corrupt});
  cases.push_back({"negative time", with([](auto& j) { j["entries"][0]["ms"] = -1.0; }), plan::DbStatus::Corrupt});
  cases.push_back({"unknown family", with([](auto& j) { j["entries"][0]["family"] = "quantize"; }), plan::DbStatus::Corrupt});
  cases.push_back({"duplicate key", with([](auto& j) { j["entries"].push_back(j["entries"][0]); }), plan::DbStatus::Corrupt});

  for (const auto& c : cases) {
    CAPTURE(c.name);
    DbTempDir tmp;
    const std::string path = plan::db_path(tmp.path, kDevice, kArch);
    spit(path, c.text);
    DbWarnCapture warns;
    const plan::DbReadResult r = plan::read_db(path, kDevice, kArch);
    CHECK(r.status == c.status);
    CHECK(r.entries.empty());
    CHECK_FALSE(r.problem.empty());
    CHECK(warns.count() == 0);  // read_db never logs

    // The planner of a Context: one warning naming the file, then the heuristic default.
    plan::Planner planner(path, kDevice, kArch, kSmem);
    const auto p = problem(128, 4096, 4096);
    const plan::TileChoice choice = planner.choose(base_spec(p), p);
    CHECK_FALSE(choice.tuned);
    CHECK(choice.tile == plan::heuristic_tile(base_spec(p), kSmem));
    CHECK(planner.db_entries() == 0);
    CHECK(warns.count() == 1);
    CHECK(warns.all().find(path) != std::string::npos);
    // A second Context (planner) in the same process does not warn again.
    plan::Planner again(path, kDevice, kArch, kSmem);
    CHECK_FALSE(again.choose(base_spec(p), p).tuned);
    CHECK(warns.count() == 1);

    // The next write replaces the bad file with a valid one holding only the new entry.
    const plan::DbWriteResult w = plan::merge_into_db(path, make_info(), {make_entry(make_key(128))});
    REQUIRE(w.ok);
    CHECK(w.previous == c.status);
    const plan::DbReadResult after = plan::read_db(path, kDevice, kArch);
    CHECK(after.status == plan::DbStatus::Ok);
    CHECK(after.entries.size() == 1);
  }
}

TEST_CASE("autotune: an unusable database path is an error for writers and a silent miss for readers") {
  DbTempDir tmp;
  DbWarnCapture warns;
  // A missing file is a plain miss: no warning.
  plan::Planner missing(plan::db_path(tmp / "nope", kDevice, kArch), kDevice, kArch, kSmem);
  const auto p = problem(64, 1000, 1000);
  CHECK_FALSE(missing.choose(base_spec(p), p).tuned);
  CHECK(warns.count() == 0);
  // A directory in the way of the file: readers report it once, writers fail with a reason.
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  REQUIRE(::mkdir(path.c_str(), 0755) == 0);
  CHECK(plan::read_db(path, kDevice, kArch).status == plan::DbStatus::Unreadable);
  const plan::DbWriteResult w = plan::merge_into_db(path, make_info(), {make_entry(make_key())});
  CHECK_FALSE(w.ok);
  CHECK_FALSE(w.problem.empty());
  // A regular file where the directory should be.
  spit(tmp / "file", "x");
  const plan::DbWriteResult w2 = plan::merge_into_db(plan::db_path(tmp / "file", kDevice, kArch), make_info(), {make_entry(make_key())});
  CHECK_FALSE(w2.ok);
  CHECK(w2.problem.find("directory") != std::string::npos);
}

TEST_CASE("autotune: forked writers merging at once lose no entry; a reader never sees a partial file") {
  DbTempDir tmp;
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  constexpr int kWriters = 6, kEach = 8;
  // A reader that checks the file continuously until told to stop (a marker file).
  const std::string stop_marker = tmp / "stop";
  const pid_t reader = ::fork();
  REQUIRE(reader >= 0);
  if (reader == 0) {
    base::log::set_sink([](base::log::Level, const std::string&) {});
    int bad = 0, ok = 0;
    for (;;) {
      const bool last = ::access(stop_marker.c_str(), F_OK) == 0;
      const plan::DbReadResult r = plan::read_db(path, kDevice, kArch);
      if (r.status == plan::DbStatus::Ok) ++ok;
      else if (r.status != plan::DbStatus::Missing) ++bad;
      if (last) break;
    }
    ::_exit(bad == 0 && ok > 0 ? 0 : 30);
  }
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      static int warn_count = 0;
      base::log::set_sink([](base::log::Level l, const std::string&) { if (l == base::log::Level::Warn) ++warn_count; });
      for (int i = 0; i < kEach; ++i) {
        // Distinct keys per writer (head dim) and per step (q bucket); one shared key overwritten by all.
        const plan::TuningEntry mine = make_entry(make_key(16 + w, 64 << i, 1024), {64, 64, 4, 1 + i % 2});
        const plan::TuningEntry shared = make_entry(make_key(128), {64, 64, 4, 1}, 100 + w);
        const plan::DbWriteResult r = plan::merge_into_db(path, make_info(), {mine, shared});
        if (!r.ok) ::_exit(20);
      }
      ::_exit(warn_count == 0 ? 0 : 21);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  spit(stop_marker, "");
  int status = 0;
  REQUIRE(::waitpid(reader, &status, 0) == reader);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  const plan::DbReadResult r = plan::read_db(path, kDevice, kArch);
  REQUIRE(r.status == plan::DbStatus::Ok);
  CHECK(r.entries.size() == kWriters * kEach + 1);
  const plan::TuningDb db(r.entries);
  for (int w = 0; w < kWriters; ++w)
    for (int i = 0; i < kEach; ++i) {
      CAPTURE(w);
      CAPTURE(i);
      const plan::TuningEntry* e = db.find(make_key(16 + w, 64 << i, 1024), plan::CodeIdentity::current(), 0);
      REQUIRE(e);
      CHECK(e->tile.stages == 1 + i % 2);
    }
  for (const auto& n : dir_names(tmp.path)) {
    CAPTURE(n);
    CHECK(n.find("tmp") == std::string::npos);  // no temporary file left behind
  }
}

TEST_CASE("autotune: the planner returns tuned tiles, memoises per signature and falls back to the heuristic") {
  DbTempDir tmp;
  DbWarnCapture warns;
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  auto stale = make_entry(make_key(96, 4096, 4096), {64, 32, 4, 2});
  stale.code_version = "0.0.0+ffffffffffffffff";
  REQUIRE(plan::merge_into_db(path, make_info(),
                        {make_entry(make_key(128, 4096, 4096), {128, 64, 8, 1}),
                         make_entry(make_key(128, 1024, 1024), {128, 128, 8, 3}), stale})
              .ok);

  const auto p128 = problem(128, 4000, 4000), p1k = problem(128, 1000, 1000), p96 = problem(96, 4096, 4096);
  // A device with 227 KiB: both tuned tiles fit.
  plan::Planner big(path, kDevice, kArch, kSmem);
  plan::TileChoice c = big.choose(base_spec(p128), p128);
  CHECK(c.tuned);
  CHECK(c.tile == kernels::TileConfig{128, 64, 8, 1});
  CHECK(big.choose(base_spec(p1k), p1k).tile == kernels::TileConfig{128, 128, 8, 3});
  // Measured with other kernel code: not used.
  CHECK_FALSE(big.choose(base_spec(p96), p96).tuned);
  // 2048 lies between the 1024 and 4096 entries: the nearer one (a tie: the larger) serves it.
  const auto p2k = problem(128, 2048, 2048);
  c = big.choose(base_spec(p2k), p2k);
  CHECK(c.tuned);
  CHECK(c.measured_key == make_key(128, 4096, 4096));
  // 8192 is past the largest measured size: the heuristic, not an extrapolated tile.
  const auto p8k = problem(128, 8192, 8192);
  CHECK_FALSE(big.choose(base_spec(p8k), p8k).tuned);
  CHECK(big.memoised() == 5);
  // Memoised: later changes to the file are not seen by this planner, calls do not re-read it.
  REQUIRE(plan::merge_into_db(path, make_info(), {make_entry(make_key(128, 4096, 4096), {64, 64, 4, 1})}).ok);
  CHECK(big.choose(base_spec(p128), p128).tile == kernels::TileConfig{128, 64, 8, 1});
  CHECK(big.memoised() == 5);
  // ...a new planner (a new Context) sees them.
  CHECK(plan::Planner(path, kDevice, kArch, kSmem).choose(base_spec(p128), p128).tile == kernels::TileConfig{64, 64, 4, 1});
  CHECK(warns.count() == 0);

  // A device with 99 KiB (same name, for the test): the bk128 3-stage tile (126 KiB at head dim
  // 128) no longer fits, so the heuristic is used, with one warning.
  plan::Planner small(path, kDevice, kArch, 99 * 1024);
  c = small.choose(base_spec(p1k), p1k);
  CHECK_FALSE(c.tuned);
  CHECK(c.tile == plan::heuristic_tile(base_spec(p1k), 99 * 1024));
  CHECK(warns.count() == 1);
  small.choose(base_spec(p1k), p1k);
  CHECK(warns.count() == 1);

  // No database at all (disk cache disabled, SAGE2_DISABLE_TUNING): the heuristic, as the old
  // planner did; plan_attention_heuristic() and plan_attention(p, arch, facts) for a device
  // without a database return the same.
  plan::Planner none("", kDevice, kArch, kSmem);
  runtime::DeviceFacts facts;
  facts.name = "sage2 CPU test device without a tuning database";
  facts.max_shared_per_block_optin = kSmem;
  facts.arch = kArch;
  for (const auto& p : {p128, p1k, p96, problem(64, 100, 100), problem(512, 100, 100)}) {
    const plan::TileChoice h = none.choose(base_spec(p), p);
    CHECK_FALSE(h.tuned);
    CHECK(h.tile == kernels::TileConfig{64, 64, 4, 2});
    // The default family on sm_90a: wgmma for 8-bit up to head dim 256, with its own default tile.
    const kernels::KernelSpec d = plan::plan_attention_heuristic(p, kArch, kSmem);
    CHECK(d.family == (p.head_dim <= 256 ? kernels::KernelFamily::AttentionWgmma : kernels::KernelFamily::AttentionMma));
    CHECK(d.tile == (p.head_dim <= 256 ? kernels::attention_family(kernels::KernelFamily::AttentionWgmma).default_tile(d, kSmem) : h.tile));
    CHECK(d.tile == none.choose(d, p).tile);
    CHECK(d.tile == runtime::plan_attention(p, kArch, facts).tile);
  }
  // A device too small for any tile: Unsupported, and nothing memoised.
  plan::Planner tiny("", kDevice, kArch, 8 * 1024);
  CHECK_THROWS_AS(tiny.choose(base_spec(p128), p128), Error);
  CHECK(tiny.memoised() == 0);
}

TEST_CASE("autotune: the code version names the library and hashes the kernels it generates") {
  const std::string v = jit::code_version("0.1.0");
  CHECK(v == jit::code_version("0.1.0"));  // deterministic
  REQUIRE(v.size() == std::string("0.1.0+").size() + 16);
  CHECK(v.rfind("0.1.0+", 0) == 0);
  // Another library version is other code (its launch code may read the kernels differently).
  const std::string w = jit::code_version("0.1.1");
  CHECK(w.rfind("0.1.1+", 0) == 0);
  CHECK(w.substr(6) != v.substr(6));
  CHECK(plan::current_code_version() == jit::code_version(plan::library_version()));
  const plan::CodeIdentity here = plan::CodeIdentity::current();
  CHECK(here.code_version == plan::current_code_version());
  CHECK(here.nvrtc_version == jit::Toolchain::current().nvrtc_str());
}

namespace {
struct InfoCapture {
  static std::vector<std::string>& msgs() { static std::vector<std::string> v; return v; }
  static void sink(base::log::Level level, const std::string& m) {
    if (level == base::log::Level::Info) msgs().push_back(m);
  }
  InfoCapture() {
    msgs().clear();
    base::log::set_sink(&sink);
  }
  ~InfoCapture() { base::log::set_sink(nullptr); }
};
}  // namespace

TEST_CASE("autotune: entries measured on other compiled code are stale: kept in the file, not used, one log line") {
  DbTempDir tmp;
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  const plan::CodeIdentity here = plan::CodeIdentity::current();
  auto other_nvrtc = make_entry(make_key(96, 4096, 4096), {64, 32, 4, 2});
  other_nvrtc.nvrtc_version = "99.9";  // a fake NVRTC: same code version, another compiler
  auto older_build = make_entry(make_key(64, 4096, 4096), {64, 32, 4, 2});
  older_build.code_version = "0.1.0+" + std::string(16, 'a');  // what libsage2 0.1.0 wrote before
  REQUIRE(plan::merge_into_db(path, make_info(),
                        {make_entry(make_key(128, 4096, 4096), {128, 64, 8, 1}), other_nvrtc, older_build})
              .ok);
  InfoCapture info;
  const plan::Planner planner(path, kDevice, kArch, kSmem);
  const auto p128 = problem(128, 4096, 4096), p96 = problem(96, 4096, 4096), p64 = problem(64, 4096, 4096);
  CHECK(planner.choose(base_spec(p128), p128).tuned);
  CHECK_FALSE(planner.choose(base_spec(p96), p96).tuned);
  CHECK_FALSE(planner.choose(base_spec(p64), p64).tuned);
  CHECK(planner.db_entries() == 3);
  std::size_t stale_lines = 0;
  for (const auto& m : InfoCapture::msgs())
    if (m.find("2 of 3 entries were measured with other kernel code") != std::string::npos) ++stale_lines;
  CHECK(stale_lines == 1);

  // The identity decides, entry by entry.
  CHECK(here.matches(make_entry(make_key())));
  CHECK_FALSE(here.matches(other_nvrtc));
  CHECK_FALSE(here.matches(older_build));
  // A process without NVRTC runs whatever NVRTC built the cached kernels: any NVRTC will do.
  const plan::CodeIdentity no_nvrtc{here.code_version, ""};
  CHECK(no_nvrtc.matches(other_nvrtc));
  CHECK_FALSE(no_nvrtc.matches(older_build));

  // A new measurement of a stale key replaces it; the file stays readable throughout.
  auto fresh = make_entry(make_key(96, 4096, 4096), {64, 64, 4, 1});
  REQUIRE(plan::merge_into_db(path, make_info(), {fresh}).ok);
  const plan::DbReadResult r = plan::read_db(path, kDevice, kArch);
  REQUIRE(r.status == plan::DbStatus::Ok);
  CHECK(r.entries.size() == 3);
  CHECK(plan::TuningDb(r.entries).find(make_key(96, 4096, 4096), here)->tile == kernels::TileConfig{64, 64, 4, 1});
}

TEST_CASE("autotune: Contexts of one device and cache directory share one planner") {
  DbTempDir tmp;
  const std::string path = plan::db_path(tmp.path, kDevice, kArch);
  REQUIRE(plan::merge_into_db(path, make_info(), {make_entry(make_key(128, 4096, 4096), {128, 64, 8, 1})}).ok);
  const auto a = plan::shared_planner(path, kDevice, kArch, kSmem);
  const auto b = plan::shared_planner(path, kDevice, kArch, kSmem);
  CHECK(a.get() == b.get());
  CHECK(plan::shared_planner(path, kDevice, kArch, 99 * 1024).get() != a.get());
  CHECK(plan::shared_planner("", kDevice, kArch, kSmem).get() != a.get());
  const auto p = problem(128, 4096, 4096);
  CHECK(a->choose(base_spec(p), p).tuned);
  CHECK(b->memoised() == 1);
  // The path a Context uses: beside its cache; none when the disk cache or tuning is off (where
  // SAGE2_DISABLE_TUNING comes in: tests/cpu/base/test_config.cpp).
  base::config::ContextConfig c;
  c.cache_dir = tmp.path;
  CHECK(plan::context_db_path(c, kDevice, kArch) == path);
  c.disk_cache = false;
  CHECK(plan::context_db_path(c, kDevice, kArch).empty());
  c.disk_cache = true;
  c.tuning = false;
  CHECK(plan::context_db_path(c, kDevice, kArch).empty());
}

TEST_CASE("autotune: the planner is thread-safe and consistent under concurrent calls") {
  std::vector<plan::TuningEntry> entries;
  for (int hd : {64, 128})
    for (int q : {1024, 4096, 16384}) entries.push_back(make_entry(make_key(hd, q, q), {128, 64, 8, q == 4096 ? 1 : 2}));
  const plan::Planner planner(plan::TuningDb(entries), kArch, kSmem);
  std::vector<plan::AttentionProblem> problems;
  for (int hd : {64, 96, 128})
    for (std::int64_t n : {100, 1000, 3000, 5000, 20000, 70000}) problems.push_back(problem(hd, n, n));
  // Reference answers from one thread.
  std::vector<plan::TileChoice> expected;
  {
    const plan::Planner ref(plan::TuningDb(entries), kArch, kSmem);
    for (const auto& p : problems) expected.push_back(ref.choose(base_spec(p), p));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 2000; ++r) {
        const std::size_t i = static_cast<std::size_t>(r * 7 + t) % problems.size();
        const plan::TileChoice c = planner.choose(base_spec(problems[i]), problems[i]);
        if (!(c.tile == expected[i].tile) || c.tuned != expected[i].tuned) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches.load() == 0);
  std::set<std::string> keys;
  for (const auto& p : problems) keys.insert(plan::tuning_key(p).str());
  CHECK(planner.memoised() == keys.size());

  // Per-call cost once memoised: a key, a shared lock and a hash lookup (DESIGN: host overhead
  // <= 10 us per call in total; this part must be a small fraction of it).
  const auto spec = base_spec(problems[3]);
  const int n = 200000;
  const auto t0 = std::chrono::steady_clock::now();
  int tuned = 0;
  for (int i = 0; i < n; ++i) tuned += planner.choose(spec, problems[3]).tuned;
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  MESSAGE("memoised Planner::choose: " << ns << " ns per call");
  CHECK(tuned == n);
  CHECK(ns < 2000);
}
