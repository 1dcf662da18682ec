// Compiling many kernel specs in the CPU suites: two NVRTC programs at a time (the CI machine has
// two cores and programs are independent), every outcome kept for the assertions.
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "jit/compiler.hpp"

namespace sage2::test {

struct Outcome {
  jit::KernelSpec spec;
  bool ok = false;
  std::string error;  // the exception text when !ok
  jit::CompiledKernel k;
};

inline std::vector<Outcome> compile_all(const std::vector<jit::KernelSpec>& specs) {
  std::vector<Outcome> out(specs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      out[i].spec = specs[i];
      try {
        out[i].k = jit::compile(specs[i]);
        out[i].ok = true;
      } catch (const std::exception& e) {
        out[i].error = e.what();
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  return out;
}

}  // namespace sage2::test
