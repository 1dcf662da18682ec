// sage2-autotune: compile and tune the attention kernels for a GPU, record the fastest tile
// configurations in the tuning database beside the kernel cache, and print what was gained over
// the heuristic defaults. With --compile-only it fills the kernel cache for an arch without any
// GPU or driver (a build machine preparing a cache bundle for a fleet), for one arch of the table
// or several (--arch sm_80,sm_89,sm_90a,sm_120: one cache, one `sage2-cache export` bundle).
//
//   sage2-autotune [--device N] [selection] [timing options] [--json] [--progress]
//   sage2-autotune --arch ARCH[,ARCH...] --compile-only [selection] [--json]
//   sage2-autotune --help | --version
//
// Options that do nothing in the chosen mode (the "tuning (GPU)" group under --compile-only,
// --max-smem without it) are named in a warning on stderr; the exit status does not change.
//
// Exit codes (also in --help and docs/deploying.md, "Tools"):
//   0   done
//   1   failure: a kernel failed to compile, the cache or the database could not be written, a
//       problem could not be measured, or the GPU failed
//   2   usage error (one line naming the option or value), including a selection that gives no
//       specialisation on an arch (--arch sm_80 --pv fp8: nothing to compile; the reason is said)
//   3   no CUDA driver (tuning needs one; --compile-only does not)
//   4   no supported GPU at --device (older than sm_80, or no such device)
//   130 interrupted by SIGINT (143: SIGTERM): the step in progress was finished and everything
//       done so far is in the cache and the database
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plan/candidates.hpp"
#include "autotune/prepare.hpp"
#include "autotune/timing.hpp"
#include "autotune/tune.hpp"
#include "autotune/warmup.hpp"
#include "plan/tuning_db.hpp"
#include "cache/disk_cache.hpp"
#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"
#include "base/config.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/device.hpp"
#include "base/log.hpp"
#include "tool_cli.hpp"

using namespace sage2;
using nlohmann::json;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoDriver = 3;
constexpr int kExitNoGpu = 4;

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

