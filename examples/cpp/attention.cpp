// One attention call through sage2's C++ API, checked against the library's CPU reference.
// B 1, H 8, N 1024, head dim 128, fp16, causal, inputs shaped like real activations.
// Exit status: 0 the call ran and matched; 1 an error or a mismatch; 77 no usable GPU here (the
// program says why; CTest reports the example as skipped).
#include <cuda_runtime.h>

#include <cstdio>
#include <sage2/reference.hpp>
#include <sage2/sage2.hpp>
#include <vector>

namespace ref = sage2::reference;

int main() {
  constexpr std::int64_t B = 1, H = 8, N = 1024, D = 128;
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("sage2 example: no usable CUDA device here (%s); it needs an NVIDIA GPU of sm_80 or newer\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 77;
  }
  try {
    sage2::Context ctx(0);  // compiles (or loads from the kernel cache) what the call needs
    std::printf("device 0: %s (%s): %s\n", ctx.device().name.c_str(), ctx.device().arch.c_str(),
                ctx.device().path.c_str());

    const ref::AttentionInputs in = ref::make_activation_like(1, sage2::DType::F16, B, H, H, N, N, D);
    const std::size_t bytes = static_cast<std::size_t>(B * H * N * D) * 2;
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
    for (void** p : {&q, &k, &v, &o})
      if (cudaMalloc(p, bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    cudaMemcpy(q, in.q.ref().data, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(k, in.k.ref().data, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(v, in.v.ref().data, bytes, cudaMemcpyHostToDevice);

    sage2::AttentionParams p;
    p.causal = sage2::CausalMode::TopLeft;
    ctx.attention(sage2::TensorRef::hnd(q, sage2::DType::F16, B, H, N, D),
                  sage2::TensorRef::hnd(k, sage2::DType::F16, B, H, N, D),
                  sage2::TensorRef::hnd(v, sage2::DType::F16, B, H, N, D),
                  sage2::TensorRef::hnd(o, sage2::DType::F16, B, H, N, D), p, nullptr);

    ref::HostTensor out(sage2::DType::F16, B, H, N, D);
    cudaMemcpy(out.bits().data(), o, bytes, cudaMemcpyDeviceToHost);  // synchronises with the call
    for (void* ptr : {q, k, v, o}) cudaFree(ptr);

    ref::AttentionOptions ro;
    ro.causal = sage2::CausalMode::TopLeft;
    const ref::ExactResult exact = ref::exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), ro);
    std::vector<float> got(exact.o.size());
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < D; ++c) got[exact.index(0, h, n, c)] = out.get(0, h, n, c);
    const ref::Metrics m = ref::compare(exact.o, got);
    std::printf("sage2 vs exact attention (fp64): cos %.6f, rel-L1 %.4f\n", m.cos_sim, m.rel_l1);
    return m.cos_sim >= 0.999 && m.nonfinite == 0 ? 0 : 1;
  } catch (const sage2::Error& e) {
    std::printf("sage2 example: %s\n", e.what());
    return e.code() == sage2::ErrorCode::NoDriver || e.code() == sage2::ErrorCode::Unsupported ? 77 : 1;
  } catch (const std::exception& e) {
    std::printf("sage2 example: %s\n", e.what());
    return 1;
  }
}
