#include "autotune_progress.hpp"

#include <signal.h>
#include <unistd.h>

namespace sage2::autotune_tool {

std::atomic<bool> g_stop{false};
namespace {
volatile std::sig_atomic_t g_signal = 0;
}  // namespace

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

std::string human_seconds(double s) {
  char b[32];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return b;
}


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

Progress::Mode progress_mode(const Options& o) {
  if (o.progress == 0) return Progress::Off;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (o.progress == 1) return tty ? Progress::Bar : Progress::Lines;
  return tty ? Progress::Bar : Progress::Off;
}

}  // namespace sage2::autotune_tool