// ---- signals ---------------------------------------------------------------------------------
std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) {
  g_signal = sig;
  g_stop.store(true);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // A second Ctrl-C terminates at once (every write is atomic anyway); system calls in progress
  // (NVRTC, file writes) are restarted rather than failed.
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupted_exit_code() { return 128 + (g_signal ? static_cast<int>(g_signal) : SIGINT); }

// ---- options ---------------------------------------------------------------------------------
using tools::UsageError;

struct Options {
  int device = 0;
  std::optional<kernels::Arch> arch;  // the first of archs
  std::vector<kernels::Arch> archs;   // --arch LIST
  bool compile_only = false;
  std::vector<int> head_dims = {64, 96, 128};
  std::vector<DType> dtypes = {DType::F16, DType::BF16};
  std::vector<CausalMode> causal = {CausalMode::None, CausalMode::TopLeft};
  std::vector<int> bits = {0};  // 0 = auto
  std::vector<PvPrecision> pv = {PvPrecision::Auto};
  std::vector<std::optional<kernels::KernelFamily>> families = {std::nullopt};  // nullopt = auto
  Toggle smooth_q = Toggle::Auto;
  bool smooth_v = false;
  std::vector<kernels::TileConfig> tiles;
  bool with_lse = false;
  std::vector<MaskType> masks = {MaskType::None};
  bool varlen = false;
  std::vector<std::int64_t> seq_lens = {1024, 4096, 16384};
  std::int64_t batch = 0;  // 0: by length
  std::int64_t heads = 32, kv_heads = 0;
  int reps = 20, warmup = 2;
  double budget = 1.0, min_gain = 0.02;
  bool no_db = false;
  int max_smem = 0;
  std::string cache_dir;
  int jobs = 0;
  bool json = false, verbose = false;
  std::string report;  // --report FILE: the JSON report also written there
  int progress = -1;  // -1 auto (TTY), 0 off, 1 on
};

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

template <class T, class F>
std::vector<T> parse_list(const std::string& opt, const std::string& v, F&& one) {
  std::vector<T> out;
  for (const auto& item : split(v)) {
    T x = one(item);
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  }
  if (out.empty()) throw UsageError{opt + " needs at least one value"};
  return out;
}

// Option groups of --help. The warnings for options that do nothing in the chosen mode read them,
// so an option added to a group is covered at once.
const char* const kGroupSelection = "selection";
const char* const kGroupTuning = "tuning (GPU)";
const char* const kGroupCompileOnly = "compile-only";
const char* const kGroupCommon = "common";

// The command line: CLI11 tokenises it and keeps each option's text; the values are converted
// and checked after parsing (parse_int, parse_list, ...) so that each message names the option
// and the value.
struct CommandLine {
  CLI::App app{"", "sage2-autotune"};
  std::map<std::string, std::string> text;  // option name -> the value given
  bool flag_compile_only = false, flag_smooth_v = false, flag_with_lse = false, flag_varlen = false, flag_no_db = false, flag_json = false,
       flag_progress = false, flag_no_progress = false, flag_verbose = false;

  CLI::Option* value(const std::string& name, const char* type, const char* group, const std::string& help) {
    return app.add_option(name, text[name], help)->type_name(type)->group(group);
  }
  CLI::Option* flag(const std::string& names, bool& v, const char* group, const std::string& help) {
    return app.add_flag(names, v, help)->group(group);
  }
  bool given(const std::string& name) const { return app.count(name) > 0; }
  const std::string& operator[](const std::string& name) const { return text.at(name); }
};

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
          "--compile-only; several: one cache for a\nfleet of mixed GPUs); without --compile-only: the device's arch");
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
                                                  std::vector<std::string>* left_out = nullptr) {
  autotune::SpecialisationGrid g;
  g.head_dims = o.head_dims;
  g.dtypes = o.dtypes;
  g.causal = o.causal;
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
  w.head_dims = o.head_dims;
  w.dtypes = o.dtypes;
  w.causal = o.causal;
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

// What the warm-up covers, for the report and the table: the selection, the archs, the kernels.
json warmup_json(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch) {
  return json{{"selection", w.describe()},
              {"arch", kernels::arch_name(arch)},
              {"combinations", r.set.combinations},
              {"kernels", r.set.specs.size()},
              {"left_out", r.set.left_out},
              {"compiled", r.stats.compiled},
              {"from_cache", r.stats.from_cache},
              {"compile_errors", r.stats.compile_errors}};
}

void print_warmup(const plan::WarmupSelection& w, const autotune::WarmupResult& r, kernels::Arch arch) {
  std::printf("warm-up for %s: %zu kernels cover every call with %s\n", kernels::arch_name(arch), r.set.specs.size(),
              w.describe().c_str());
  for (const auto& why : r.set.left_out) std::printf("  not covered (nothing runs it on %s): %s\n", kernels::arch_name(arch), why.c_str());
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

std::string human_seconds(double s) {
  char b[32];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return b;
}

class Progress {
 public:
  enum Mode { Off, Bar, Lines };
  explicit Progress(Mode m) : mode_(m) {}

  void phase(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = name;
    t0_ = std::chrono::steady_clock::now();
  }
  // `done`/`total` count steps; `done_w`/`total_w` weigh them for the ETA.
  void update(std::size_t done, std::size_t total, double done_w, double total_w, const std::string& label) {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode_ == Off) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double frac = total_w > 0 ? std::min(1.0, done_w / total_w) : 0;
    const double eta = done_w > 0 ? elapsed / done_w * std::max(0.0, total_w - done_w) : NAN;
    std::string l = label.size() > 70 ? label.substr(0, 67) + "..." : label;
    char head[96];
    if (mode_ == Bar) {
      const int width = 24, fill = static_cast<int>(frac * width + 0.5);
      std::string bar(static_cast<std::size_t>(fill), '#');
      bar.resize(width, '.');
      std::snprintf(head, sizeof head, "\r\033[K[%s] %3.0f%% %zu/%zu ", bar.c_str(), frac * 100, done, total);
      line_ = std::string(head) + phase_ + " " + l + "  ETA " + human_seconds(eta);
      std::fputs(line_.c_str(), stderr);
      drawn_ = true;
    } else {
      std::snprintf(head, sizeof head, "[%3.0f%%] %zu/%zu ", frac * 100, done, total);
      std::fprintf(stderr, "%s%s %s (ETA %s)\n", head, phase_.c_str(), l.c_str(), human_seconds(eta).c_str());
    }
    std::fflush(stderr);
  }
  void message(const std::string& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode_ == Bar && drawn_) std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "%s\n", m.c_str());
    if (mode_ == Bar && drawn_) std::fputs(line_.c_str(), stderr);
    std::fflush(stderr);
  }
  void end() {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode_ == Bar && drawn_) std::fputs("\r\033[K", stderr);
    drawn_ = false;
    std::fflush(stderr);
  }

 private:
  Mode mode_;
  std::mutex mu_;
  std::string phase_, line_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

