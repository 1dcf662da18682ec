// The a4 failing case (matrix case 2: int8 top_left f16 HND d=64 q=kv=1000 diffuse, seed base+2) on
// the CPU: the emulation of the GPU's spec vs fp64, with the sampled statistics (the GPU's) and
// without, and with other V headrooms.
#include <cstdio>
#include <cstdlib>
#include "tests/gpu/accuracy_targets.hpp"
#include "reference/kernel_config.hpp"
#include "plan/attention_spec.hpp"
#include "plan/attention_validate.hpp"
#include "kernels/arch.hpp"
using namespace sage2;
namespace ref = sage2::reference;
int main(int argc, char** argv) {
  const std::uint64_t base = std::strtoull(argv[1], nullptr, 10);
  const int n = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::int64_t B = 2, H = 1, N = 1000, D = 64;
  ref::AttentionInputs in = test::make_inputs(0, base + n, DType::F16, B, H, H, N, N, D, false);
  ref::HostTensor out(DType::F16, B, H, N, D, false);
  AttentionParams p;
  p.causal = CausalMode::TopLeft;
  p.qk_bits = QkBits::Int8;
  p.small_q_path = SmallQPath::Quantized;
  const kernels::Arch arch = kernels::parse_arch("sm_90a");
  const plan::AttentionProblem prob = plan::validate_attention(in.q.ref(), in.k.ref(), in.v.ref(), out.ref(), p, arch);
  const kernels::KernelSpec spec = plan::plan_attention_heuristic(prob, arch, kernels::arch_info(arch).max_smem_optin);
  std::printf("spec %s sampled %d\n", spec.key().c_str(), (int)spec.sampled_stats);
  ref::AttentionOptions eo;
  eo.causal = p.causal;
  const ref::ExactResult exact = ref::exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), eo);
  for (int variant = 0; variant < 7; ++variant) {
    ref::EmulationOptions mo;
    mo.round_output = true;
    mo.accum_mantissa_bits = 13;
    mo.sample_statistics = variant != 0;
    mo.v_headroom = variant == 1 ? 16.f : variant == 2 ? 4.f : 1.f;
    if (variant >= 4) { mo.sample_statistics = true; mo.v_headroom = 16.f; }
    if (variant == 4) mo.exact_qk = true;
    if (variant == 5) mo.pv_format = ref::PvFormat::F32;
    if (variant == 6) { mo.exact_qk = true; mo.pv_format = ref::PvFormat::F32; }
    const ref::EmulationResult e = ref::emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), mo);
    std::vector<float> o(e.o.begin(), e.o.end());
    const ref::Metrics m = ref::compare(exact.o, o);
    std::printf("%-28s cos %.6f relL1 %.5f\n", variant == 0 ? "every key (no sample)" : variant == 1 ? "sample, headroom 16 (GPU)" : variant == 2 ? "sample, headroom 4" : variant == 3 ? "sample, headroom 1" : variant == 4 ? "GPU, exact QK" : variant == 5 ? "GPU, f32 PV" : "GPU, exact QK + f32 PV", m.cos_sim, m.rel_l1);
  }
}
