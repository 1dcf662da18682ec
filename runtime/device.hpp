// Facts about a CUDA device, read through the driver.
#pragma once

#include <optional>
#include <string>

#include "jit/kernel_spec.hpp"
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
  std::optional<jit::Arch> arch;  // nullopt: sage2 cannot generate code for this device

  std::string cc_string() const;  // "sm_90"
};

int device_count();                    // 0 when no driver / no device
DeviceFacts device_facts(int ordinal);  // throws InvalidArgument for a bad ordinal
// Throws Unsupported (saying which archs are supported and why) when facts.arch is empty.
jit::Arch require_supported_arch(const DeviceFacts& facts);

}  // namespace sage2::runtime
