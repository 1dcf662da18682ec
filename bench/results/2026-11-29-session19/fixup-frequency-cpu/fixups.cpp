// How often the sampled statistics' fix-up would run: channels whose every-key amax exceeds 16x the sample's.
#include <cmath>
#include <cstdio>
#include "sage2/reference.hpp"
using namespace sage2; using namespace sage2::reference;
int main() {
  for (int kind = 0; kind < 3; ++kind) for (bool sv : {false, true}) for (std::int64_t n : {4096, 16384}) {
    const int hkv = 8, d = 128;
    AttentionInputs in = kind == 0 ? make_gaussian(7, DType::BF16, 1, hkv, hkv, 64, n, d, false)
                       : kind == 1 ? make_activation_like(7, DType::BF16, 1, hkv, hkv, 64, n, d, {}, false)
                                   : make_student_t(7, DType::BF16, 1, hkv, hkv, 64, n, d, 3, false);
    KernelConfig cfg; cfg.family = AttentionFamily::Wgmma; cfg.head_dim = d; cfg.smooth_v = sv;
    cfg.tile = KernelTile{128, 128, 8, 2};
    QuantizeOptions o; o.sample_statistics = true;
    const QuantizedHost s = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), cfg, o);
    int fix = 0, tot = 0; double worst = 0;
    for (std::int64_t bh = 0; bh < hkv; ++bh) for (int c = 0; c < d; ++c) {
      const std::size_t dv = s.layout.d_v, i = bh * dv + c;
      const float mn = s.v_stats[(bh * 3 + 1) * dv + c], mx = s.v_stats[(bh * 3 + 2) * dv + c], mu = s.v_mean[i];
      const float a_s = sv ? std::max(mx - mu, mu - mn) : std::max(std::fabs(mx), std::fabs(mn));
      ++tot; if (s.v_amax[i] > 16.f * a_s) ++fix;
      worst = std::max(worst, double(s.v_amax[i] / (16.f * a_s)));
    }
    std::printf("%-10s sv%d N %6lld: %d of %d channels fixed up; largest amax / H_s %.3f\n",
                kind == 0 ? "gaussian" : kind == 1 ? "activation" : "student-t", int(sv), (long long)n, fix, tot, worst);
  }
}
