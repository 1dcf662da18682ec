// The device templates (templates/*.cuh), embedded into the library at build time by
// cmake/embed_templates.cmake. Nothing is read from disk at run time.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace sage2::jit {

struct EmbeddedTemplate {
  std::string_view name;  // file name, e.g. "quantize_qk.cuh" (what #include "..." names)
  std::string_view text;
};

// All embedded templates, sorted by name.
const std::vector<EmbeddedTemplate>& embedded_templates();
// One template by file name; throws sage2::Error(Internal) when absent.
std::string_view embedded_template(std::string_view name);
// FNV-1a hash over every template's name and text: part of every disk cache key (jit/kernel_build).
std::uint64_t templates_hash();

}  // namespace sage2::jit
