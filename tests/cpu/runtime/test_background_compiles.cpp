// Specification (CPU): the background tasks of a Context's tiered compile (runtime/background_compiles.hpp):
// one task per call signature, never two; every task joined by join_all() (the Context's destructor),
// after which nothing starts; running() counts the tasks not yet finished.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include "runtime/background_compiles.hpp"

using namespace sage2;

namespace {
runtime::CallSignature sig(std::int64_t x) {
  runtime::CallSignature s;
  s.w[0] = x;
  return s;
}
}  // namespace

TEST_CASE("background compiles: one task per signature, running() until it ends, join_all waits and closes") {
  runtime::BackgroundCompiles bg;
  std::latch release(1);
  std::atomic<int> ran{0};
  CHECK(bg.start(sig(1), [&] {
    release.wait();
    ran.fetch_add(1);
  }));
  CHECK_FALSE(bg.start(sig(1), [&] { ran.fetch_add(100); }));  // the same signature: not again
  CHECK(bg.start(sig(2), [&] { ran.fetch_add(1); }));
  const auto t0 = std::chrono::steady_clock::now();
  while (bg.running() > 1 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(bg.running() == 1);  // the first still waits for `release`
  release.count_down();
  bg.join_all();
  CHECK(ran.load() == 2);
  CHECK(bg.running() == 0);
  CHECK_FALSE(bg.start(sig(3), [&] { ran.fetch_add(1); }));  // closed
  CHECK(ran.load() == 2);
}

TEST_CASE("background compiles: the destructor joins a task in flight") {
  std::atomic<bool> done{false};
  {
    runtime::BackgroundCompiles bg;
    bg.start(sig(7), [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done.store(true);
    });
  }
  CHECK(done.load());
}
