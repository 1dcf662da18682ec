// GPU suite entry. Without a usable, supported GPU every test case is reported as skipped (and
// the process exits 77, which CTest shows as "Skipped") — never as passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "gpu_env.hpp"

int main(int argc, char** argv) {
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const std::string why = sage2::test::gpu_unavailable_reason();
  if (!why.empty()) {
    std::printf("GPU suite skipped: %s\n", why.c_str());
    ctx.addFilter("test-case-exclude", "*");  // doctest counts excluded cases as skipped
    ctx.run();
    return 77;
  }
  return ctx.run();
}
