// One descriptor per attention kernel family: everything the host knows about a family lives in
// its descriptor (kernels/family_<name>.cpp) and its device template (templates/<template_file>);
// every other step (spec keys and validation, source generation, planning, the tuner's
// candidates, the generic attention stage) asks the descriptor instead of switching on the
// family. Adding a family means one descriptor, one template, its KernelFamily value and its line
// in the registry (kernels/attention_family.cpp).
//
// A descriptor is a constant object (constant-initialised: usable from static initialisers, no
// locking): the family's data, and its rules as virtual functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention_shape.hpp"
#include "kernels/kernel_spec.hpp"
#include "kernels/launch.hpp"
#include "kernels/quant_buffers.hpp"
#include "kernels/quant_layout.hpp"

namespace sage2::kernels {

// A 2-D u8 TMA map as cuTensorMapEncodeTiled wants it (dims innermost first, one row stride).
struct TmaMapSpec {
  const void* base = nullptr;
  std::uint64_t dims[2] = {0, 0};
  std::uint64_t row_stride = 0;    // bytes between consecutive rows (dim 1)
  std::uint32_t box[2] = {0, 0};
  int swizzle_bytes = 0;           // 32, 64 or 128 (the box's inner extent)
};
// An encoded CUtensorMap (opaque, 128 bytes, 64-byte aligned), as a kernel parameter holds it.
struct alignas(64) TmaMap {
  std::uint64_t opaque[16];
};
constexpr int kMaxTmaMaps = 4;

// Storage for one launch's kernel parameter struct, whatever the family (each descriptor checks
// that its struct fits). 64-byte aligned: tensor maps inside a parameter struct require it.
constexpr std::size_t kMaxAttentionParamBytes = 1024;
struct alignas(64) AttentionParamStorage {
  unsigned char bytes[kMaxAttentionParamBytes];
};

// One line: what `arch` runs by default, e.g. "INT8 QKᵀ (INT4 opt-in) + FP16 P̃V (fp32 accumulation),
// mma.sync" or "INT8 QKᵀ + FP8 P̃V, wgmma + TMA (mma.sync for head dims > 256, INT4, FP16 P̃V)".
std::string arch_path(Arch arch);

class AttentionFamilyDesc {
 public:
  // ---- what the family is
  const KernelFamily family;
  const char* const name;           // "attn_mma": spec keys, the tuning database, messages
  const char* const option_name;    // "mma": ContextOptions::family / SAGE2_ATTENTION_FAMILY / --family
  const char* const template_file;  // its device template (templates/)
  const char* const entry;          // the extern "C" __global__ entry of the generated module
  // The default family of a problem is the one with the highest preference that runs() it.
  const int preference;
  // What runs() demands, for messages ("runs 8-bit QK on sm_90a up to head dim 256").
  const char* const requirement;
  // A tile every spec of the family validates with (the reference specs of jit::code_version).
  const TileConfig reference_tile;
  // The kernel's by-value parameter struct: its size (write_params fills it), and the byte
  // offsets of the tensor maps it carries (tma_maps of them, encoded by the runtime).
  const std::size_t param_bytes;
  int tma_maps = 0;
  std::size_t tma_offsets[kMaxTmaMaps] = {};

  // ---- config rules
  // Whether the family has kernels for problems of this arch, QK code width and head dim.
  virtual bool runs(Arch arch, int qk_bits, int head_dim) const = 0;
  // Whether it has P̃V in FP16 (KernelSpec::pv_fp16); default: FP8 only.
  virtual bool runs_pv_fp16() const { return false; }
  // The tensor-core instruction whose accumulator fragments define the quantization groups of
  // the data it reads (kernels/quant_layout.hpp).
  virtual MmaShape mma_shape(int qk_bits) const = 0;
  // Rules on the tile, arch and bits that every spec reading this family's layout obeys — its
  // own attention specs and the quantize / ΔS specs that feed it (KernelSpec::validate throws
  // InvalidArgument "kernel spec: ..." through it).
  virtual void validate(const KernelSpec& spec) const = 0;
  // Throws InvalidArgument (naming the field) when the family cannot run `spec`, Unsupported when
  // its shared memory exceeds `max_smem_optin` bytes (the device's opt-in limit per block).
  virtual void check(const KernelSpec& spec, int max_smem_optin) const = 0;

  // ---- shared memory, launch shape
  // CTA size, CTAs per SM and dynamic shared memory of the spec's kernel.
  virtual AttentionKernelConfig kernel_config(const KernelSpec& spec) const = 0;
  // Grid, block and dynamic shared memory of one chunk's launch. Default: one CTA per query
  // block of the chunk (kernels::chunk_launch_shape with kernel_config()).
  virtual LaunchShape launch_shape(const KernelSpec& spec, const QuantBuffers& b, const AttentionChunk& chunk) const;

