#include "autotune_cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "autotune/tune.hpp"
#include "kernels/attention_family.hpp"
#include "plan/candidates.hpp"

namespace sage2::autotune_tool {

// --help: the two forms, what tuning does, the options by group (add_options below), the exit codes.
const char* const kUsageLines =
    "usage: sage2-autotune [--device N] [options]              tune on a GPU, write the tuning database\n"
    "       sage2-autotune --arch ARCH[,ARCH...] --compile-only [options]\n"
    "                                                          fill the kernel cache, no GPU needed\n";

const char* const kDescription =
    "Tuning compiles every candidate tile configuration of each specialisation (head dim x causal x\n"
    "dtype x qk bits), drops the ones that exceed the device's shared memory or spill registers, times\n"
    "the rest on synthetic inputs (CUDA events, warm-up, median, inputs rotated past the L2), and\n"
    "records the fastest per sequence-length bucket in <cache dir>/tuning-v1-<device>-<arch>.json.\n"
    "Attention calls read that database once per Context; without an entry they use the heuristic\n"
    "default at once (a call never waits for tuning). Options of the tuning group do nothing with\n"
    "--compile-only, --max-smem nothing without it: each such option given is named in a warning.\n";

const char* const kFooter =
    "exit codes: 0 done; 1 failure (a kernel did not compile, the cache or the database could not\n"
    "  be written, a problem could not be measured, the GPU failed); 2 usage error (also: a selection\n"
    "  that compiles nothing for the arch); 3 no CUDA driver; 4 no supported GPU at --device; 130\n"
    "  interrupted by Ctrl-C (143: SIGTERM) — the step in progress is finished and everything done so\n"
    "  far is kept in the cache and the database.";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::int64_t parse_int(const std::string& opt, const std::string& v, std::int64_t lo, std::int64_t hi) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size() || v.empty()) throw UsageError{opt + ": '" + v + "' is not an integer"};
  if (x < lo || x > hi)
    throw UsageError{opt + ": " + v + " is outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  return x;
}

double parse_double(const std::string& opt, const std::string& v, double lo, double hi) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !std::isfinite(x)) throw UsageError{opt + ": '" + v + "' is not a number"};
  if (x < lo || x > hi) throw UsageError{opt + ": " + v + " is outside the allowed range"};
  return x;
}


