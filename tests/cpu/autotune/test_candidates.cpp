// Specification (CPU / CI): tuning candidates and the filters applied before any timing.
//  - every candidate tile is one the mma family accepts; the heuristic's tiles are candidates;
//  - a tile that needs more shared memory than the device allows is rejected without compiling;
//  - the ptxas facts of the compiled cubin reject spills, stack frames and register overuse;
//  - with real NVRTC compiles: a spilling candidate is rejected, a clean one accepted, the
//    heuristic default is always prepared, every kernel lands in the cache once, and a second
//    run finds them all there with the same facts.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "plan/candidates.hpp"
#include "plan/call_kernels.hpp"
#include "plan/attention_spec.hpp"
#include "autotune/prepare.hpp"
#include "cache/disk_cache.hpp"
#include "kernels/attention_family.hpp"
#include "base/log.hpp"

using namespace sage2;
using namespace sage2::autotune;

namespace {

struct CandTempDir {
  std::string path;
  CandTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-cand-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~CandTempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

// Quiet: the compiler warns about spilling kernels, which this test compiles on purpose.
struct QuietLog {
  QuietLog() { base::log::set_sink([](base::log::Level, const std::string&) {}); }
  ~QuietLog() { base::log::set_sink(nullptr); }
};

const Candidate* find(const SpecialisationPlan& p, kernels::TileConfig t) {
  for (const auto& c : p.candidates)
    if (c.tile == t) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("autotune: candidate tiles are valid, distinct, and include the heuristic's") {
  for (kernels::Arch arch : {kernels::Arch::Sm89, kernels::Arch::Sm90a}) {
    CAPTURE(kernels::arch_name(arch));
    const auto& tiles = plan::tile_candidates(kernels::KernelFamily::AttentionMma, arch);
    REQUIRE(tiles.size() >= 12);
    std::set<std::string> seen;
    for (const auto& t : tiles) {
      CAPTURE(plan::tile_str(t));
      CHECK(seen.insert(plan::tile_str(t)).second);
      plan::Specialisation s = plan::Specialisation::defaults(arch, 64, CausalMode::None, DType::F16);
      s.family = kernels::KernelFamily::AttentionMma;
      CHECK_FALSE(plan::static_reject_reason(s.attention_spec(arch, t), INT_MAX).has_value());
      CHECK(plan::parse_tile(plan::tile_str(t)) == std::optional<kernels::TileConfig>(t));
    }
    // the heuristic default is a candidate at every head dim and code width
    for (int hd : {32, 64, 128, 256, 512})
      for (int bits : {4, 8}) {
        plan::Specialisation s = plan::Specialisation::defaults(arch, hd, CausalMode::None, DType::F16);
        s.family = kernels::KernelFamily::AttentionMma;
        s.qk_bits = bits;
        const kernels::TileConfig h = plan::heuristic_tile(s.attention_spec(arch, {}), plan::default_max_smem_optin(arch));
        CHECK(std::find(tiles.begin(), tiles.end(), h) != tiles.end());
      }
    CHECK(plan::tile_candidates(kernels::KernelFamily::Quantize, arch).empty());
  }
  // wgmma (sm_90a, 8-bit): every candidate is valid at head dims 64 and 128 on an unlimited device.
  const auto& wg = plan::tile_candidates(kernels::KernelFamily::AttentionWgmma, kernels::Arch::Sm90a);
  REQUIRE(wg.size() >= 6);
  for (int hd : {64, 128})
    for (const auto& t : wg) {
      CAPTURE(plan::tile_str(t));
      const plan::Specialisation s = plan::Specialisation::defaults(kernels::Arch::Sm90a, hd, CausalMode::None, DType::F16);
      const kernels::KernelSpec k = s.attention_spec(kernels::Arch::Sm90a, t);
      CHECK(k.family == kernels::KernelFamily::AttentionWgmma);  // the sm_90a 8-bit default
      CHECK_FALSE(plan::static_reject_reason(k, INT_MAX).has_value());
    }
  CHECK(plan::parse_tile("64x64x4x2") == std::optional<kernels::TileConfig>(kernels::TileConfig{64, 64, 4, 2}));
  CHECK_FALSE(plan::parse_tile("64x64x4").has_value());
  CHECK_FALSE(plan::parse_tile("64x64x4x2x").has_value());
  CHECK_FALSE(plan::parse_tile("bq64.bk64.w0.s2").has_value());
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm89) == 101376);
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm90a) == 232448);
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm80) == 166912);
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm86) == 101376);
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm100) == 232448);
  CHECK(plan::default_max_smem_optin(kernels::Arch::Sm120) == 101376);
}

