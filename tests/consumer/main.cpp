// Uses the installed headers and library: the C++ API, the C ABI, and the no-GPU error path.
#include <sage2/sage2.h>

#include <cstdio>
#include <sage2/reference.hpp>
#include <sage2/sage2.hpp>

int main() {
  const sage2::VersionInfo v = sage2::version_info();
  std::printf("sage2 %s, C ABI %s, devices %d\n", v.library.c_str(), sage2_version(), sage2_device_count());
  if (v.library != sage2_version()) return 1;
  // The CPU reference is usable from an installed tree too.
  const auto in = sage2::reference::make_gaussian(1, sage2::DType::F16, 1, 1, 1, 4, 4, 8);
  const auto r = sage2::reference::exact_attention(in.q.ref(), in.k.ref(), in.v.ref());
  if (r.o.size() != 32) return 1;
  // ... and its emulation of a kernel, described with the reference's own public types.
  sage2::reference::KernelConfig cfg;
  cfg.head_dim = 8;
  const auto e = sage2::reference::emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), cfg);
  if (e.o.size() != 32 || sage2::reference::compare(r.o, e.o).cos_sim < 0.99) return 1;
  sage2_context* ctx = nullptr;
  const sage2_status s = sage2_context_create(0, nullptr, 0, &ctx);
  if (s == SAGE2_OK) {
    sage2_context_destroy(ctx);
  } else {
    std::printf("context: %s: %s\n", sage2_status_name(s), sage2_last_error());
  }
  return 0;
}