void add_options(CommandLine& c) {
  c.app.description(kDescription);
  c.app.footer(kFooter);
  c.app.allow_extras();  // unknown arguments: worded by the tool (unknown option '...')
  c.value("--head-dims", "LIST", kGroupSelection, "head dims (default 64,96,128)");
  c.value("--dtypes", "LIST", kGroupSelection, "f16, bf16 (default f16,bf16)");
  c.value("--causal", "LIST", kGroupSelection, "none, top-left, bottom-right; 0/1 (default none,top-left)");
  c.value("--bits", "LIST", kGroupSelection, "auto, 8, 4 (default auto: 8; 4 takes smooth Q; no 4 on Blackwell)");
  c.value("--pv", "LIST", kGroupSelection,
          "P~V precision: auto, fp8, fp16 (default auto: fp16 on sm_80/86/87,\nfp8 elsewhere; fp16 runs on the mma "
          "family); combinations an arch\ncannot run are skipped; a selection an arch runs none of is refused");
  c.value("--smooth-q", "MODE", kGroupSelection, "auto (on with 4-bit), on, off (default auto)");
  c.flag("--smooth-v", c.flag_smooth_v, kGroupSelection, "smooth V on (default off)");
  c.value("--family", "LIST", kGroupSelection,
          "auto, mma, wgmma (default auto: wgmma for 8-bit FP8 on sm_90a up to\nhead dim 256, mma otherwise); "
          "combinations a family cannot run are skipped");
  c.value("--tiles", "LIST", kGroupSelection,
          "only these candidates, BQxBKxWARPSxSTAGES (e.g. 64x64x4x2,128x64x8x2);\nthe heuristic default is always added");
  c.flag("--with-lse", c.flag_with_lse, kGroupSelection, "also compile the LSE-returning attention kernels");
  c.value("--masks", "LIST", kGroupSelection,
          "tensor masks the warm-up covers: none, bool, f16, bf16, f32 (default none)");
  c.flag("--varlen", c.flag_varlen, kGroupSelection, "the warm-up also covers variable-length calls");

  c.value("--device", "N", kGroupTuning, "GPU ordinal (default 0)");
  c.value("--seq-lens", "LIST", kGroupTuning, "sequence lengths, q = kv (default 1024,4096,16384)");
  c.value("--batch", "N", kGroupTuning, "batch size (default: 4, fewer above 4096 tokens: 16384/N, at least 1)");
  c.value("--heads", "N", kGroupTuning, "query heads (default 32)");
  c.value("--kv-heads", "N", kGroupTuning, "key/value heads (default = --heads; fewer for GQA)");
  c.value("--reps", "N", kGroupTuning, "at most N timed calls per candidate (default 20; at least 5)");
  c.value("--warmup", "N", kGroupTuning, "untimed calls before timing (default 2)");
  c.value("--budget", "SECONDS", kGroupTuning, "stop repeating a candidate after this much measured time (default 1)");
  c.value("--min-gain", "FRACTION", kGroupTuning,
          "keep the heuristic default unless a candidate is this much faster\n(default 0.02)");
  c.flag("--no-db", c.flag_no_db, kGroupTuning, "measure and report only; do not write the tuning database");

  c.flag("--compile-only", c.flag_compile_only, kGroupCompileOnly,
         "compile every candidate's quantize/ΔS/attention kernels into the cache");
  c.value("--arch", "LIST", kGroupCompileOnly,
          "archs of the table: sm_80, sm_86, sm_87, sm_89, sm_90a, sm_100, sm_103,\nsm_120, sm_121 (required with "
          "--compile-only; several: one cache for a\nfleet of mixed GPUs); without --compile-only: the arch the device\nruns (the device's, or SAGE2_TARGET_ARCH's through PTX)");
  c.value("--max-smem", "BYTES", kGroupCompileOnly,
          "opt-in shared memory per block to filter with (default: the arch's,\ne.g. 99 KiB for sm_86/89/120, 163 KiB "
          "for sm_80, 227 KiB for sm_90a/100)");

  c.value("--cache-dir", "DIR", kGroupCommon,
          "kernel cache and tuning database directory (default $SAGE2_CACHE_DIR,\nelse $XDG_CACHE_HOME/sage2, else "
          "~/.cache/sage2)");
  c.value("--jobs", "N", kGroupCommon, "parallel NVRTC compiles (default: CPU count, at most 16)");
  c.flag("--json", c.flag_json, kGroupCommon, "machine-readable report on stdout");
  c.value("--report", "FILE", kGroupCommon, "also write the JSON report to FILE (the table still goes to stdout)");
  c.flag("--progress", c.flag_progress, kGroupCommon, "progress on stderr even when it is not a terminal");
  c.flag("--no-progress", c.flag_no_progress, kGroupCommon, "no progress");
  c.flag("-v,--verbose", c.flag_verbose, kGroupCommon, "list every candidate and why it was rejected");
  tools::setup(c.app, "sage2-autotune", kUsageLines);
}

kernels::Arch parse_arch_arg(const std::string& a) {
  try {
    return kernels::parse_arch(a);
  } catch (const Error&) {
    // The library's message carries its "sage2 invalid_argument:" prefix; say it for a user.
    std::string known;
    for (const auto& i : kernels::arch_table()) known += std::string(known.empty() ? "" : ", ") + i.name;
    throw UsageError{"--arch " + a + ": not an arch sage2 generates code for (supported: " + known +
                     "; older than sm_80: unsupported)"};
  }
}