  // ---- tuning
  // The heuristic tile until the tuning database has one: passes check() for `max_smem_optin`;
  // Unsupported when none does.
  virtual TileConfig default_tile(const KernelSpec& spec, int max_smem_optin) const = 0;
  // Every tile the autotuner considers, before filtering, in a fixed order.
  virtual const std::vector<TileConfig>& candidates() const = 0;

  // ---- Q
  // Whether the family's kernel for `spec` can quantize the caller's Q itself
  // (KernelSpec::q_in_kernel). Default: no (its kernel reads Q̂ from the quantize stage).
  virtual bool q_in_kernel_ok(const KernelSpec& spec) const;
  // Whether the family's kernels wait for the previous kernel on the stream (ptx::pdl_wait) before
  // touching memory it writes or reads (kernels::waits_for_previous_kernel). Default: no.
  virtual bool waits_for_previous() const;

  // ---- parameters
  // Fills the parameter struct of one chunk into `out` (param_bytes of 64-byte aligned storage),
  // tensor maps left zero. Throws InvalidArgument naming a bad argument.
  virtual void write_params(const KernelSpec& spec, const QuantBuffers& b, const AttentionArgs& args,
                            const AttentionChunk& chunk, void* out) const = 0;
  // Fills out[0 .. tma_maps) for the buffers at `workspace`. The maps depend on the workspace base
  // pointer only, not on the chunk or the call's other pointers. Default: no maps.
  virtual void tma_specs(const KernelSpec& spec, const QuantBuffers& b, const void* workspace, TmaMapSpec* out) const;

 protected:
  constexpr AttentionFamilyDesc(KernelFamily family_, const char* name_, const char* option_name_,
                                const char* template_file_, const char* entry_, int preference_,
                                const char* requirement_, TileConfig reference_tile_, std::size_t param_bytes_)
      : family(family_), name(name_), option_name(option_name_), template_file(template_file_), entry(entry_),
        preference(preference_), requirement(requirement_), reference_tile(reference_tile_),
        param_bytes(param_bytes_) {}
  // Descriptors are static objects, never deleted through the base.
  ~AttentionFamilyDesc() = default;
};

// The registry: every attention family, in KernelFamily order.
std::span<const AttentionFamilyDesc* const> attention_families() noexcept;
// The descriptor of `family`; nullptr when it is not an attention family.
const AttentionFamilyDesc* find_attention_family(KernelFamily family) noexcept;
// The descriptor of `family`; throws InvalidArgument when it is not an attention family.
const AttentionFamilyDesc& attention_family(KernelFamily family);
// "attn_mma" / "mma" → AttentionMma, "attn_wgmma" / "wgmma" → AttentionWgmma; nullopt otherwise.
std::optional<KernelFamily> parse_attention_family(const std::string& s);
// The attention family a call uses unless told otherwise: of the families that run the problem
// (kernels/attention_family.hpp), the one of highest preference — wgmma on sm_90a for 8-bit QKᵀ up to
// head dim 256, the portable mma.sync family else.
KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim) noexcept;
// Whether `d` runs the problem with this P̃V precision.
bool family_runs(const AttentionFamilyDesc& d, Arch arch, int qk_bits, int head_dim, bool pv_fp16);
// Why family_runs() is false, for a message ("sm_80 has no FP8 P̃V (no e4m3)", "the wgmma family
// runs 8-bit QK ..."); nullopt when it is true. What the arch lacks is named before what the
// family demands.
std::optional<std::string> family_runs_why_not(const AttentionFamilyDesc& d, Arch arch, int qk_bits, int head_dim,
                                               bool pv_fp16);
// default_attention_family() for a P̃V precision: the preferred family that runs the problem with
// it (FP16 P̃V: the mma.sync family on every arch).
KernelFamily default_attention_family(Arch arch, int qk_bits, int head_dim, bool pv_fp16) noexcept;

// Whether the spec's kernel orders every memory access after the previous kernel on its stream
// (ptx::pdl_wait), so that it may be launched to overlap that kernel's end
// (LaunchShape::overlap_previous): the quantize kernels and the attention families that say so
// (AttentionFamilyDesc::waits_for_previous), on archs with programmatic dependent launch (sm_90+).
bool waits_for_previous_kernel(const KernelSpec& spec);

// Shorthands for the spec's own family (InvalidArgument for a spec of another kind).
AttentionKernelConfig attention_kernel_config(const KernelSpec& attention_spec);
void check_attention_config(const KernelSpec& attention_spec, int max_smem_optin);
LaunchShape attention_launch_shape(const KernelSpec& attention_spec, const QuantBuffers& b,
                                   const AttentionChunk& chunk);

}  // namespace sage2::kernels
