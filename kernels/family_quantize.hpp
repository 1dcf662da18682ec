// The quantize family's descriptor: one entry per op (QuantOp), beside the attention families'
// (kernels/family_*.cpp). It holds what the host knows about an op beyond its thread mapping and
// launch shape (kernels/quantize_shape.hpp): its name (spec keys; entry "sage2_<name>"), its device
// template (templates/quantize_*.cuh), the spec fields it reads (the canonical form), its own
// validation rules and the preamble constants of its thread mapping. kernels/spec_rules.cpp and
// jit/source_builder.cpp ask it instead of switching on the op. The other auxiliary families
// (ΔS, the probes, the direct path) have one line each in aux_family().
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/quant_layout.hpp"

namespace sage2::kernels {

// One `#define NAME VALUE  // comment` of a generated preamble (no comment when empty).
struct PreambleDefine {
  std::string name;
  long long value = 0;
  std::string comment;
};
// The constants of a quantize kernel's thread mapping, after a heading comment line.
struct QuantMapping {
  std::string heading;
  std::vector<PreambleDefine> defines;
};

struct QuantOpDesc {
  QuantOp op;
  const char* name;           // "channel_stats": spec keys, messages, the entry sage2_<name>
  const char* template_file;  // its entry file in templates/
  bool writes_v;              // writes V̂: reads the P̃V precision (pv_fp16, pv_acc16)
  bool reads_mask;            // reads the tensor mask (the tile classification)
  bool samples_stats;         // runs with KernelSpec::sampled_stats (the split path's statistics, Q, K, V)
  // Resets the fields of the canonical spec `c` that the op does not read; `c` enters as the spec
  // with the family-wide resets applied (kernels/spec_rules.cpp KernelSpec::canonical).
  void (*canonicalize)(KernelSpec& c);
  // The op's own rules: throws InvalidArgument "kernel spec: ..." for a spec it cannot run.
  void (*validate)(const KernelSpec& spec);
  // The preamble constants of the canonical spec's thread mapping (SAGE2_QZ_*).
  QuantMapping (*mapping)(const KernelSpec& c, const QuantLayout& layout);
};

// The op's descriptor; nullptr for QuantOp::None.
const QuantOpDesc* find_quant_op(QuantOp op) noexcept;

// The kernel families that are neither attention nor quantize families: name (spec keys), device
// template and entry.
struct AuxFamilyDesc {
  KernelFamily family;
  const char* name;
  const char* template_file;
  const char* entry;
};
// nullptr for an attention family and for Quantize (its ops have descriptors of their own).
const AuxFamilyDesc* aux_family(KernelFamily family) noexcept;

}  // namespace sage2::kernels
