// Compiling many kernel specs in the CPU suites: two NVRTC programs at a time (the CI machine has
// two cores and programs are independent), every outcome kept for the assertions.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"

namespace sage2::test {

struct Outcome {
  kernels::KernelSpec spec;
  bool ok = false;
  std::string error;  // the exception text when !ok
  jit::CompiledKernel k;
};

inline std::vector<Outcome> compile_all(const std::vector<kernels::KernelSpec>& specs) {
  std::vector<Outcome> out(specs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      out[i].spec = specs[i];
      try {
        out[i].k = jit::compile(specs[i]);
        out[i].ok = true;
      } catch (const std::exception& e) {
        out[i].error = e.what();
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  return out;
}

// One attention kernel of a covering set: every code-relevant axis of a spec.
struct AttentionVariant {
  kernels::Arch arch;
  int head_dim;
  int bits;
  CausalMode causal;
  DType dtype;
  bool sq, sk, sv;
  bool two_level, lse;
  kernels::TileConfig tile;
  bool main = false;  // a main configuration: must not spill
};

inline kernels::KernelSpec to_spec(kernels::KernelFamily family, const AttentionVariant& v) {
  kernels::KernelSpec s;
  s.family = family;
  s.arch = v.arch;
  s.head_dim = v.head_dim;
  s.qk_bits = v.bits;
  s.causal = v.causal;
  s.in_dtype = v.dtype;
  s.out_dtype = v.dtype;
  s.smooth_q = v.sq;
  s.smooth_k = v.sk;
  s.smooth_v = v.sv;
  s.two_level_accum = v.two_level;
  s.return_lse = v.lse;
  s.tile = v.tile;
  return s;
}

// The values a covering set takes on each axis (checked by the suites against what they promise).
struct Coverage {
  std::set<int> dims;
  std::set<std::pair<kernels::Arch, int>> arch_bits;
  std::set<CausalMode> causal;
  std::set<DType> dtype;
  std::set<std::tuple<bool, bool, bool>> smooth;
  std::set<bool> two, lse;
  std::set<std::tuple<int, int, int, int>> tiles;
};
// Every variant validates, passes its family's check at 227 KB and is distinct; the causal
// modes, dtypes, two-level and LSE settings all occur, with at least `min_smooth` smoothing
// combinations and 6 tiles. The suites check the head dims (and archs) they promise.
inline Coverage coverage(kernels::KernelFamily family, const std::vector<AttentionVariant>& set, std::size_t min_smooth) {
  Coverage c;
  std::set<std::string> keys;
  for (const auto& v : set) {
    const kernels::KernelSpec s = to_spec(family, v);
    CHECK_NOTHROW(s.validate());
    CHECK_NOTHROW(kernels::attention_family(family).check(s, 227 * 1024));
    CHECK_MESSAGE(keys.insert(s.key()).second, "duplicate variant " << s.key());
    c.dims.insert(v.head_dim);
    c.arch_bits.insert({v.arch, v.bits});
    c.causal.insert(v.causal);
    c.dtype.insert(v.dtype);
    c.smooth.insert({v.sq, v.sk, v.sv});
    c.two.insert(v.two_level);
    c.lse.insert(v.lse);
    c.tiles.insert({v.tile.bq, v.tile.bk, v.tile.warps, v.tile.stages});
  }
  CHECK(c.causal.size() == 3);
  CHECK(c.dtype.size() == 2);
  CHECK(c.smooth.size() >= min_smooth);
  CHECK(c.two.size() == 2);
  CHECK(c.lse.size() == 2);
  CHECK(c.tiles.size() >= 6);
  return c;
}

// The spec's family refuses it on a device with `max_smem_optin` bytes of shared memory per block:
// Unsupported, and the message says it is the shared memory.
inline void check_refused_for_shared_memory(const kernels::KernelSpec& s, int max_smem_optin) {
  try {
    kernels::check_attention_config(s, max_smem_optin);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("shared memory") != std::string::npos);
  }
}

// The kernels a compile test builds, and whether each is a main one (must not spill).
struct SpecList {
  std::vector<kernels::KernelSpec> specs;
  std::vector<bool> main;
  void add(const kernels::KernelSpec& s, bool is_main) {
    specs.push_back(s);
    main.push_back(is_main);
  }
};

// Compiles every spec (two at a time) and checks what holds for every kernel: it compiled, the
// entry is the spec's, an ELF cubin, 1..255 registers, static shared memory within 48 KB, and for
// the main ones (unless `may_spill(spec)`) no spills and no stack. `extra` adds the
// suite's own checks. Prints a table (key, registers, spills, stack, shared memory, compile time).
inline void compile_and_check(const SpecList& list, const char* what,
                              const std::function<bool(const kernels::KernelSpec&)>& may_spill,
                              const std::function<void(const Outcome&)>& extra) {
  REQUIRE_MESSAGE(jit::nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  const std::vector<bool>& main = list.main;
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = compile_all(list.specs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double max_s = 0;
  std::ostringstream table;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const jit::CompiledKernel& k = r.k;
    CHECK(k.entry == r.spec.entry_name());
    REQUIRE(k.cubin.size() > 4);
    CHECK(std::string(k.cubin.data(), 4) == "\x7f" "ELF");
    CHECK(k.facts.registers > 0);
    CHECK(k.facts.registers <= 255);
    if (main[i] && !may_spill(r.spec)) {
      CHECK_MESSAGE(k.facts.spill_store_bytes == 0, k.log);
      CHECK(k.facts.spill_load_bytes == 0);
      CHECK(k.facts.stack_frame_bytes == 0);
    }
    CHECK(k.facts.static_shared_bytes <= 48 * 1024);
    extra(r);
    const kernels::AttentionFamilyDesc* f = kernels::find_attention_family(r.spec.family);
    max_s = std::max(max_s, k.compile_seconds);
    table << "\n  " << k.key << "  regs " << k.facts.registers << " spill " << k.facts.spill_store_bytes << "/"
          << k.facts.spill_load_bytes << " stack " << k.facts.stack_frame_bytes << " smem "
          << (f ? f->kernel_config(r.spec).smem : 0) << " compile " << k.compile_seconds << " s";
  }
  MESSAGE(results.size() << " " << std::string(what) << " kernels compiled in " << wall << " s wall (2 threads), slowest "
                         << max_s << " s" << table.str());
}

}  // namespace sage2::test
