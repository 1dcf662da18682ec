// Specification: every quantize-family kernel NVRTC-compiles for sm_89 and sm_90a, for a covering
// set of the code-relevant axes (op × qk_bits × smooth flags × input dtype × consumer family ×
// head dims 1..512 × tiles), without register spills or stack use; a broken source is reported
// with the key and the whole NVRTC log; SAGE2_DUMP_DIR receives the source, PTX and log.
#include <doctest/doctest.h>

#include "scoped_env.hpp"

#include "jit_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <unistd.h>

#include "jit/compiler.hpp"
#include "kernels/quantize_shape.hpp"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

struct Variant {
  QuantOp op;
  Arch arch;
  int head_dim;
  int bits;
  bool sq, sk, sv;
  DType in;
  KernelFamily consumer;
  TileConfig tile;
  bool sampled = false;  // KernelSpec::sampled_stats (Auto's split stage)
  bool at_once = false;  // KernelSpec::stats_at_once (channel_stats over a sampled head, few heads)
};

KernelSpec to_spec(const Variant& v) {
  KernelSpec s;
  s.family = KernelFamily::Quantize;
  s.op = v.op;
  s.arch = v.arch;
  s.head_dim = v.head_dim;
  s.qk_bits = v.bits;
  s.smooth_q = v.sq;
  s.smooth_k = v.sk;
  s.smooth_v = v.sv;
  s.in_dtype = v.in;
  s.consumer = v.consumer;
  s.tile = v.tile;
  s.sampled_stats = v.sampled;
  s.stats_at_once = v.at_once;
  return s;
}

constexpr auto S89 = Arch::Sm89;
constexpr auto S90 = Arch::Sm90a;
constexpr auto F16 = DType::F16;
constexpr auto BF16 = DType::BF16;
constexpr auto MMA = KernelFamily::AttentionMma;
constexpr auto WG = KernelFamily::AttentionWgmma;
const TileConfig T_DEF{128, 64, 4, 1};
const TileConfig T_WG8{128, 128, 8, 1};   // two consumer warpgroups, 128-key tiles
const TileConfig T_WG4{64, 64, 4, 1};     // one warpgroup, 64 query rows
const TileConfig T_MMA8{256, 64, 8, 1};   // 8 mma warps × 32 rows
const TileConfig T_SMALL{64, 48, 4, 1};   // bk 48 → 16-token V tiles
const TileConfig T_BK32{64, 32, 2, 1};
const TileConfig T_BIG{512, 128, 16, 1};  // largest CTAs: 16 warps, 512 query rows

