// Facts about a CUDA device, read through the driver.
#pragma once

#include <optional>
#include <string>

#include "kernels/attention_family.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/driver.hpp"

namespace sage2::runtime {

struct DeviceFacts {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_shared_per_block_optin = 0;  // bytes
  int max_shared_per_sm = 0;
  int l2_bytes = 0;
  std::size_t total_memory = 0;
  // The code target (kernels::code_target with the loaded NVRTC's archs): nullopt when sage2 cannot
  // generate code for this device (target_note says why).
  std::optional<kernels::Arch> arch;
  bool ptx = false;          // arch's code as PTX, JIT-compiled by the driver
  std::string target_note;   // why PTX or another arch; why unsupported when arch is empty

  std::string cc_string() const;  // "sm_90"
  int cc() const { return cc_major * 10 + cc_minor; }
};

int device_count();                    // 0 when no driver / no device
DeviceFacts device_facts(int ordinal);  // throws InvalidArgument for a bad ordinal
// Throws Unsupported (saying which archs are supported and why) when facts.arch is empty.
kernels::Arch require_supported_arch(const DeviceFacts& facts);
// The target of a Context on this device: the device's own (facts.arch, facts.ptx), or
// `target_arch` (ContextOptions::target_arch: "sm_80", ...; empty: none) as PTX. Throws
// InvalidArgument for an unknown arch name, Unsupported for a target the device cannot run or for
// a device sage2 does not support.
kernels::CodeTarget context_target(const DeviceFacts& facts, const std::string& target_arch);

}  // namespace sage2::runtime