TEST_CASE("autotune: the static filter rejects tiles over the shared memory limit and invalid tiles") {
  // The defaults: 8-bit everywhere; FP16 P̃V on Ampere only.
  CHECK(plan::Specialisation::defaults(kernels::Arch::Sm89, 128, CausalMode::None, DType::F16).qk_bits == 8);
  CHECK_FALSE(plan::Specialisation::defaults(kernels::Arch::Sm89, 128, CausalMode::None, DType::F16).pv_fp16);
  CHECK(plan::Specialisation::defaults(kernels::Arch::Sm86, 128, CausalMode::None, DType::F16).pv_fp16);
  CHECK(plan::Specialisation::defaults(kernels::Arch::Sm86, 128, CausalMode::None, DType::F16).str() == "d128 full f16 int8 sk pv16");
  plan::Specialisation s = plan::Specialisation::defaults(kernels::Arch::Sm89, 128, CausalMode::None, DType::F16);
  s.qk_bits = 4;  // 4-bit (opt-in) with smooth Q
  s.smooth_q = true;
  plan::Specialisation s8 = s;  // 8-bit rows are twice as wide as 4-bit ones
  s8.qk_bits = 8;
  s8.smooth_q = false;
  const kernels::KernelSpec big = s8.attention_spec(kernels::Arch::Sm89, {128, 128, 8, 3});
  const std::size_t need = kernels::attention_kernel_config(big).smem;
  REQUIRE(need > 101376);
  auto why = plan::static_reject_reason(big, 101376);
  REQUIRE(why.has_value());
  CHECK(why->find("shared memory") != std::string::npos);
  CHECK(why->find(std::to_string(need)) != std::string::npos);
  CHECK_FALSE(plan::static_reject_reason(big, static_cast<int>(need)).has_value());
  // Invalid for the family whatever the device.
  CHECK(plan::static_reject_reason(s.attention_spec(kernels::Arch::Sm89, {64, 48, 4, 1}), INT_MAX)->find("multiple of 32") !=
        std::string::npos);
  CHECK(plan::static_reject_reason(s.attention_spec(kernels::Arch::Sm89, {64, 64, 8, 1}), INT_MAX).has_value());
  CHECK(plan::static_reject_reason(s.attention_spec(kernels::Arch::Sm89, {512, 64, 4, 1}), INT_MAX).has_value());

  // The heuristic default: the preferred tile when it fits, smaller ones on smaller devices, and
  // Unsupported when nothing fits.
  const kernels::KernelSpec base = s.attention_spec(kernels::Arch::Sm89, {});
  CHECK(plan::heuristic_tile(base, 101376) == kernels::TileConfig{64, 64, 4, 2});
  const kernels::KernelSpec k512 = s.attention_spec(kernels::Arch::Sm89, {64, 64, 4, 2});
  kernels::KernelSpec hd512 = k512;
  hd512.head_dim = 512;
  const std::size_t s2 = kernels::attention_kernel_config(hd512).smem;
  const kernels::TileConfig lowered = plan::heuristic_tile(hd512, static_cast<int>(s2) - 1);
  CHECK_FALSE(lowered == kernels::TileConfig{64, 64, 4, 2});
  hd512.tile = lowered;
  CHECK(kernels::attention_kernel_config(hd512).smem < s2);
  CHECK_THROWS_AS(plan::heuristic_tile(base, 4096), Error);
}

