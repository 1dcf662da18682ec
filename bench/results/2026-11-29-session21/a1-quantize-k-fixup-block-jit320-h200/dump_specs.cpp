// Writes the generated source of each kernel of a B1 H4 N1000 call at head dim argv[1] (sm_90a, smooth K) to DIR.
#include <cstdio>
#include <fstream>
#include "jit/kernel_build.hpp"
#include "plan/call_kernels.hpp"
using namespace sage2;
int main(int argc, char** argv) {
  plan::AttentionProblem p{};
  p.batch = 1; p.q_heads = 4; p.kv_heads = 4; p.q_len = 1000; p.kv_len = 1000; p.head_dim = std::atoi(argv[1]);
  p.smooth_k = true;
  plan::CallSettings s;
  s.arch = kernels::Arch::Sm90a;
  int i = 0;
  for (const auto& k : plan::call_kernel_specs(p, s)) {
    const auto b = jit::make_build(k);
    const std::string f = std::string(argv[2]) + "/" + std::to_string(i++) + "_" + k.key().substr(0, k.key().find('|')) + ".cu";
    std::ofstream(f) << b.source;
    std::printf("%s  %s\n", f.c_str(), k.key().c_str());
  }
}
