// sage2-info: what sage2 sees on this machine — library version and build commit, NVRTC and driver
// versions, devices, their code targets and the path each gets, the cache directory and its
// entries. --archs: the arch table (every compute capability sage2 generates code for and its
// path), no GPU needed. --version: the library version and the build commit. --help. Last, the
// process's kernel counts (sage2::process_kernel_stats): sage2-info itself creates no Context, so
// they read 0 today; the line is there for when it does (issue 43).
// Exit codes: 0 a supported GPU was found (and --archs, --version, --help); 2 usage error;
// 3 no driver; 4 driver present but no supported GPU.
#include <cstdio>
#include <string>

#include "cache/disk_cache.hpp"
#include "kernels/attention_family.hpp"
#include "jit/nvrtc_library.hpp"
#include "runtime/device.hpp"
#include "sage2/sage2.hpp"
#include "tool_cli.hpp"

namespace {

void print_arch_table() {
  for (const auto& a : sage2::kernels::arch_table())
    std::printf("%-7s cc %-5s %-38s %s\n", a.name, (std::to_string(a.cc / 10) + "." + std::to_string(a.cc % 10)).c_str(),
                a.gpus, sage2::kernels::arch_path(a.arch).c_str());
  std::printf("newer compute capabilities: PTX of the newest arch above they run, JIT-compiled by the driver; "
              "older than 8.0: unsupported\n");
}

// On every path past the versions (the no-driver one too), so the line is always there.
void print_kernel_counts() {
  const sage2::KernelStats k = sage2::process_kernel_stats();
  std::printf("kernels: %lld compiled, %lld from the disk cache, %lld memory hits (this process)\n",
              static_cast<long long>(k.compiled), static_cast<long long>(k.disk_loads),
              static_cast<long long>(k.memory_hits));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prints versions, the build commit, devices (code target and path) and the kernel cache.", "sage2-info"};
  app.footer("exit codes: 0 supported GPU found, 3 no CUDA driver, 4 no supported GPU, 2 usage error");
  app.allow_extras();
  bool archs = false;
  app.add_flag("--archs", archs, "the arch table (compute capability -> path), then exit 0; needs no GPU");
  sage2::tools::setup(app, "sage2-info");
  if (const auto rc = sage2::tools::parse(app, "sage2-info", argc, argv)) return *rc;
  if (!app.remaining().empty())
    return sage2::tools::usage_error("sage2-info", sage2::tools::unknown_argument(app.remaining().front()));
  if (archs) {
    print_arch_table();
    return 0;
  }
  const sage2::VersionInfo v = sage2::version_info();
  std::printf("sage2 %s\n", v.library.c_str());
  std::printf("build commit: %s\n", sage2::build_commit().c_str());
  // Which file and which search rule: a pip-installed torch, a toolkit and $SAGE2_LIBNVRTC can
  // each supply a different NVRTC, and the cubins follow the one that was loaded.
  const auto& nvrtc = sage2::jit::nvrtc::attempt();
  if (nvrtc.ok) {
    std::printf("NVRTC %d.%d: %s (%s)\n", v.nvrtc_major, v.nvrtc_minor, nvrtc.api.file.c_str(),
                nvrtc.api.rule.c_str());
    if (!nvrtc.api.builtins.empty()) std::printf("NVRTC builtins: %s (beside it)\n", nvrtc.api.builtins.c_str());
    if (!nvrtc.tried.empty()) std::printf("NVRTC candidates passed over:%s\n", nvrtc.tried.c_str());
  } else
    std::printf("NVRTC not found: kernels can only come from the disk cache; tried, in order:%s\n",
                nvrtc.tried.c_str());
  const auto cache = sage2::cache::DiskCache::from_env();
  if (cache.disabled()) {
    std::printf("disk cache: disabled (SAGE2_DISABLE_DISK_CACHE)\n");
  } else {
    std::size_t n = 0, bad = 0;
    for (const auto& e : cache.list()) (e.valid ? n : bad)++;
    std::printf("disk cache: %s (%zu entries, %zu invalid)\n", cache.dir().c_str(), n, bad);
  }
  if (!sage2::base::driver::available()) {
    std::printf("driver: %s\n", sage2::base::driver::unavailable_reason().c_str());
    print_kernel_counts();
    return 3;
  }
  std::printf("driver: CUDA %d.%d\n", v.driver_version / 1000, (v.driver_version % 1000) / 10);
  const int n = sage2::runtime::device_count();
  int supported = 0;
  for (int d = 0; d < n; ++d) {
    const auto f = sage2::runtime::device_facts(d);
    std::printf("device %d: %s, %s, %d SMs, %.1f GiB, %d KiB smem/block opt-in -> %s%s\n", d, f.name.c_str(),
                f.cc_string().c_str(), f.sm_count, f.total_memory / 1073741824.0, f.max_shared_per_block_optin / 1024,
                f.arch ? sage2::kernels::arch_name(*f.arch) : "unsupported", f.arch && f.ptx ? " (PTX, driver JIT)" : "");
    if (f.arch) std::printf("  path: %s\n", sage2::kernels::arch_path(*f.arch).c_str());
    if (!f.target_note.empty()) std::printf("  %s: %s\n", f.arch ? "note" : "why", f.target_note.c_str());
    supported += f.arch ? 1 : 0;
  }
  if (n == 0) std::printf("no CUDA device visible\n");
  print_kernel_counts();
  return supported ? 0 : 4;
}