// The parsed command line as Options; UsageError names the option and the value.
Options options_from(const CommandLine& c) {
  Options o;
  if (!c.app.remaining().empty()) throw UsageError{tools::unknown_argument(c.app.remaining().front())};
  auto has = [&](const char* n) { return c.given(n); };
  auto v = [&](const char* n) -> const std::string& { return c[n]; };
  if (has("--device")) o.device = static_cast<int>(parse_int("--device", v("--device"), 0, 1 << 20));
  if (has("--arch")) {
    o.archs = parse_list<kernels::Arch>("--arch", v("--arch"), parse_arch_arg);
    o.arch = o.archs.front();
  }
  if (has("--pv"))
    o.pv = parse_list<PvPrecision>("--pv", v("--pv"), [&](const std::string& s) {
      if (s == "auto") return PvPrecision::Auto;
      if (s == "fp8") return PvPrecision::Fp8;
      if (s == "fp16") return PvPrecision::Fp16;
      throw UsageError{"--pv: '" + s + "' (auto, fp8 or fp16)"};
    });
  o.compile_only = c.flag_compile_only;
  if (has("--head-dims"))
    o.head_dims = parse_list<int>("--head-dims", v("--head-dims"),
                                  [&](const std::string& s) { return static_cast<int>(parse_int("--head-dims", s, 1, 512)); });
  if (has("--dtypes"))
    o.dtypes = parse_list<DType>("--dtypes", v("--dtypes"), [&](const std::string& s) {
      if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::F16;
      if (s == "bf16" || s == "bfloat16") return DType::BF16;
      throw UsageError{"--dtypes: '" + s + "' (f16 or bf16)"};
    });
  if (has("--causal"))
    o.causal = parse_list<CausalMode>("--causal", v("--causal"), [&](const std::string& s) {
      if (s == "none" || s == "0" || s == "false" || s == "full") return CausalMode::None;
      if (s == "top-left" || s == "top_left" || s == "1" || s == "true" || s == "causal") return CausalMode::TopLeft;
      if (s == "bottom-right" || s == "bottom_right") return CausalMode::BottomRight;
      throw UsageError{"--causal: '" + s + "' (none, top-left, bottom-right)"};
    });
  if (has("--bits"))
    o.bits = parse_list<int>("--bits", v("--bits"), [&](const std::string& s) {
      if (s == "auto") return 0;
      if (s == "4") return 4;
      if (s == "8") return 8;
      throw UsageError{"--bits: '" + s + "' (auto, 4 or 8)"};
    });
  if (has("--smooth-q")) {
    const std::string& s = v("--smooth-q");
    if (s == "auto") o.smooth_q = Toggle::Auto;
    else if (s == "on" || s == "1") o.smooth_q = Toggle::On;
    else if (s == "off" || s == "0") o.smooth_q = Toggle::Off;
    else throw UsageError{"--smooth-q: '" + s + "' (auto, on, off)"};
  }
  o.smooth_v = c.flag_smooth_v;
  if (has("--tiles"))
    o.tiles = parse_list<kernels::TileConfig>("--tiles", v("--tiles"), [&](const std::string& s) {
      auto t = plan::parse_tile(s);
      if (!t) throw UsageError{"--tiles: '" + s + "' is not BQxBKxWARPSxSTAGES (e.g. 64x64x4x2)"};
      return *t;
    });
  o.with_lse = c.flag_with_lse;
  o.varlen = c.flag_varlen;
  if (has("--masks"))
    o.masks = parse_list<MaskType>("--masks", v("--masks"), [&](const std::string& s) {
      for (MaskType t : {MaskType::None, MaskType::Bool, MaskType::F16, MaskType::BF16, MaskType::F32})
        if (s == mask_type_name(t)) return t;
      throw UsageError{"--masks: '" + s + "' (none, bool, f16, bf16, f32)"};
    });
  if (has("--seq-lens"))
    o.seq_lens = parse_list<std::int64_t>("--seq-lens", v("--seq-lens"),
                                          [&](const std::string& s) { return parse_int("--seq-lens", s, 1, 1 << 22); });
  if (has("--batch")) o.batch = parse_int("--batch", v("--batch"), 1, 1 << 16);
  if (has("--heads")) o.heads = parse_int("--heads", v("--heads"), 1, 1 << 12);
  if (has("--kv-heads")) o.kv_heads = parse_int("--kv-heads", v("--kv-heads"), 1, 1 << 12);
  if (has("--reps")) o.reps = static_cast<int>(parse_int("--reps", v("--reps"), 1, 10000));
  if (has("--warmup")) o.warmup = static_cast<int>(parse_int("--warmup", v("--warmup"), 0, 1000));
  if (has("--budget")) o.budget = parse_double("--budget", v("--budget"), 0, 3600);
  if (has("--min-gain")) o.min_gain = parse_double("--min-gain", v("--min-gain"), 0, 10);
  o.no_db = c.flag_no_db;
  if (has("--max-smem")) o.max_smem = static_cast<int>(parse_int("--max-smem", v("--max-smem"), 1024, 1 << 30));
  if (has("--cache-dir")) {
    o.cache_dir = v("--cache-dir");
    if (o.cache_dir.empty()) throw UsageError{"--cache-dir needs a non-empty value"};
  }
  if (has("--jobs")) o.jobs = static_cast<int>(parse_int("--jobs", v("--jobs"), 1, 256));
  o.json = c.flag_json;
  if (has("--report")) {
    o.report = v("--report");
    if (o.report.empty()) throw UsageError{"--report needs a file name"};
  }
  if (has("--family")) {
    o.families.clear();
    for (const auto& f : split(v("--family"))) {
      if (f == "auto") { o.families.push_back(std::nullopt); continue; }
      const auto fam = kernels::parse_attention_family(f);
      if (!fam) throw UsageError{"--family: '" + f + "' is not auto, mma or wgmma"};
      o.families.push_back(fam);
    }
    if (o.families.empty()) throw UsageError{"--family needs a list"};
  }
  // The later of --progress / --no-progress wins, as when the arguments were read one by one.
  for (const CLI::Option* opt : c.app.parse_order()) {
    if (opt->get_name() == "--progress") o.progress = 1;
    if (opt->get_name() == "--no-progress") o.progress = 0;
  }
  o.verbose = c.flag_verbose;
  if (o.compile_only && !o.arch) throw UsageError{"--compile-only needs --arch (e.g. sm_89, sm_90a or a list)"};
  if (!o.compile_only && o.archs.size() > 1) throw UsageError{"several --arch values need --compile-only"};
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  if (o.heads % o.kv_heads != 0)
    throw UsageError{"--heads " + std::to_string(o.heads) + " is not a multiple of --kv-heads " + std::to_string(o.kv_heads)};
  if (o.jobs == 0) o.jobs = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  return o;
}

