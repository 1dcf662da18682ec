// Kernel counts (sage2::KernelStats): one KernelCounters per KernelLoader (a Context), each event
// also added to the process's, so the process totals outlive the Contexts. Atomics: loads run on
// several threads at once (KernelLoader::load_all) and readers never wait for a compile.
#pragma once

#include <atomic>
#include <cstdint>

#include "sage2/sage2.hpp"

namespace sage2::runtime {

class KernelCounters {
 public:
  // A top-level set (the process's, or a test's stand-in for it).
  KernelCounters() = default;
  // A Context's: every event is added to `total` as well.
  explicit KernelCounters(KernelCounters& total) : total_(&total) {}
  // The kernels this set holds leave the total's `loaded` (their Context unloads them).
  ~KernelCounters();
  KernelCounters(const KernelCounters&) = delete;
  KernelCounters& operator=(const KernelCounters&) = delete;

  void compiled(double seconds);  // an NVRTC compile finished
  void disk_load();               // a kernel was loaded from a disk cache entry
  void memory_hit();              // a request found its kernel already held
  void loaded();                  // a kernel is now held (its module loaded)
  KernelStats snapshot() const;

  // The process's set (sage2::process_kernel_stats).
  static KernelCounters& process();

 private:
  KernelCounters* total_ = nullptr;
  std::atomic<std::int64_t> compiled_{0}, disk_loads_{0}, memory_hits_{0}, loaded_{0};
  std::atomic<std::int64_t> compile_ns_{0};  // integer: fetch_add on a double is a CAS loop
};

}  // namespace sage2::runtime