Progress* g_progress = nullptr;
bool g_verbose = false;

// Library messages go through the progress printer so they do not tear the bar. The per-kernel
// "spills registers" warnings of the compiler are expected here (rejecting spilling candidates
// is the point) and are reported in the candidate list instead, unless --verbose.
void log_sink(base::log::Level level, const std::string& m) {
  if (static_cast<int>(level) > static_cast<int>(base::log::current_level())) return;
  if (!g_verbose && level == base::log::Level::Warn && m.rfind("kernel ", 0) == 0 &&
      m.find(" spills registers") != std::string::npos)
    return;
  const char* tag = level == base::log::Level::Error ? "error" : level == base::log::Level::Warn ? "warning" :
                    level == base::log::Level::Info ? "info" : "debug";
  const std::string line = std::string("sage2 ") + tag + ": " + m;
  if (g_progress) g_progress->message(line);
  else std::fprintf(stderr, "%s\n", line.c_str());
}

void note_interrupt_once() {
  static std::atomic<bool> said{false};
  if (g_stop.load() && !said.exchange(true) && g_progress)
    g_progress->message("sage2-autotune: interrupted; finishing the current step and saving what is done "
                        "(Ctrl-C again to abort at once)");
}

// ---- reports ---------------------------------------------------------------------------------
// The NVRTC of the tuning entries' CodeIdentity.
std::string nvrtc_string() { return jit::Toolchain::current().nvrtc_str(); }

json facts_json(const jit::PtxasFacts& f) {
  return json{{"registers", f.registers},
              {"spill_store_bytes", f.spill_store_bytes},
              {"spill_load_bytes", f.spill_load_bytes},
              {"stack_frame_bytes", f.stack_frame_bytes}};
}

json plan_json(const autotune::SpecialisationPlan& p) {
  json j = {{"name", p.spec.str()},
            {"family", p.spec.family ? json(kernels::family_name(*p.spec.family)) : json("auto")},
            {"head_dim", p.spec.head_dim},
            {"causal", causal_mode_name(p.spec.causal)},
            {"dtype", dtype_name(p.spec.dtype)},
            {"qk_bits", p.spec.qk_bits},
            {"smooth_q", p.spec.smooth_q},
            {"smooth_k", p.spec.smooth_k},
            {"smooth_v", p.spec.smooth_v},
            {"return_lse", p.spec.return_lse},
            {"pv", p.spec.pv_fp16 ? "fp16" : "fp8"},
            {"heuristic", p.has_heuristic ? json(plan::tile_str(p.heuristic)) : json(nullptr)},
            {"ok", p.count(autotune::CandidateState::Ok)},
            {"rejected", p.count(autotune::CandidateState::Rejected)},
            {"compile_errors", p.count(autotune::CandidateState::CompileError)},
            {"skipped", p.count(autotune::CandidateState::Skipped)},
            {"candidates", json::array()}};
  if (!p.has_heuristic) j["heuristic_problem"] = p.heuristic_problem;
  for (const auto& c : p.candidates) {
    json cj = {{"tile", plan::tile_str(c.tile)},
               {"state", autotune::candidate_state_name(c.state)},
               {"heuristic", c.heuristic}};
    if (!c.reason.empty()) cj["reason"] = c.reason;
    if (c.attention_built) cj["ptxas"] = facts_json(c.facts);
    j["candidates"].push_back(cj);
  }
  return j;
}

