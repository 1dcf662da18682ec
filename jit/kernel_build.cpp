#include "jit/kernel_build.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/attention_family.hpp"
#include "jit/nvrtc_library.hpp"
#include "jit/source_builder.hpp"
#include "jit/embedded_templates.hpp"
#include "base/hash.hpp"

#ifndef SAGE2_VERSION
#define SAGE2_VERSION "unknown"
#endif

namespace sage2::jit {

using namespace kernels;  // jit compiles what kernels/ describes
namespace {

// FNV-1a over length-prefixed fields, so that no two different field lists hash alike by
// shifting bytes from one field to the next.
struct FieldHash {
  std::uint64_t h = base::fnv1a64("sage2-build-v1", 14);
  void add(std::string_view s) {
    const std::uint64_t n = s.size();
    h = base::fnv1a64(&n, sizeof n, h);
    h = base::fnv1a64(s.data(), s.size(), h);
  }
  void add(std::uint64_t v) { h = base::fnv1a64(&v, sizeof v, h); }
};

std::string stem_of(const KernelSpec& spec, const std::string& source, const std::vector<std::string>& options,
                    const std::string& library) {
  FieldHash f;
  f.add(library);
  f.add(spec.entry_name());  // also NVRTC's program name
  f.add(static_cast<std::uint64_t>(options.size()));
  for (const auto& o : options) f.add(o);
  f.add(templates_hash());   // the headers the source includes
  f.add(source);
  return spec.key() + "|sage2:" + library + "|code:" + base::hex16(f.h);
}

// One spec per family and quantize op on each arch, as the planner would build them. A spec the
// generator refuses contributes its error text (a change there is a change of the code, too).
// sm_89 takes the 4-bit path (smooth Q, ΔS), sm_80 the FP16 P̃V one: every template and option
// of the generator shows in some stem.
std::vector<KernelSpec> reference_specs() {
  std::vector<KernelSpec> v;
  for (Arch arch : {Arch::Sm89, Arch::Sm90a, Arch::Sm80}) {
    for (const AttentionFamilyDesc* fam : attention_families()) {
      KernelSpec a;
      a.family = fam->family;
      a.consumer = fam->family;
      a.arch = arch;
      a.qk_bits = arch == Arch::Sm89 ? 4 : 8;
      a.pv_fp16 = default_pv_fp16(arch);
      if (!family_runs(*fam, arch, a.qk_bits, a.head_dim, a.pv_fp16)) continue;
      a.smooth_q = arch == Arch::Sm89;  // the 4-bit path smooths Q, which adds ΔS
      a.tile = fam->reference_tile;
      v.push_back(a);
      for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV,
                         QuantOp::Fused})
        v.push_back(quantize_spec_for(a, op));
      if (arch == Arch::Sm90a) v.push_back(quantize_spec_for(a, QuantOp::Cluster));
      KernelSpec d = a;
      d.family = KernelFamily::DeltaS;
      v.push_back(d.canonical());
    }
    KernelSpec p;
    p.family = KernelFamily::Probe;
    p.arch = arch;
    v.push_back(p.canonical());
  }
  return v;
}

std::string compute_code_version(const std::string& library) {
  FieldHash f;
  const Toolchain tc{library, 0, 0};
  for (const KernelSpec& s : reference_specs()) {
    try {
      f.add(make_build(s, tc).stem);
    } catch (const std::exception& e) {
      f.add(s.key());
      f.add(e.what());
    }
  }
  return library + "+" + base::hex16(f.h);
}

}  // namespace

Toolchain Toolchain::current() {
  Toolchain t;
  t.library = SAGE2_VERSION;
  if (const nvrtc::Api* a = nvrtc::try_api()) {
    t.nvrtc_major = a->major;
    t.nvrtc_minor = a->minor;
  }
  return t;
}

std::string Toolchain::nvrtc_str() const {
  return has_nvrtc() ? std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor) : std::string();
}

std::string nvrtc_key_field(int major, int minor) {
  return kNvrtcKeyTag + std::to_string(major) + "." + std::to_string(minor);
}

KernelBuild make_build(const KernelSpec& spec, std::string source, std::vector<std::string> options,
                       const Toolchain& tc) {
  KernelBuild b;
  b.spec = spec;
  b.source = std::move(source);
  b.options = std::move(options);
  b.toolchain = tc;
  b.stem = stem_of(spec, b.source, b.options, tc.library);
  b.key = b.stem + nvrtc_key_field(tc.nvrtc_major, tc.nvrtc_minor);
  return b;
}

KernelBuild make_build(const KernelSpec& spec, std::string source, const Toolchain& tc) {
  return make_build(spec, std::move(source), nvrtc_options(spec), tc);
}

KernelBuild make_build(const KernelSpec& spec, const Toolchain& tc) {
  return make_build(spec, generate_source(spec), nvrtc_options(spec), tc);
}

KernelBuild make_quick_build(const KernelSpec& spec, const Toolchain& tc) {
  std::vector<std::string> options = nvrtc_options(spec);
  options.push_back(kQuickOption);
  options.push_back(kQuickPtxasOption);
  return make_build(spec, generate_source(spec), std::move(options), tc);
}

bool is_quick_build(const KernelBuild& b) {
  return std::find(b.options.begin(), b.options.end(), kQuickOption) != b.options.end();
}

std::string code_version(const std::string& library) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(library); it != memo.end()) return it->second;
  }
  std::string v = compute_code_version(library);  // outside the lock: it generates ~20 sources
  std::lock_guard<std::mutex> lock(mu);
  return memo.emplace(library, std::move(v)).first->second;
}

}  // namespace sage2::jit
