// Environment switches (all documented in README.md):
//   SAGE2_LOG_LEVEL        error | warn | info | debug (default warn)
//   SAGE2_CACHE_DIR        on-disk cache directory (else $XDG_CACHE_HOME/sage2, else ~/.cache/sage2)
//   SAGE2_DISABLE_DISK_CACHE=1   compile in memory only; never read or write the disk cache
//   SAGE2_DUMP_DIR         write each generated source (.cu), PTX (.ptx) and NVRTC log there
//   SAGE2_LIBCUDA          path of the driver library to dlopen (default libcuda.so.1)
//   SAGE2_ATTENTION_FAMILY auto | mma | wgmma: the attention kernel family (default auto: wgmma
//                          for 8-bit on sm_90a up to head dim 256, mma.sync otherwise)
//   SAGE2_QUANT_PATH       split | fused: the quantize stage (default split; runtime/quantize_stage.hpp)
//   SAGE2_LIBNVRTC         path of the NVRTC library to dlopen (default: the one linked)
#pragma once

#include <optional>
#include <string>

namespace sage2::env {

std::optional<std::string> get(const char* name);  // unset or empty → nullopt
bool flag(const char* name);                        // "1", "true", "yes", "on" → true
std::string cache_dir();                            // resolution order above

}  // namespace sage2::env