json stats_json(const autotune::PrepareStats& s) {
  return json{{"prepared", s.kernels},     {"compiled", s.compiled},         {"from_cache", s.from_cache},
              {"store_failed", s.store_failed}, {"compile_errors", s.compile_errors}, {"skipped", s.skipped},
              {"seconds", s.seconds},      {"keys", s.keys},                 {"errors", s.errors}};
}

void print_plans(const std::vector<autotune::SpecialisationPlan>& plans, bool verbose) {
  std::printf("%-30s %6s %4s %8s %6s  %s\n", "specialisation", "tiles", "ok", "rejected", "errors", "heuristic default");
  for (const auto& p : plans) {
    std::printf("%-30s %6zu %4zu %8zu %6zu  %s\n", p.spec.str().c_str(), p.candidates.size(),
                p.count(autotune::CandidateState::Ok), p.count(autotune::CandidateState::Rejected),
                p.count(autotune::CandidateState::CompileError),
                p.has_heuristic ? plan::tile_str(p.heuristic).c_str() : p.heuristic_problem.c_str());
    if (!verbose) continue;
    for (const auto& c : p.candidates) {
      std::string extra;
      if (c.attention_built) extra = " regs " + std::to_string(c.facts.registers);
      std::printf("    %-18s %-13s%s%s%s\n", plan::tile_str(c.tile).c_str(), autotune::candidate_state_name(c.state),
                  c.heuristic ? " (heuristic)" : "", extra.c_str(), c.reason.empty() ? "" : ("  " + c.reason).c_str());
    }
  }
}

void print_stats(const autotune::PrepareStats& s) {
  std::printf("kernels: %zu ready (%zu compiled, %zu already cached)", s.kernels, s.compiled, s.from_cache);
  if (s.compile_errors) std::printf(", %zu failed to compile", s.compile_errors);
  if (s.store_failed) std::printf(", %zu not written to the cache", s.store_failed);
  if (s.skipped) std::printf(", %zu skipped (interrupted)", s.skipped);
  std::printf("; %.1f s\n", s.seconds);
  for (const auto& e : s.errors) std::printf("compile error: %s\n", e.c_str());
}

Progress::Mode progress_mode(const Options& o) {
  if (o.progress == 0) return Progress::Off;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (o.progress == 1) return tty ? Progress::Bar : Progress::Lines;
  return tty ? Progress::Bar : Progress::Off;
}

autotune::PrepareOptions prepare_options(const Options& o, kernels::Arch arch, int smem, Progress& progress,
                                         bool ptx = false) {
  autotune::PrepareOptions po;
  po.arch = arch;
  po.ptx = ptx;
  po.max_smem_optin = smem;
  po.jobs = o.jobs;
  po.tiles = o.tiles;
  po.stop = &g_stop;
  po.progress = [&progress](const autotune::PrepareProgress& p) {
    note_interrupt_once();
    std::string label = p.label;  // "<family>|<arch>|d64|..." without the arch (one per run)
    if (const auto a = label.find('|'); a != std::string::npos)
      if (const auto b = label.find('|', a + 1); b != std::string::npos) label.erase(a, b - a);
    progress.update(p.done, p.total, static_cast<double>(p.done), static_cast<double>(p.total), label);
  };
  return po;
}

// Writes the JSON report to stdout (--json) and/or to --report FILE. Returns false when the
// file could not be written.
bool emit_report(const Options& o, const json& j) {
  const std::string text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (o.json) std::cout << text << std::flush;
  if (o.report.empty()) return true;
  std::FILE* f = std::fopen(o.report.c_str(), "w");
  const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) return false;
  if (!ok) std::fprintf(stderr, "sage2-autotune: cannot write the report to %s\n", o.report.c_str());
  return ok;
}

// ---- --compile-only --------------------------------------------------------------------------
int compile_only_arch(const Options& o, kernels::Arch arch, Progress& progress, json* report);

