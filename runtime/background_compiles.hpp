// Background work of one Context (ContextOptions::tiered_compile): at most one task per call
// signature — building a call's optimized plan while its calls run the quick kernels. Every task
// is joined when the owner is destroyed (a compile cannot be cancelled: the Context's destructor
// waits for those in flight). Pure host code: the CPU suite specifies it.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "runtime/call_cache.hpp"

namespace sage2::runtime {

class BackgroundCompiles {
 public:
  BackgroundCompiles() = default;
  ~BackgroundCompiles() { join_all(); }
  BackgroundCompiles(const BackgroundCompiles&) = delete;
  BackgroundCompiles& operator=(const BackgroundCompiles&) = delete;

  // Runs `task` on a new thread unless a task for `sig` was started before (then false). After
  // join_all() began, starts nothing (false).
  bool start(const CallSignature& sig, std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || !started_.insert(sig).second) return false;
    running_.fetch_add(1, std::memory_order_relaxed);
    threads_.emplace_back([this, t = std::move(task)] {
      t();  // the task catches its own errors
      running_.fetch_sub(1, std::memory_order_release);
    });
    return true;
  }
  // Tasks still running.
  std::size_t running() const { return running_.load(std::memory_order_acquire); }
  // Waits for every task; later start() calls start nothing.
  void join_all() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      threads.swap(threads_);
    }
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
  }

 private:
  std::mutex mu_;
  bool closed_ = false;
  std::vector<std::thread> threads_;
  std::unordered_set<CallSignature, CallSignatureHash> started_;
  std::atomic<std::size_t> running_{0};
};

}  // namespace sage2::runtime