// The options given that do nothing in the chosen mode: the tuning group's under --compile-only,
// the compile-only group's (but --arch, which names the device's arch when tuning) without it.
std::vector<std::string> idle_options(const CommandLine& c, bool compile_only) {
  std::vector<std::string> v;
  for (const CLI::Option* opt : c.app.get_options()) {
    if (opt->count() == 0) continue;
    const std::string& g = opt->get_group();
    if (compile_only ? g == kGroupTuning : g == kGroupCompileOnly && opt->get_name() != "--arch")
      v.push_back(opt->get_name());
  }
  return v;
}

// The selection options as the library's specialisation grid (autotune/tune.hpp).
std::vector<plan::Specialisation> specialisations(const Options& o, kernels::Arch arch,
                                                  std::vector<std::string>* left_out) {
  autotune::SpecialisationGrid g;
  static_cast<plan::ShapeSelection&>(g) = o;
  g.bits = o.bits;
  g.pv = o.pv;
  g.families = o.families;
  if (o.smooth_q != Toggle::Auto) g.smooth_q = o.smooth_q == Toggle::On;
  g.smooth_v = o.smooth_v;
  g.with_lse = o.with_lse;
  return autotune::specialisations(g, arch, left_out);
}

// The calls the warm-up covers (plan/warmup.hpp): the selection options as a user's call options.
plan::WarmupSelection warmup_selection(const Options& o) {
  plan::WarmupSelection w;
  static_cast<plan::ShapeSelection&>(w) = o;
  w.qk_bits.clear();
  for (int b : o.bits) w.qk_bits.push_back(b == 4 ? QkBits::Int4 : b == 8 ? QkBits::Int8 : QkBits::Auto);
  w.pv = o.pv;
  w.smooth_q = {o.smooth_q};
  w.smooth_v = {o.smooth_v};
  w.lse = o.with_lse ? std::vector<bool>{false, true} : std::vector<bool>{false};
  w.masks = o.masks;
  w.varlen = o.varlen;
  w.families = o.families;
  return w;
}

// A selection that gives no specialisation on `arch` would compile nothing, print an empty table
// and look like success. The library's reasons for what it left out, joined; nullopt when the
// selection gives something.
std::optional<std::string> why_selection_is_empty(const Options& o, kernels::Arch arch) {
  std::vector<std::string> why;
  if (!specialisations(o, arch, &why).empty()) return std::nullopt;
  std::string m;
  for (const auto& w : why) m += (m.empty() ? "" : "; ") + w;
  return m;
}

}  // namespace sage2::autotune_tool