// One arch: its report as before; several: one report {"mode", "archs", "reports": [one per
// arch], "exit_code"} and the tables one after the other. The exit code is the worst.
int run_compile_only(const Options& o, Progress& progress) {
  if (o.archs.size() <= 1) return compile_only_arch(o, *o.arch, progress, nullptr);
  Options one = o;  // --json / --report: one report for all archs, written here
  one.report.clear();
  const bool collect = o.json || !o.report.empty();
  json all = {{"mode", "compile-only"}, {"archs", json::array()}, {"reports", json::array()}};
  int rc = kExitOk;
  for (kernels::Arch arch : o.archs) {
    json r;
    const int arc = compile_only_arch(one, arch, progress, collect ? &r : nullptr);
    all["archs"].push_back(kernels::arch_name(arch));
    all["reports"].push_back(r);
    if (arc != kExitOk && (rc == kExitOk || arc > rc)) rc = arc;
    if (g_stop.load()) break;
  }
  all["exit_code"] = rc;
  if ((o.json || !o.report.empty()) && !emit_report(o, all) && rc == kExitOk) rc = kExitFailed;
  return rc;
}

// `report`: where to put the JSON report instead of emitting it (several archs).
int compile_only_arch(const Options& o, kernels::Arch arch, Progress& progress, json* report) {
  const int smem = o.max_smem ? o.max_smem : plan::default_max_smem_optin(arch);
  const base::config::CacheConfig config = base::config::cache_config();
  const std::string dir = o.cache_dir.empty() ? config.cache_dir : o.cache_dir;
  if (jit::nvrtc_version().first == 0) {
    std::fprintf(stderr, "sage2-autotune: NVRTC cannot be loaded; nothing can be compiled (set SAGE2_LIBNVRTC)\n");
    return kExitFailed;
  }
  // The tool fills the directory it is given (its trust rules are the library's).
  const cache::DiskCache cache(dir, /*disabled=*/false, cache::Trust{config.trust_root, std::nullopt});
  const auto specs = specialisations(o, arch);
  progress.phase("compile");
  autotune::PrepareStats stats;
  autotune::PrepareOptions po = prepare_options(o, arch, smem, progress);
  const auto plans = autotune::prepare_kernels(specs, cache, po, stats);
  // Then everything a call inside the selection can load, with the settings a Context on such a
  // device will have (SAGE2_QUANT_PATH, SAGE2_ATTENTION_FAMILY): the fleet's warm-up.
  const plan::WarmupSelection selection = warmup_selection(o);
  plan::CallSettings settings;
  settings.arch = arch;
  settings.device.max_smem_optin = smem;
  const base::config::ContextConfig defaults = base::config::context_config();
  settings.quant_path = defaults.quant_path;
  if (defaults.family != AttentionFamily::Auto)
    settings.family = kernels::parse_attention_family(attention_family_name(defaults.family));
  autotune::WarmupRequest wr;
  wr.selection = selection;
  wr.jobs = o.jobs;
  wr.stop = &g_stop;
  wr.progress = po.progress;
  wr.prepared = stats;
  progress.phase("warm-up");
  autotune::WarmupResult warm;
  if (!g_stop.load()) {
    warm = autotune::warm_up_offline(settings, cache, wr);
    stats = warm.stats;
  }
  note_interrupt_once();
  progress.end();
  const bool interrupted = g_stop.load();
  int rc = kExitOk;
  if (stats.compile_errors || stats.store_failed) rc = kExitFailed;
  if (interrupted) rc = interrupted_exit_code();
  if (o.json || !o.report.empty() || report) {
    json j = {{"mode", "compile-only"},
              {"arch", kernels::arch_name(arch)},
              {"max_smem_optin", smem},
              {"cache_dir", dir},
              {"versions", {{"library", plan::library_version()}, {"nvrtc", nvrtc_string()},
                            {"code", plan::current_code_version()}}},
              {"specialisations", json::array()},
              {"kernels", stats_json(stats)},
              {"warmup", warmup_json(selection, warm, arch)},
              {"interrupted", interrupted},
              {"exit_code", rc}};
    for (const auto& p : plans) j["specialisations"].push_back(plan_json(p));
    if (report)
      *report = std::move(j);
    else if (!emit_report(o, j) && rc == kExitOk)
      rc = kExitFailed;
  }
  if (!o.json) {
    std::printf("sage2-autotune: compile-only for %s (opt-in shared memory %d bytes) into %s\n", kernels::arch_name(arch),
                smem, dir.c_str());
    print_plans(plans, o.verbose);
    print_stats(stats);
    print_warmup(selection, warm, arch);
    if (interrupted) std::printf("interrupted: the kernels compiled so far are in the cache\n");
  }
  return rc;
}

