// sage2-autotune's command line: the options, their groups and help text, their conversion into
// Options (UsageError names the option and the value), the selection as specialisations and as a
// warm-up selection. The modes are in sage2_autotune.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/candidates.hpp"
#include "plan/tuning_db.hpp"
#include "plan/warmup.hpp"
#include "tool_cli.hpp"

namespace sage2::autotune_tool {

using tools::UsageError;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoDriver = 3;
constexpr int kExitNoGpu = 4;

struct Options : plan::ShapeSelection {  // --head-dims, --dtypes, --causal
  int device = 0;
  std::optional<kernels::Arch> arch;  // the first of archs
  std::vector<kernels::Arch> archs;   // --arch LIST
  bool compile_only = false;
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

// --help's text (add_options sets it).
extern const char* const kUsageLines;
extern const char* const kDescription;
extern const char* const kFooter;

std::vector<std::string> split(const std::string& s);
std::int64_t parse_int(const std::string& opt, const std::string& v, std::int64_t lo, std::int64_t hi);
double parse_double(const std::string& opt, const std::string& v, double lo, double hi);
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
void add_options(CommandLine& c);
kernels::Arch parse_arch_arg(const std::string& a);
// The parsed command line as Options; UsageError names the option and the value.
Options options_from(const CommandLine& c);
// The options given that do nothing in the chosen mode.
std::vector<std::string> idle_options(const CommandLine& c, bool compile_only);
// The selection options as the library's specialisation grid (autotune/tune.hpp).
std::vector<plan::Specialisation> specialisations(const Options& o, kernels::Arch arch,
                                                  std::vector<std::string>* why_not = nullptr);
// The calls the warm-up covers (plan/warmup.hpp): the selection options as a user's call options.
plan::WarmupSelection warmup_selection(const Options& o);
// nullopt when the selection gives a specialisation on `arch`, else the library's reasons.
std::optional<std::string> why_selection_is_empty(const Options& o, kernels::Arch arch);

}  // namespace sage2::autotune_tool
