// sage2-autotune's console: the progress bar or lines (library messages go through it so they do
// not tear the bar), and Ctrl-C / SIGTERM, which finish the step in progress and keep what is done.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <string>

#include "autotune_cli.hpp"
#include "base/log.hpp"

namespace sage2::autotune_tool {

extern std::atomic<bool> g_stop;  // set by SIGINT / SIGTERM
void install_signal_handlers();
int interrupted_exit_code();  // 128 + the signal

std::string human_seconds(double s);

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

extern Progress* g_progress;  // the one the log sink writes through (null: stderr)
extern bool g_verbose;
void log_sink(base::log::Level level, const std::string& m);
void note_interrupt_once();
Progress::Mode progress_mode(const Options& o);

}  // namespace sage2::autotune_tool