// A covering set: every value of every axis appears with each op it affects, and both archs.
std::vector<Variant> covering_set() {
  using Q = QuantOp;
  return {
      // op          arch head bits  sq     sk     sv     in    consumer tile
      {Q::QuantizeQ, S90, 1, 8, false, true, false, F16, MMA, T_DEF},
      {Q::QuantizeQ, S89, 40, 4, true, true, false, BF16, MMA, T_DEF},
      {Q::QuantizeQ, S90, 80, 8, true, false, false, BF16, WG, T_WG8},
      {Q::QuantizeQ, S89, 128, 8, false, false, false, F16, MMA, T_MMA8},
      {Q::QuantizeQ, S90, 128, 8, true, true, false, F16, WG, T_WG8},
      {Q::QuantizeQ, S89, 128, 4, true, true, false, F16, MMA, T_DEF},
      {Q::QuantizeQ, S90, 256, 4, false, true, false, F16, MMA, T_DEF},
      {Q::QuantizeQ, S90, 512, 8, true, true, false, BF16, WG, T_WG4},
      {Q::QuantizeQ, S89, 512, 4, false, false, false, F16, MMA, T_DEF},
      {Q::QuantizeQ, S89, 512, 4, true, true, false, BF16, MMA, T_BIG},  // rolled (uncached) path

      {Q::QuantizeK, S89, 1, 4, false, false, false, F16, MMA, T_DEF},
      {Q::QuantizeK, S90, 40, 8, false, true, false, BF16, WG, T_WG4},
      {Q::QuantizeK, S89, 80, 8, false, true, false, F16, MMA, T_SMALL},
      {Q::QuantizeK, S90, 128, 8, false, true, false, F16, WG, T_WG8},
      {Q::QuantizeK, S89, 256, 4, false, true, false, BF16, MMA, T_DEF},
      {Q::QuantizeK, S90, 512, 4, false, false, false, F16, MMA, T_BK32},
      {Q::QuantizeK, S90, 512, 8, false, true, false, BF16, MMA, T_BIG},

      {Q::QuantizeV, S89, 1, 8, false, false, true, F16, MMA, T_DEF},
      {Q::QuantizeV, S90, 40, 8, false, false, false, BF16, WG, T_WG8},
      {Q::QuantizeV, S89, 80, 8, false, false, false, BF16, MMA, T_SMALL},
      {Q::QuantizeV, S90, 128, 8, false, false, true, F16, WG, T_WG8},
      {Q::QuantizeV, S90, 72, 8, false, false, false, F16, WG, T_WG8},  // 12 chunks: 4 lanes x 3
      {Q::QuantizeV, S89, 256, 8, false, false, true, F16, MMA, T_BK32},
      {Q::QuantizeV, S90, 512, 8, false, false, false, BF16, MMA, T_DEF},

      {Q::ChannelStats, S90, 1, 8, false, false, false, BF16, MMA, T_DEF},
      {Q::ChannelStats, S89, 40, 8, false, false, false, F16, MMA, T_DEF},
      {Q::ChannelStats, S90, 80, 8, false, false, false, F16, WG, T_WG8},
      {Q::ChannelStats, S89, 128, 8, false, false, false, BF16, MMA, T_DEF},
      {Q::ChannelStats, S90, 256, 8, false, false, false, F16, MMA, T_DEF},
      {Q::ChannelStats, S89, 512, 8, false, false, false, BF16, MMA, T_DEF},

      // The sampled statistics (one chunk per sampled unit, k̄ / μ over the sample, V's headroom,
      // overflow maxima and the last tile's fix-up, first-bad flags by global minima).
      {Q::ChannelStats, S90, 128, 8, false, false, false, BF16, WG, T_WG8, true},
      {Q::ChannelStats, S89, 72, 8, false, false, false, F16, MMA, T_DEF, true},
      // ... and its at-once form (every sampled unit at once: 512 threads up to hd 128, 1024 above)
      {Q::ChannelStats, S90, 64, 8, false, false, false, F16, WG, T_WG8, true, true},
      {Q::ChannelStats, S89, 128, 8, false, false, false, BF16, MMA, T_DEF, true, true},
      {Q::ChannelStats, S90, 256, 8, false, false, false, BF16, MMA, T_DEF, true, true},
      {Q::ChannelStats, S89, 40, 8, false, false, false, F16, MMA, T_DEF, true, true},
      {Q::QuantizeQ, S89, 128, 4, true, true, false, F16, MMA, T_DEF, true},
      {Q::QuantizeK, S90, 128, 8, false, true, false, F16, WG, T_WG8, true},
      {Q::QuantizeK, S89, 256, 4, false, true, false, BF16, MMA, T_DEF, true},
      {Q::QuantizeV, S90, 128, 8, false, false, true, F16, WG, T_WG8, true},
      {Q::QuantizeV, S89, 40, 8, false, false, false, BF16, MMA, T_SMALL, true},
      {Q::QuantizeV, S90, 512, 8, false, false, true, BF16, MMA, T_DEF, true},
      {Q::QuantizeV, S90, 64, 8, false, false, false, F16, WG, T_WG8, true},
      {Q::QuantizeV, S90, 128, 8, false, false, false, BF16, WG, T_WG8, true},
      {Q::QuantizeV, S89, 128, 8, false, false, true, F16, MMA, T_DEF, true},
  };
}

