#include "runtime/kernel_stats.hpp"

#include <cmath>

namespace sage2::runtime {

KernelCounters::~KernelCounters() {
  if (total_) total_->loaded_.fetch_sub(loaded_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void KernelCounters::compiled(double seconds) {
  const auto ns = static_cast<std::int64_t>(std::llround(seconds > 0 ? seconds * 1e9 : 0.0));
  for (KernelCounters* c = this; c; c = c->total_) {
    c->compiled_.fetch_add(1, std::memory_order_relaxed);
    c->compile_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
}

void KernelCounters::disk_load() {
  for (KernelCounters* c = this; c; c = c->total_) c->disk_loads_.fetch_add(1, std::memory_order_relaxed);
}

void KernelCounters::memory_hit() {
  for (KernelCounters* c = this; c; c = c->total_) c->memory_hits_.fetch_add(1, std::memory_order_relaxed);
}

void KernelCounters::loaded() {
  for (KernelCounters* c = this; c; c = c->total_) c->loaded_.fetch_add(1, std::memory_order_relaxed);
}

KernelStats KernelCounters::snapshot() const {
  KernelStats s;
  s.compiled = compiled_.load(std::memory_order_relaxed);
  s.disk_loads = disk_loads_.load(std::memory_order_relaxed);
  s.memory_hits = memory_hits_.load(std::memory_order_relaxed);
  s.loaded = loaded_.load(std::memory_order_relaxed);
  s.compile_seconds = static_cast<double>(compile_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

KernelCounters& KernelCounters::process() {
  // Never destroyed: a Context destroyed during static destruction still reaches it.
  static KernelCounters* p = new KernelCounters();
  return *p;
}

}  // namespace sage2::runtime

namespace sage2 {
KernelStats process_kernel_stats() noexcept { return runtime::KernelCounters::process().snapshot(); }
}  // namespace sage2