TEST_CASE("autotune: the ptxas filter rejects spills, stack frames and too many registers") {
  plan::Specialisation mma = plan::Specialisation::defaults(kernels::Arch::Sm90a, 128, CausalMode::None, DType::F16);
  mma.family = kernels::KernelFamily::AttentionMma;
  const kernels::KernelSpec spec = mma.attention_spec(kernels::Arch::Sm90a, {128, 64, 8, 2});
  jit::PtxasFacts f;
  f.registers = 128;
  CHECK_FALSE(plan::ptxas_reject_reason(spec, f).has_value());
  f.spill_store_bytes = 8;
  CHECK(plan::ptxas_reject_reason(spec, f)->find("spills") != std::string::npos);
  f.spill_store_bytes = 0;
  f.spill_load_bytes = 4;
  CHECK(plan::ptxas_reject_reason(spec, f)->find("spills") != std::string::npos);
  f.spill_load_bytes = 0;
  f.stack_frame_bytes = 16;
  CHECK(plan::ptxas_reject_reason(spec, f)->find("stack") != std::string::npos);
  f.stack_frame_bytes = 0;
  f.registers = 255;  // 255 x 256 threads fit in 65536
  CHECK_FALSE(plan::ptxas_reject_reason(spec, f).has_value());
  kernels::KernelSpec w16 = spec;  // 16 warps: 160 x 512 threads do not
  w16.tile = {256, 64, 16, 2};
  f.registers = 160;
  CHECK(plan::ptxas_reject_reason(w16, f)->find("registers") != std::string::npos);
  f.registers = 128;
  CHECK_FALSE(plan::ptxas_reject_reason(w16, f).has_value());
  f.registers = -1;   // not reported: accepted
  CHECK_FALSE(plan::ptxas_reject_reason(spec, f).has_value());
}