using sage2::test::compile_all;
using sage2::test::Outcome;

using EnvGuard = sage2::test::ScopedEnv;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("jit: the covering set covers every value of every code-relevant axis") {
  std::set<std::string> keys;
  std::map<QuantOp, std::set<int>> dims;
  std::set<std::pair<QuantOp, Arch>> arch;
  std::set<std::pair<QuantOp, DType>> dtype;
  std::set<std::pair<QuantOp, int>> bits;
  std::set<std::pair<QuantOp, KernelFamily>> consumer;
  std::set<std::tuple<bool, bool>> q_smooth;
  std::set<bool> k_smooth, v_smooth;
  for (const auto& v : covering_set()) {
    const KernelSpec s = to_spec(v);
    CHECK_NOTHROW(s.validate());
    CHECK_MESSAGE(keys.insert(s.key()).second, "duplicate variant " << s.key());
    dims[v.op].insert(v.head_dim);
    arch.insert({v.op, v.arch});
    dtype.insert({v.op, v.in});
    if (v.op == QuantOp::QuantizeQ || v.op == QuantOp::QuantizeK) {
      bits.insert({v.op, v.bits});
      consumer.insert({v.op, v.consumer});
    }
    if (v.op == QuantOp::QuantizeQ) q_smooth.insert({v.sq, v.sk});
    if (v.op == QuantOp::QuantizeK) k_smooth.insert(v.sk);
    if (v.op == QuantOp::QuantizeV) v_smooth.insert(v.sv);
  }
  for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV}) {
    for (int d : {1, 40, 80, 128, 256, 512}) CHECK_MESSAGE(dims[op].count(d), quant_op_name(op) << " d" << d);
    for (Arch a : {S89, S90}) CHECK(arch.count({op, a}));
    for (DType t : {F16, BF16}) CHECK(dtype.count({op, t}));
  }
  for (QuantOp op : {QuantOp::QuantizeQ, QuantOp::QuantizeK}) {
    CHECK(bits.count({op, 4}));
    CHECK(bits.count({op, 8}));
    CHECK(consumer.count({op, MMA}));
    CHECK(consumer.count({op, WG}));
  }
  CHECK(q_smooth.size() == 4);
  CHECK(k_smooth.size() == 2);
  CHECK(v_smooth.size() == 2);
}

TEST_CASE("jit: every quantize variant compiles for sm_89 and sm_90a without spills") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  std::vector<KernelSpec> specs;
  for (const auto& v : covering_set()) specs.push_back(to_spec(v));
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = compile_all(specs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, std::vector<double>> seconds;  // per op
  for (const auto& r : results) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const CompiledKernel& k = r.k;
    CHECK(k.key == make_build(r.spec).key);
    CHECK(k.entry == r.spec.entry_name());
    CHECK(k.arch == r.spec.arch);
    REQUIRE(k.cubin.size() > 4);
    CHECK(std::string(k.cubin.data(), 4) == "\x7f" "ELF");
    CHECK(k.log.find("'" + k.entry + "'") != std::string::npos);  // ptxas reported our entry
    const QuantizeKernelConfig cfg = quantize_kernel_config(r.spec);
    CHECK(k.facts.registers > 0);
    CHECK(k.facts.registers <= 255);
    CHECK(k.facts.registers * cfg.threads <= 65536);  // the CTA fits one SM's register file
    CHECK(k.facts.spill_store_bytes == 0);
    CHECK(k.facts.spill_load_bytes == 0);
    CHECK(k.facts.stack_frame_bytes == 0);
    CHECK(k.facts.static_shared_bytes <= 48 * 1024);
    CHECK(k.compile_seconds > 0);
    CHECK(k.nvrtc_major >= 12);
    seconds[quant_op_name(r.spec.op)].push_back(k.compile_seconds);
  }
  std::ostringstream m;
  m << results.size() << " quantize kernels compiled in " << wall << " s wall (2 threads); per op max/mean s:";
  for (auto& [op, v] : seconds) {
    double sum = 0;
    for (double x : v) sum += x;
    m << ' ' << op << ' ' << *std::max_element(v.begin(), v.end()) << '/' << sum / v.size();
  }
  MESSAGE(m.str());
}

