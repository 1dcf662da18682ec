// What the command-line tools (tools/sage2_*.cpp) share on top of CLI11: -h/--help, --version
// (the library version and the build commit, as sage2-info prints them), and one rule for usage
// errors — one line on stderr, "<program>: <message naming the flag or value>", a pointer to
// --help on the next, exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "plan/tuning_db.hpp"
#include "sage2/sage2.hpp"

namespace sage2::tools {

inline constexpr int kExitUsage = 2;

// A usage error found by the tool itself (a bad value, options that do not go together).
struct UsageError {
  std::string message;
};

// plan::library_version() is the compile-time SAGE2_VERSION: --version loads neither NVRTC nor
// the driver.
inline std::string version_text(const std::string& program) {
  return program + " (sage2 " + plan::library_version() + ")\nbuild commit: " + build_commit() + "\n";
}

// CLI11's help with the tool's own usage lines (several forms, or a command list) in place of
// its generated "Usage: prog [OPTIONS]" line; subcommands keep the generated one.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_usage(const CLI::App* app, std::string name) const override {
    return app->get_parent() || usage_.empty() ? CLI::Formatter::make_usage(app, std::move(name)) : usage_;
  }

 private:
  std::string usage_;
};

// Called after the program's own options are added: the help and version flags (in the group of
// the last option, or CLI11's "Options"), and the rules every option of the program follows — a
// flag takes no value (--json=1 is an error, as before CLI11), an option given twice keeps the
// last value (as before). Options of subcommands are left as they are.
inline void setup(CLI::App& app, const std::string& program, const std::string& usage_lines = "") {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_expected_max() == 0) opt->disable_flag_override();
    else if (opt->get_expected_max() == 1) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  const auto& all = app.get_options();
  const std::string group = all.empty() ? std::string("Options") : all.back()->get_group();
  app.set_help_flag("-h,--help", "this text, then exit 0")->group(group);
  app.set_version_flag("--version", [program] { return version_text(program); },
                       "the library version and the build commit, then exit 0")
      ->group(group);
  auto f = std::make_shared<Formatter>(usage_lines);
  f->column_width(26);
  app.formatter(f);
}

// An argument CLI11 left over (the app allows extras so that the tool words this itself).
inline std::string unknown_argument(const std::string& arg) {
  return (arg.size() > 1 && arg[0] == '-' ? "unknown option '" : "unexpected argument '") + arg + "'";
}

// CLI11's message, reworded where it does not name the flag the way it was typed.
inline std::string parse_error_message(const CLI::ParseError& e) {
  std::string m = e.what();
  // "--dir: 1 required DIR missing"
  if (const auto at = m.find(": 1 required "); at != std::string::npos && m.size() > 8 &&
      m.compare(m.size() - 8, 8, " missing") == 0)
    return m.substr(0, at) + " needs a value";
  // "json was given a disallowed flag override"
  if (const auto at = m.find(" was given a disallowed flag override"); at != std::string::npos)
    return "--" + m.substr(0, at) + " takes no value";
  return m;
}

// The program's whole help, also for `<program> <command> --help` (app.help() would give the
// command's alone, which lists none of the options the program shares with its commands).
inline std::string help_text(const CLI::App& app) {
  return app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
}

// `usage`: a synopsis line to print between the message and the pointer to --help.
inline int usage_error(const std::string& program, const std::string& message, const std::string& usage = "") {
  std::fprintf(stderr, "%s: %s\n%s%srun '%s --help' for the options\n", program.c_str(), message.c_str(),
               usage.c_str(), usage.empty() ? "" : "\n", program.c_str());
  return kExitUsage;
}

// Parses argv into `app`. nullopt: go on; otherwise the exit status to return at once (help and
// version printed: 0; a usage error printed: 2). Arguments CLI11 does not recognise are left in
// app.remaining() when the app allows extras, for the tool to word the error itself.
inline std::optional<int> parse(CLI::App& app, const std::string& program, int argc, char** argv,
                                const std::string& usage = "") {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help_text(app).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::fputs(e.what(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(program, parse_error_message(e), usage);
  }
  return std::nullopt;
}

}  // namespace sage2::tools