TEST_CASE("autotune: real NVRTC compiles — spilling candidate rejected, clean one accepted, cache filled once") {
  REQUIRE_MESSAGE(jit::nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  QuietLog quiet;
  CandTempDir tmp;
  const cache::DiskCache cache(tmp.path);
  const kernels::Arch arch = kernels::Arch::Sm90a;
  plan::Specialisation s = plan::Specialisation::defaults(arch, 128, CausalMode::None, DType::F16);
  s.family = kernels::KernelFamily::AttentionMma;  // the portable family's tiles (wgmma has its own)
  const kernels::TileConfig clean{64, 64, 4, 1}, spilling{128, 64, 4, 1}, too_big{128, 128, 8, 3};

  PrepareOptions o;
  o.arch = arch;
  o.max_smem_optin = 99 * 1024;  // so that too_big is over the limit on this "device"
  o.jobs = 2;
  o.tiles = {clean, spilling, too_big};
  std::vector<PrepareProgress> seen;
  o.progress = [&](const PrepareProgress& p) { seen.push_back(p); };
  PrepareStats st;
  const auto plans = prepare_kernels({s}, cache, o, st);
  REQUIRE(plans.size() == 1);
  const SpecialisationPlan& p = plans[0];
  REQUIRE(p.has_heuristic);
  CHECK(p.heuristic == kernels::TileConfig{64, 64, 4, 2});
  REQUIRE(p.candidates.size() == 4);  // the three given + the heuristic default

  const Candidate* c = find(p, too_big);
  REQUIRE(c);
  CHECK(c->state == CandidateState::Rejected);
  CHECK(c->reason.find("shared memory") != std::string::npos);
  CHECK_FALSE(c->attention_built);  // never compiled

  c = find(p, spilling);
  REQUIRE(c);
  INFO("the bq128 x 4-warp tile (two 16-row tiles per warp) needs all 255 registers at head dim 128 on sm_90a; "
       "if the template changed so that it no longer spills, pick another spilling candidate for this test");
  CHECK(c->attention_built);
  CHECK(c->facts.spill_store_bytes + c->facts.spill_load_bytes > 0);
  CHECK(c->state == CandidateState::Rejected);
  CHECK(c->reason.find("spills") != std::string::npos);
  CHECK_FALSE(c->compiled);  // its quantize kernels were not prepared

  c = find(p, clean);
  REQUIRE(c);
  CHECK(c->state == CandidateState::Ok);
  CHECK(c->facts.registers > 0);
  CHECK(c->facts.spill_store_bytes == 0);
  CHECK(c->compiled);
  c = p.heuristic_candidate();
  REQUIRE(c);
  CHECK(c->tile == kernels::TileConfig{64, 64, 4, 2});
  CHECK(c->compiled);

  // Kernels: three attention kernels (the spilling one is cached too: its facts are what rejects
  // it) and the five quantize kernels shared by the two accepted 64x64x4 tiles (channel_stats in
  // both forms; no ΔS at 8-bit).
  // Keys are the disk cache keys (jit::make_build).
  std::set<std::string> expected;
  auto key_of = [](const kernels::KernelSpec& spec) { return jit::make_build(spec).key; };
  for (const auto& t : {clean, spilling, kernels::TileConfig{64, 64, 4, 2}}) expected.insert(key_of(s.attention_spec(arch, t)));
  // (the calls' quantize kernels: Auto's split stage with sampled statistics)
  auto auto_spec = [&](const kernels::TileConfig& t) {
    kernels::KernelSpec a = s.attention_spec(arch, t);
    a.sampled_stats = true;
    return a;
  };
  for (const auto& k : plan::companion_specs(auto_spec(clean))) expected.insert(key_of(k));
  for (const auto& k : plan::companion_specs(auto_spec({64, 64, 4, 2}))) expected.insert(key_of(k));
  CHECK(expected.size() == 8);
  CHECK(std::set<std::string>(st.keys.begin(), st.keys.end()) == expected);
  CHECK(st.compiled == 8);
  CHECK(st.from_cache == 0);
  CHECK(st.compile_errors == 0);
  CHECK(st.store_failed == 0);
  CHECK_FALSE(st.interrupted);
  std::set<std::string> listed;
  for (const auto& e : cache.list()) {
    CHECK(e.valid);
    listed.insert(e.key);
  }
  CHECK(listed == expected);
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back().done == seen.back().total);
  CHECK(seen.back().total == 8);

  // Second run: everything comes from the cache, with the same ptxas facts and verdicts.
  PrepareStats st2;
  o.progress = nullptr;
  const auto again = prepare_kernels({s}, cache, o, st2);
  CHECK(st2.compiled == 0);
  CHECK(st2.from_cache == 8);
  for (const auto& t : {clean, spilling, too_big, kernels::TileConfig{64, 64, 4, 2}}) {
    CAPTURE(plan::tile_str(t));
    CHECK(find(again[0], t)->state == find(p, t)->state);
    CHECK(find(again[0], t)->facts.registers == find(p, t)->facts.registers);
    CHECK(find(again[0], t)->facts.spill_store_bytes == find(p, t)->facts.spill_store_bytes);
  }

  // A stop request before the start: nothing is compiled, every candidate is skipped.
  CandTempDir tmp2;
  std::atomic<bool> stop{true};
  o.stop = &stop;
  PrepareStats st3;
  const auto none = prepare_kernels({s}, cache::DiskCache(tmp2.path), o, st3);
  CHECK(st3.interrupted);
  CHECK(st3.kernels == 0);
  CHECK(none[0].count(CandidateState::Skipped) == 3);
  CHECK(cache::DiskCache(tmp2.path).list().empty());
}