TEST_CASE("jit: a broken source raises CompileError carrying the key and the whole log") {
  KernelSpec s;
  s.family = KernelFamily::Quantize;
  s.op = QuantOp::QuantizeQ;
  const std::string bad =
      "#include \"quantize_params.cuh\"\n"
      "extern \"C\" __global__ void sage2_quantize_q(sage2::dev::QuantizeParams p) {\n"
      "  sage2_identifier_that_does_not_exist = 1;\n"
      "}\n";
  try {
    compile_source(s, bad);
    FAIL("compile_source accepted a broken source");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::CompileError);
    const std::string what = e.what();
    CHECK(what.find(s.key()) != std::string::npos);
    CHECK(what.find("sage2_identifier_that_does_not_exist") != std::string::npos);  // the log
    CHECK(what.find("error") != std::string::npos);
    CHECK(what.find("sm_90a") != std::string::npos);
  }
}

TEST_CASE("jit: a source without the entry's template constants is rejected by the template") {
  KernelSpec s;
  s.family = KernelFamily::Quantize;
  s.op = QuantOp::QuantizeK;
  CHECK_THROWS_AS(compile_source(s, "#include \"quantize_qk.cuh\"\n"), Error);
}

TEST_CASE("jit: SAGE2_DUMP_DIR receives the generated source, the PTX and the log") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sage2_jit_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  KernelSpec s;
  s.family = KernelFamily::Quantize;
  s.op = QuantOp::ChannelStats;
  s.head_dim = 64;
  s.arch = Arch::Sm89;
  {
    EnvGuard g("SAGE2_DUMP_DIR", dir.string());
    const CompiledKernel k = compile(s);
    CHECK(!k.cubin.empty());
  }
  std::map<std::string, std::string> by_ext;
  for (const auto& e : fs::directory_iterator(dir)) by_ext[e.path().extension().string()] = read_file(e.path());
  REQUIRE(by_ext.count(".cu"));
  REQUIRE(by_ext.count(".ptx"));
  REQUIRE(by_ext.count(".log"));
  CHECK(by_ext[".cu"] == generate_source(s));
  CHECK(by_ext[".ptx"].find("sage2_channel_stats") != std::string::npos);
  CHECK(by_ext[".ptx"].find(".target sm_89") != std::string::npos);
  CHECK(by_ext[".log"].find(s.key()) != std::string::npos);
  CHECK(by_ext[".log"].find("registers") != std::string::npos);
  fs::remove_all(dir);
}

// A one-launch quantize stage (fused, cluster): every spec compiles to `entry`, one CTA size for
// every item kind, no spills or stack, static shared memory within what a CTA may declare.
static void check_whole_stage(const std::vector<KernelSpec>& specs, const std::string& entry) {
  for (const auto& r : compile_all(specs)) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const CompiledKernel& k = r.k;
    CHECK(k.entry == entry);
    CHECK(k.log.find("'" + entry + "'") != std::string::npos);
    const FusedQuantizeConfig cfg = fused_quantize_config(r.spec);
    CHECK(cfg.threads == quantize_kernel_config(r.spec).threads);
    CHECK(k.facts.registers > 0);
    CHECK(k.facts.registers * cfg.threads <= 65536);
    CHECK(k.facts.spill_store_bytes == 0);
    CHECK(k.facts.spill_load_bytes == 0);
    CHECK(k.facts.stack_frame_bytes == 0);
    CHECK(k.facts.static_shared_bytes <= 48 * 1024);
    MESSAGE(r.spec.key().substr(0, 80) << " regs " << k.facts.registers << " threads " << cfg.threads
                                       << " smem " << k.facts.static_shared_bytes);
  }
}