// ---- tuning on a GPU --------------------------------------------------------------------------
json timing_json(const autotune::Timed& t) {
  json j = {{"tile", plan::tile_str(t.c.tile)}, {"ok", t.r.ok}, {"ms", t.r.ms}, {"tops", t.r.tops},
            {"reps", t.r.reps}, {"stopped_early", t.r.stopped_early}, {"heuristic", t.c.heuristic},
            {"eligible", t.c.state == autotune::CandidateState::Ok}};
  if (!std::isnan(t.r.agreement)) j["agreement"] = t.r.agreement;
  if (!t.r.problem.empty()) j["problem"] = t.r.problem;
  return j;
}

// The device checks with the tool's exit codes; nullopt when tuning can go on.
std::optional<int> check_device(const Options& o, runtime::DeviceFacts& facts) {
  if (!base::driver::available()) {
    std::fprintf(stderr, "sage2-autotune: %s\n(--arch ARCH --compile-only fills the cache without a GPU)\n",
                 base::driver::unavailable_reason().c_str());
    return kExitNoDriver;
  }
  const int count = runtime::device_count();
  if (o.device >= count) {
    std::fprintf(stderr, "sage2-autotune: --device %d but %d CUDA device(s) are visible\n", o.device, count);
    return kExitNoGpu;
  }
  facts = runtime::device_facts(o.device);
  if (!facts.arch) {
    std::fprintf(stderr, "sage2-autotune: device %d (%s, %s) is not supported: %s\n", o.device, facts.name.c_str(),
                 facts.cc_string().c_str(), facts.target_note.c_str());
    return kExitNoGpu;
  }
  if (o.arch && *o.arch != *facts.arch) {
    std::fprintf(stderr, "sage2-autotune: --arch %s but device %d is %s (use --compile-only to compile for another arch)\n",
                 kernels::arch_name(*o.arch), o.device, kernels::arch_name(*facts.arch));
    return kExitUsage;
  }
  return std::nullopt;
}

autotune::TuneRequest tune_request(const Options& o, kernels::Arch arch, Progress& progress) {
  autotune::TuneRequest rq;
  rq.specialisations = specialisations(o, arch);
  rq.seq_lens = o.seq_lens;
  rq.batch = o.batch;
  rq.heads = o.heads;
  rq.kv_heads = o.kv_heads;
  rq.tiles = o.tiles;
  rq.timing.warmup = o.warmup;
  rq.timing.max_reps = std::max(o.reps, 1);
  rq.timing.min_reps = std::min(5, rq.timing.max_reps);
  rq.timing.budget_seconds = o.budget;
  rq.min_gain = o.min_gain;
  rq.write_db = !o.no_db;
  rq.jobs = o.jobs;
  rq.stop = &g_stop;
  // The compile phase reports through the same printer as --compile-only.
  rq.prepare_progress = prepare_options(o, arch, 0, progress).progress;
  rq.progress = [&progress, timing = false](const autotune::TuneProgress& t) mutable {
    if (!timing) {  // the first report of the timing phase ends the compile phase's bar
      progress.end();
      progress.phase("tune");
      timing = true;
    }
    note_interrupt_once();
    progress.update(t.done, t.total, t.done_ops, t.total_ops, t.label);
  };
  return rq;
}

