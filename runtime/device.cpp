#include "runtime/device.hpp"

#include "jit/compiler.hpp"

namespace sage2::runtime {

std::string DeviceFacts::cc_string() const {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

int device_count() {
  if (!base::driver::available()) return 0;
  int n = 0;
  if (base::driver::api().cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

DeviceFacts device_facts(int ordinal) {
  const auto& a = base::driver::api();
  const int n = device_count();
  if (ordinal < 0 || ordinal >= n)
    throw Error(ErrorCode::InvalidArgument,
                "device=" + std::to_string(ordinal) + " but " + std::to_string(n) + " CUDA device(s) are visible");
  CUdevice dev;
  base::driver::check(a.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  DeviceFacts f;
  f.ordinal = ordinal;
  char name[256] = {};
  base::driver::check(a.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  f.name = name;
  auto attr = [&](CUdevice_attribute at) {
    int v = 0;
    base::driver::check(a.cuDeviceGetAttribute(&v, at, dev), "cuDeviceGetAttribute");
    return v;
  };
  f.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  f.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  f.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  f.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  f.max_shared_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  f.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  size_t total = 0;
  base::driver::check(a.cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem");
  f.total_memory = total;
  // The code target: the arch table's row of this compute capability, else PTX of the newest
  // one the device runs (and the loaded NVRTC compiles for).
  try {
    const std::vector<int> nvrtc_archs = jit::nvrtc_supported_archs();
    const kernels::CodeTarget t = kernels::code_target(f.cc(), nvrtc_archs);
    f.arch = t.arch;
    f.ptx = t.ptx;
    f.target_note = t.note;
  } catch (const Error& e) {
    f.target_note = e.what();
  }
  return f;
}

kernels::Arch require_supported_arch(const DeviceFacts& f) {
  if (f.arch) return *f.arch;
  throw Error(ErrorCode::Unsupported,
              "device " + std::to_string(f.ordinal) + " (" + f.name + ") is " + f.cc_string() + ": " + f.target_note);
}

kernels::CodeTarget context_target(const DeviceFacts& f, const std::string& target_arch) {
  if (target_arch.empty()) {
    const kernels::Arch a = require_supported_arch(f);
    return kernels::CodeTarget{a, f.ptx, f.target_note};
  }
  const kernels::Arch want = kernels::parse_arch(target_arch);  // InvalidArgument naming the table
  try {
    return kernels::code_target(f.cc(), jit::nvrtc_supported_archs(), want);
  } catch (const Error& e) {
    throw Error(e.code(), "device " + std::to_string(f.ordinal) + " (" + f.name + ", " + f.cc_string() + "): " +
                              e.what());
  }
}

}  // namespace sage2::runtime