// The fused stage (QuantOp::Fused): one module holds every item body, so the covering set is
// the product of the axes that change its code — both archs, qk_bits 4/8, smooth Q/K/V on and
// off, fp16/bf16, mma and wgmma layouts, head dims from 1 to 512 — compiled without spills,
// stack or more static shared memory than a CTA may declare.
TEST_CASE("jit: the fused quantize kernel compiles for sm_89 and sm_90a without spills") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  using Q = QuantOp;
  const std::vector<Variant> fused = {
      // op     arch head bits  sq     sk     sv     in    consumer tile
      {Q::Fused, S90, 128, 8, false, true, false, F16, MMA, T_DEF},   // the default 8-bit path
      {Q::Fused, S90, 128, 8, true, true, true, BF16, WG, T_WG8},     // wgmma layout, all smoothing
      {Q::Fused, S90, 128, 8, false, false, false, F16, WG, T_WG4},
      {Q::Fused, S89, 128, 4, true, true, false, F16, MMA, T_DEF},    // the default 4-bit path
      {Q::Fused, S89, 128, 8, false, false, true, BF16, MMA, T_DEF},
      {Q::Fused, S90, 64, 4, true, false, true, BF16, MMA, T_BK32},
      {Q::Fused, S89, 64, 8, false, true, false, F16, MMA, T_SMALL},
      {Q::Fused, S90, 256, 8, true, true, false, F16, WG, T_WG8},
      {Q::Fused, S89, 256, 4, true, true, true, BF16, MMA, T_DEF},
      {Q::Fused, S90, 40, 8, false, true, true, F16, MMA, T_MMA8},
      {Q::Fused, S89, 1, 4, true, true, false, F16, MMA, T_DEF},
      {Q::Fused, S90, 512, 8, true, true, true, BF16, MMA, T_DEF},
      {Q::Fused, S89, 512, 4, true, true, false, F16, MMA, T_BIG},
  };
  std::set<std::pair<Arch, int>> arch_bits;
  std::set<std::tuple<bool, bool, bool>> smooth;
  std::set<DType> dtypes;
  std::vector<KernelSpec> specs;
  for (const auto& v : fused) {
    specs.push_back(to_spec(v));
    arch_bits.insert({v.arch, v.bits});
    smooth.insert({v.sq, v.sk, v.sv});
    dtypes.insert(v.in);
  }
  CHECK(arch_bits.size() == 4);  // sm_89 and sm_90a, each with 4 and 8 bits
  CHECK(dtypes.size() == 2);
  CHECK(smooth.size() >= 6);
  check_whole_stage(specs, "sage2_quantize_fused");
}