int run_tune(const Options& o, Progress& progress) {
  runtime::DeviceFacts facts;
  if (const auto rc = check_device(o, facts)) return *rc;
  const kernels::Arch arch = *facts.arch;
  if (const auto why = why_selection_is_empty(o, arch))  // the device's arch is known only now
    return tools::usage_error("sage2-autotune", "device " + std::to_string(o.device) + " is " +
                                                    kernels::arch_name(arch) + ": the selection tunes nothing: " + *why);
  ContextOptions copt;
  copt.cache_dir = o.cache_dir;
  Context ctx(o.device, copt);
  if (ctx.cache_dir().empty())
    progress.message("sage2-autotune: the disk cache is disabled (SAGE2_DISABLE_DISK_CACHE): kernels stay in memory "
                     "and no tuning database is written");
  const VersionInfo versions = version_info();
  const autotune::TuneRequest rq = tune_request(o, arch, progress);
  progress.phase("compile");
  autotune::TuneResult res = autotune::tune(runtime::context_impl(ctx), rq);
  // Then everything a call inside the selection can load (the tiles just tuned included).
  const plan::WarmupSelection selection = warmup_selection(o);
  autotune::WarmupResult warm;
  if (!res.interrupted && !res.gpu_failed) {
    progress.end();
    progress.phase("warm-up");
    autotune::WarmupRequest wr;
    wr.selection = selection;
    wr.jobs = o.jobs;
    wr.stop = &g_stop;
    wr.progress = rq.prepare_progress;
    wr.prepared = res.stats;
    warm = autotune::warm_up(runtime::context_impl(ctx), wr);
    res.stats = warm.stats;
    res.interrupted = g_stop.load();
  }
  note_interrupt_once();
  progress.end();
  const auto& plans = res.plans;
  const auto& stats = res.stats;
  const auto& info = res.info;
  const bool interrupted = res.interrupted;
  const bool write_db = res.write_db, disk = res.disk;
  const std::string& dir = res.cache_dir;
  const std::string& db_file = res.db_file;
  int rc = res.failed() ? kExitFailed : kExitOk;
  if (interrupted) rc = interrupted_exit_code();

  if (o.json || !o.report.empty()) {
    json j = {{"mode", "tune"},
              {"arch", kernels::arch_name(arch)},
              {"device", {{"ordinal", o.device}, {"name", facts.name}, {"cc", facts.cc_string()},
                          {"sm_count", facts.sm_count}, {"max_smem_optin", facts.max_shared_per_block_optin},
                          {"l2_bytes", facts.l2_bytes}}},
              {"versions", {{"library", plan::library_version()}, {"nvrtc", info.nvrtc_version},
                            {"driver", versions.driver_version}, {"code", plan::current_code_version()}}},
              {"cache_dir", disk ? json(dir) : json(nullptr)},
              {"database", {{"path", write_db ? json(db_file) : json(nullptr)}, {"written", res.written},
                            {"errors", res.db_errors}}},
              {"timing", {{"warmup", rq.timing.warmup}, {"min_reps", rq.timing.min_reps}, {"max_reps", rq.timing.max_reps},
                          {"budget_seconds", rq.timing.budget_seconds}, {"min_gain", rq.min_gain}}},
              {"specialisations", json::array()},
              {"kernels", stats_json(stats)},
              {"warmup", warmup_json(selection, warm, arch)},
              {"results", json::array()},
              {"interrupted", interrupted},
              {"exit_code", rc}};
    if (res.gpu_failed) j["gpu_error"] = res.gpu_error;
    for (const auto& p : plans) j["specialisations"].push_back(plan_json(p));
    for (const auto& out : res.outcomes) {
      if (!out.reached()) continue;
      json r = {{"specialisation", plans[out.plan].spec.str()},
                {"key", out.key.str()},
                {"batch", out.problem.batch},
                {"heads", out.problem.q_heads},
                {"kv_heads", out.problem.kv_heads},
                {"seq_len", out.problem.q_len},
                {"complete", out.complete},
                {"written", out.written},
                {"timings", json::array()}};
      for (const auto& t : out.timed) r["timings"].push_back(timing_json(t));
      if (out.best) r["best"] = timing_json(out.timed[*out.best]);
      if (out.heuristic) r["heuristic"] = timing_json(out.timed[*out.heuristic]);
      if (auto g = out.gain()) r["gain"] = *g;
      if (!out.problem_text.empty()) r["problem"] = out.problem_text;
      j["results"].push_back(r);
    }
    if (!emit_report(o, j) && rc == kExitOk) rc = kExitFailed;
    if (o.json) return rc;
  }

  std::printf("sage2-autotune: %s (%s, %d SMs), driver %d.%d, NVRTC %s, sage2 %s\n", facts.name.c_str(),
              kernels::arch_name(arch), facts.sm_count, versions.driver_version / 1000, versions.driver_version % 1000 / 10,
              info.nvrtc_version.c_str(), info.library_version.c_str());
  if (o.verbose) print_plans(plans, true);
  print_stats(stats);
  print_warmup(selection, warm, arch);
  std::printf("\n%-28s %6s %8s  %-16s %7s  %-16s %7s %7s %6s\n", "specialisation", "N", "BxH", "best tile", "TOPS",
              "heuristic", "TOPS", "gain", "timed");
  for (const auto& out : res.outcomes) {
    if (!out.reached()) continue;
    char bxh[32];
    std::snprintf(bxh, sizeof bxh, "%lldx%lld", static_cast<long long>(out.problem.batch),
                  static_cast<long long>(out.problem.q_heads));
    std::string best = "-", best_tops = "-", heur = "-", heur_tops = "-", gain = "-";
    char b[32];
    if (out.best) {
      best = plan::tile_str(out.timed[*out.best].c.tile);
      std::snprintf(b, sizeof b, "%.1f", out.timed[*out.best].r.tops);
      best_tops = b;
    }
    if (out.heuristic) {
      heur = plan::tile_str(out.timed[*out.heuristic].c.tile);
      std::snprintf(b, sizeof b, "%.1f", out.timed[*out.heuristic].r.tops);
      heur_tops = b;
    } else if (plans[out.plan].has_heuristic) {
      heur = plan::tile_str(plans[out.plan].heuristic);
    }
    if (auto g = out.gain()) {
      std::snprintf(b, sizeof b, "%+.1f%%", *g * 100);
      gain = b;
    }
    std::printf("%-28s %6lld %8s  %-16s %7s  %-16s %7s %7s %6zu%s\n", plans[out.plan].spec.str().c_str(),
                static_cast<long long>(out.problem.q_len), bxh, best.c_str(), best_tops.c_str(), heur.c_str(),
                heur_tops.c_str(), gain.c_str(), out.timed.size(),
                out.problem_text.empty() ? "" : ("  " + out.problem_text).c_str());
  }
  if (write_db) std::printf("\ndatabase: %s (%zu entries written)\n", db_file.c_str(), res.written);
  else std::printf("\ndatabase: not written%s\n", o.no_db ? " (--no-db)" : "");
  for (const auto& e : res.db_errors) std::printf("database error: %s\n", e.c_str());
  if (res.gpu_failed) std::printf("GPU error: %s\n", res.gpu_error.c_str());
  if (interrupted) std::printf("interrupted: the results above are saved; the problem in progress was not recorded\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  add_options(cl);
  if (const auto rc = tools::parse(cl.app, "sage2-autotune", argc, argv)) return *rc;
  Options o;
  try {
    o = options_from(cl);
    if (o.compile_only)  // every arch before compiling anything
      for (kernels::Arch arch : o.archs)
        if (const auto why = why_selection_is_empty(o, arch))
          throw UsageError{std::string("--arch ") + kernels::arch_name(arch) + ": the selection compiles nothing: " + *why};
  } catch (const UsageError& e) {
    return tools::usage_error("sage2-autotune", e.message);
  }
  for (const std::string& name : idle_options(cl, o.compile_only))
    std::fprintf(stderr, "sage2-autotune: warning: %s does nothing %s; ignored\n", name.c_str(),
                 o.compile_only ? "with --compile-only (it is for tuning on a GPU)" : "without --compile-only");
  install_signal_handlers();
  g_verbose = o.verbose;
  Progress progress(progress_mode(o));
  g_progress = &progress;
  base::log::set_sink(&log_sink);
  int rc;
  try {
    rc = o.compile_only ? run_compile_only(o, progress) : run_tune(o, progress);
  } catch (const Error& e) {
    progress.end();
    std::fprintf(stderr, "sage2-autotune: %s\n", e.what());
    rc = e.code() == ErrorCode::NoDriver ? kExitNoDriver : kExitFailed;
    if (g_stop.load()) rc = interrupted_exit_code();
  } catch (const std::exception& e) {
    progress.end();
    std::fprintf(stderr, "sage2-autotune: %s\n", e.what());
    rc = kExitFailed;
  }
  base::log::set_sink(nullptr);
  g_progress = nullptr;
  return rc;
}