// The one-pass K/V kernel (QuantOp::QuantizeKV, SAGE2_QUANT_PATH=onepass): opt-in on every arch
// from sm_80 (cp.async), so it compiles for each arch's P̃V (FP16 V̂ on
// sm_80) at the head dims and bits it runs, within the registers of its CTAs per SM, with its
// shared memory (one item's: the statistics ring or a V tile's scratch) leaving min_ctas CTAs per SM.
// Varlen specs are refused by name.
TEST_CASE("jit: the one-pass K/V quantize kernel compiles for sm_80, sm_89, sm_90a, sm_100 and sm_120") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  using Q = QuantOp;
  const std::vector<Variant> kv = {
      // op           arch         head bits  sq     sk     sv     in    consumer tile
      {Q::QuantizeKV, S90, 128, 8, false, true, false, BF16, WG, T_WG8},
      {Q::QuantizeKV, S90, 64, 8, false, false, true, F16, WG, T_WG4},
      {Q::QuantizeKV, S90, 256, 8, false, true, true, BF16, MMA, T_DEF},
      {Q::QuantizeKV, S89, 128, 4, true, true, false, F16, MMA, T_DEF},
      {Q::QuantizeKV, S89, 1, 8, false, true, true, BF16, MMA, T_DEF},
      {Q::QuantizeKV, Arch::Sm80, 96, 8, false, true, true, F16, MMA, T_DEF},
      {Q::QuantizeKV, Arch::Sm100, 72, 8, false, true, false, BF16, MMA, T_DEF},
      {Q::QuantizeKV, Arch::Sm120, 128, 8, false, true, true, F16, MMA, T_BK32},
  };
  std::vector<KernelSpec> specs;
  for (const auto& v : kv) {
    KernelSpec s = to_spec(v);
    s.pv_fp16 = v.arch == Arch::Sm80;  // FP8 V̂ does not exist there
    specs.push_back(s);
  }
  for (const auto& r : compile_all(specs)) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const CompiledKernel& k = r.k;
    CHECK(k.entry == "sage2_quantize_kv");
    const KvQuantizeConfig cfg = kv_quantize_config(r.spec);
    CHECK(cfg.threads == quantize_kernel_config(r.spec).threads);
    CHECK(k.facts.registers > 0);
    CHECK(k.facts.registers * cfg.threads * cfg.stats.min_ctas <= 65536);
    // one item's shared memory, all dynamic: min_ctas CTAs fit an SM
    CHECK(k.facts.static_shared_bytes <= 64);
    CHECK((k.facts.static_shared_bytes + cfg.dynamic_smem + 1024) * cfg.stats.min_ctas <=
          static_cast<std::uint64_t>(arch_info(r.spec.arch).max_smem_optin + 1024));
    // At three CTAs per SM (80 registers) ptxas spills a few words (measured 16-24 bytes).
    CHECK(k.facts.spill_store_bytes <= 64);
    MESSAGE(r.spec.key().substr(0, 80) << " regs " << k.facts.registers << " spill " << k.facts.spill_store_bytes
                                       << " smem " << k.facts.static_shared_bytes << " + " << cfg.dynamic_smem
                                       << " (ring " << cfg.stats.stats_ring << ")");
  }
  // Varlen calls run the split path.
  KernelSpec bad = to_spec({Q::QuantizeKV, S90, 128, 8, false, true, false, F16, MMA, T_DEF});
  bad.varlen = true;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("varlen"), Error);
}

// The cluster stage (QuantOp::Cluster, sm_90a only): one module with every item body plus the
// cluster exchange, compiled for the covering set of its sm_90a axes (bits, smoothing, dtypes,
// consumer layouts, head dims 1..512) without spills, stack or more static shared memory than a
// CTA may declare; on sm_89 the spec is refused (no thread-block clusters).
TEST_CASE("jit: the cluster quantize kernel compiles for sm_90a without spills; sm_89 refuses it") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  using Q = QuantOp;
  const std::vector<Variant> cluster = {
      // op       arch head bits  sq     sk     sv     in    consumer tile
      {Q::Cluster, S90, 128, 8, false, true, false, F16, WG, T_WG4},   // the sm_90a default
      {Q::Cluster, S90, 128, 8, true, true, true, BF16, WG, T_WG8},
      {Q::Cluster, S90, 64, 8, false, false, false, F16, WG, T_WG4},
      {Q::Cluster, S90, 128, 4, true, true, false, F16, MMA, T_DEF},
      {Q::Cluster, S90, 64, 4, true, false, true, BF16, MMA, T_BK32},
      {Q::Cluster, S90, 256, 8, true, true, false, F16, WG, T_WG8},
      {Q::Cluster, S90, 40, 8, false, true, true, F16, MMA, T_MMA8},
      {Q::Cluster, S90, 1, 4, true, true, false, F16, MMA, T_DEF},
      {Q::Cluster, S90, 256, 8, true, true, true, BF16, MMA, T_DEF},
  };
  std::vector<KernelSpec> specs;
  for (const auto& v : cluster) specs.push_back(to_spec(v));
  check_whole_stage(specs, "sage2_quantize_cluster");
  Variant ada = cluster[3];
  ada.arch = S89;
  CHECK_THROWS_WITH_AS(to_spec(ada).validate(), doctest::Contains("needs thread-block clusters"), Error);
}

