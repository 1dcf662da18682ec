// Specification of tensor masks on the GPU (issue 17; sage2::MaskRef in sage2.hpp, AttentionParams::
// mask, sage2_attention_masked), checked against an fp64 masked attention written here
// (softmax over the keys of q·k·scale + the mask's term; bool false / additive -inf keys take no
// part; a row with no visible key has O = 0 and LSE = -inf):
//  - bool masks [B,1,Nq,Nk] (broadcast over heads), [1,1,Nq,Nk] (padded rows), [B,H,Nq,Nk]
//    (NHD q/k/v), key padding [B,1,1,Nk] (stride_q = 0) and a row mask [B,1,Nq,1] (stride_k = 0):
//    output and LSE meet the dense suite's accuracy targets (tests/gpu/accuracy_targets.hpp, the
//    bounds of attention over fewer than ~1000 keys); rows with no visible key are exactly 0 with
//    LSE -inf;
//  - additive masks f16, bf16, f32 (one stored transposed: stride_q = 1) with random finite terms
//    and -inf entries, and Hugging Face style padding with -1e4 (and f16's finfo.min, -65504) on
//    padded keys;
//  - causal + key padding (top-left and bottom-right), and a prefix-LM mask (a per-batch prefix
//    visible to every row, causal after it);
//  - an all-true bool mask and an all-zero additive mask (zeros of both signs) give the bits of the
//    same call without a mask (class-1 tiles run the unmasked path), also with causal; a mask equal
//    to the causal mask matches CausalMode::TopLeft / BottomRight within a tight tolerance;
//  - masks that hide whole tiles at the start and the end of the key range (Nk = 2000), and
//    interior all-masked tiles, give the reference's result;
//  - bad masks (null data, negative stride, overlap with out, unknown type, misaligned, host
//    memory, with varlen) are refused with InvalidArgument naming params.mask and nothing is
//    written; the C function refuses them too, and a valid C call gives the C++ call's bits;
//  - a CUDA graph captured with a mask replays correctly after the mask's contents are rewritten
//    on the device (tile classes are computed on the device in every replay);
//  - the mma.sync family (a Context with ContextOptions::family = Mma): 4-bit and 8-bit masked
//    calls, causal + a mask that skips leading tiles, and the bit-identity of class-1 tiles.
// Sizes: B = 2, Hq = 4, Hkv = 2, Nq = 300, Nk = 500 (smaller with SAGE2_GPU_TESTS_REDUCED).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "accuracy_targets.hpp"
#include "gpu_env.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/attention_plan.hpp"
#include "sage2/reference.hpp"
#include "sage2/sage2.h"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr unsigned char kPoison = 0xA5;  // outputs of refused calls (finite in f16, bf16, f32)

// The Context of the mma.sync family (on sm_90a the default runs 8-bit on wgmma).
Context& mma_context() {
  static Context ctx = [] {
    ContextOptions o;
    o.family = AttentionFamily::Mma;
    return Context(0, o);
  }();
  return ctx;
}

// Sizes of most cases.
struct Sizes {
  std::int64_t b, hq, hkv, nq, nk;
};
Sizes sizes() {
  if (test::reduced()) return {2, 4, 2, 100, 170};
  return {2, 4, 2, 300, 500};
}

// ---------------------------------------------------------------------------------------------
// Deterministic per-element randomness.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t cell(std::uint64_t seed, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return mix(seed ^ mix(static_cast<std::uint64_t>(b) ^ mix(static_cast<std::uint64_t>(h) ^
                                                             mix(static_cast<std::uint64_t>(i) ^
                                                                 mix(static_cast<std::uint64_t>(j))))));
}
double unit(std::uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }  // [0, 1)

// ---------------------------------------------------------------------------------------------
// A mask on the host: the bytes uploaded to the device and what the reference reads from them.
struct HostMask {
  MaskType type = MaskType::None;
  std::int64_t sb = 0, sh = 0, sq = 0, sk = 0;  // element strides, 0 broadcasts
  std::vector<unsigned char> bytes;
  std::string shape;  // e.g. "[B,1,Nq,Nk]"

  std::int64_t esize() const { return type == MaskType::Bool ? 1 : (type == MaskType::F32 ? 4 : 2); }
  std::int64_t at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return b * sb + h * sh + i * sq + j * sk;
  }
  // bool: value != 0 is visible; additive: the term, rounded to the mask's type.
  void set(std::int64_t e, float value) {
    unsigned char* p = bytes.data() + e * esize();
    if (type == MaskType::Bool) {
      *p = value != 0.f ? 1 : 0;
    } else if (type == MaskType::F32) {
      std::memcpy(p, &value, 4);
    } else {
      const std::uint16_t h = type == MaskType::F16 ? ref::float_to_half(value) : ref::float_to_bf16(value);
      std::memcpy(p, &h, 2);
    }
  }
  // The score term of element (b, h, i, j) of the logical [B, Hq, Nq, Nk] mask: 0 or -inf for
  // bool, the stored value for additive masks.
  double term(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    const unsigned char* p = bytes.data() + at(b, h, i, j) * esize();
    if (type == MaskType::Bool) return *p ? 0.0 : -kInf;
    if (type == MaskType::F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    std::uint16_t u;
    std::memcpy(&u, p, 2);
    return type == MaskType::F16 ? ref::half_to_float(u) : ref::bf16_to_float(u);
  }
  MaskRef on_device(const void* data) const { return MaskRef{data, type, sb, sh, sq, sk}; }
};

using MaskFn = std::function<float(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)>;

// A mask stored with extents (mb, mh, mq, mk), each the problem's size or 1 (a broadcast dim:
// stride 0), contiguous in (b, h, q, k) order with `pad` unused elements after each row, or
// `transposed` ((b, h, k, q) order, pad after each column). Unused elements hold 0x7F bytes (bool:
// visible; f16: NaN; bf16/f32: ~3.4e38), so that reading one would show. fn(b, h, i, j) gives
// each stored element (indices 0 on broadcast dims).
HostMask make_mask(MaskType type, std::int64_t mb, std::int64_t mh, std::int64_t mq, std::int64_t mk, const MaskFn& fn,
                   std::int64_t pad = 0, bool transposed = false) {
  HostMask m;
  m.type = type;
  std::int64_t plane;
  if (!transposed) {
    const std::int64_t row = mk + pad;
    m.sk = mk > 1 ? 1 : 0;
    m.sq = mq > 1 ? row : 0;
    plane = mq * row;
  } else {
    const std::int64_t col = mq + pad;
    m.sq = mq > 1 ? 1 : 0;
    m.sk = mk > 1 ? col : 0;
    plane = mk * col;
  }
  m.sh = mh > 1 ? plane : 0;
  m.sb = mb > 1 ? mh * plane : 0;
  m.bytes.assign(static_cast<std::size_t>(mb * mh * plane * m.esize()), 0x7F);
  for (std::int64_t b = 0; b < mb; ++b)
    for (std::int64_t h = 0; h < mh; ++h)
      for (std::int64_t i = 0; i < mq; ++i)
        for (std::int64_t j = 0; j < mk; ++j) m.set(m.at(b, h, i, j), fn(b, h, i, j));
  char s[96];
  std::snprintf(s, sizeof s, "%s [%s,%s,%s,%s]%s%s", mask_type_name(type), mb > 1 ? "B" : "1", mh > 1 ? "H" : "1",
                mq > 1 ? "Nq" : "1", mk > 1 ? "Nk" : "1", pad ? " padded" : "", transposed ? " transposed" : "");
  m.shape = s;
  return m;
}

// Mask contents. Regions are placed relative to Nq / Nk and move with the batch and head index
// (so that a mask that varies over them is read at the right (b, h)).
//  rows [2Nq/3, 2Nq/3 + 15): no visible key;
//  keys [0, Nk/4 + shift): visible (class-1 tiles in query blocks without hidden rows);
//  keys [Nk/4 + shift, Nk/2 + shift): random;
//  keys [Nk/2 + shift, 3Nk/4): hidden (interior class-0 tiles);
//  keys [3Nk/4, Nk): a pattern of i, j, b and h.
// `additive`: visible keys of the first region get 0, of the others a random term in [-3, 3].
MaskFn structured(std::uint64_t seed, std::int64_t nq, std::int64_t nk, bool additive) {
  return [=](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) -> float {
    const float hidden = additive ? -std::numeric_limits<float>::infinity() : 0.f;
    const std::int64_t shift = 16 * b + 8 * h, r0 = 2 * nq / 3 + b;
    if (i >= r0 && i < r0 + 15) return hidden;
    const std::uint64_t r = cell(seed, b, h, i, j);
    const float bias = additive ? static_cast<float>(6.0 * unit(r) - 3.0) : 1.f;
    if (j < nk / 4 + shift) return additive ? 0.f : 1.f;
    if (j < nk / 2 + shift) return (r >> 7) % 2 ? bias : hidden;
    if (j < 3 * nk / 4) return hidden;
    return (j + i + 3 * b + 5 * h) % 3 != 0 ? bias : hidden;
  };
}

// Additive: a random term in [-3, 3] on every key but one in seven (-inf), rows [Nq/2, Nq/2 + 9)
// all -inf, keys [0, 64) exactly 0.
MaskFn random_additive(std::uint64_t seed, std::int64_t nq) {
  return [=](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) -> float {
    if (i >= nq / 2 && i < nq / 2 + 9) return -std::numeric_limits<float>::infinity();
    if (j < 64) return 0.f;
    const std::uint64_t r = cell(seed, b, h, i, j);
    if (r % 7 == 0) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(6.0 * unit(r >> 3) - 3.0);
  };
}

// Key padding of batch b: keys [0, lens[b]) visible (bool 1 / `keep`), the rest `drop`.
MaskFn padding(std::vector<std::int64_t> lens, float keep, float drop) {
  return [=](std::int64_t b, std::int64_t, std::int64_t, std::int64_t j) -> float {
    return j < lens[static_cast<std::size_t>(b)] ? keep : drop;
  };
}

// ---------------------------------------------------------------------------------------------
// The fp64 reference: masked attention of (q, k, v) with an optional mask and causal mode.
struct RefResult {
  std::vector<double> o;    // [B][Hq][Nq][d]
  std::vector<double> lse;  // [B][Hq][Nq], natural log; -inf for rows with no visible key
};

RefResult masked_reference(const ref::AttentionInputs& in, const HostMask* mask, CausalMode causal) {
  const TensorRef q = in.q.ref(), k = in.k.ref(), v = in.v.ref();
  const std::int64_t B = q.batch, hq = q.heads, hkv = k.heads, nq = q.seq, nk = k.seq, d = q.dim;
  const std::int64_t group = hq / hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> kd(static_cast<std::size_t>(B * hkv * nk * d)), vd(kd.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < nk; ++j)
        for (std::int64_t c = 0; c < d; ++c) {
          const std::size_t e = static_cast<std::size_t>(((b * hkv + h) * nk + j) * d + c);
          kd[e] = ref::load(k, b, h, j, c);
          vd[e] = ref::load(v, b, h, j, c);
        }
  RefResult r;
  r.o.assign(static_cast<std::size_t>(B * hq * nq * d), 0.0);
  r.lse.assign(static_cast<std::size_t>(B * hq * nq), -kInf);
  auto head = [&](std::int64_t b, std::int64_t h) {
    const std::int64_t hk = h / group;
    const double* kb = kd.data() + (b * hkv + hk) * nk * d;
    const double* vb = vd.data() + (b * hkv + hk) * nk * d;
    std::vector<double> s(static_cast<std::size_t>(nk)), qi(static_cast<std::size_t>(d)), acc(qi.size());
    for (std::int64_t i = 0; i < nq; ++i) {
      for (std::int64_t c = 0; c < d; ++c) qi[static_cast<std::size_t>(c)] = ref::load(q, b, h, i, c);
      double mx = -kInf;
      for (std::int64_t j = 0; j < nk; ++j) {
        double& sj = s[static_cast<std::size_t>(j)];
        sj = -kInf;
        if (!ref::key_visible(causal, i, j, nq, nk)) continue;
        const double t = mask ? mask->term(b, h, i, j) : 0.0;
        if (t == -kInf) continue;
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += qi[static_cast<std::size_t>(c)] * kb[j * d + c];
        sj = dot * scale + t;
        mx = std::max(mx, sj);
      }
      if (mx == -kInf) continue;  // no visible key: O = 0, LSE = -inf
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (std::int64_t j = 0; j < nk; ++j) {
        const double sj = s[static_cast<std::size_t>(j)];
        if (sj == -kInf) continue;
        const double p = std::exp(sj - mx);
        sum += p;
        for (std::int64_t c = 0; c < d; ++c) acc[static_cast<std::size_t>(c)] += p * vb[j * d + c];
      }
      const std::size_t row = static_cast<std::size_t>((b * hq + h) * nq + i);
      double* o = r.o.data() + row * static_cast<std::size_t>(d);
      for (std::int64_t c = 0; c < d; ++c) o[c] = acc[static_cast<std::size_t>(c)] / sum;
      r.lse[row] = mx + std::log(sum);
    }
  };
  const std::int64_t pairs = B * hq;
  const std::int64_t nthreads =
      std::max<std::int64_t>(1, std::min<std::int64_t>(pairs, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < nthreads; ++t)
    pool.emplace_back([&, t] {
      for (std::int64_t p = t; p < pairs; p += nthreads) head(p / hq, p % hq);
    });
  for (auto& th : pool) th.join();
  return r;
}

// ---------------------------------------------------------------------------------------------
// A problem on the host and the device.
struct Problem {
  DType dt = DType::F16;
  std::int64_t b = 0, hq = 0, hkv = 0, nq = 0, nk = 0, d = 0;
  bool nhd = false;
  ref::AttentionInputs in;
  std::unique_ptr<test::DeviceBuffer> q, k, v;
  TensorRef dq() const { return view(in.q, *q); }
  TensorRef dk() const { return view(in.k, *k); }
  TensorRef dv() const { return view(in.v, *v); }
  static TensorRef view(const ref::HostTensor& t, const test::DeviceBuffer& buf) {
    TensorRef r = t.ref();
    r.data = buf.get();
    return r;
  }
};

std::size_t bytes_of(const ref::HostTensor& t) {
  return static_cast<std::size_t>(t.ref().numel()) * dtype_size(t.dtype());
}

std::unique_ptr<test::DeviceBuffer> to_device(const ref::HostTensor& t) {
  auto buf = std::make_unique<test::DeviceBuffer>(bytes_of(t));
  buf->upload(t.ref().data, bytes_of(t));
  return buf;
}

std::unique_ptr<Problem> make_problem(std::uint64_t seed, DType dt, std::int64_t d, const Sizes& s, bool nhd = false) {
  auto p = std::make_unique<Problem>();
  p->dt = dt;
  p->b = s.b;
  p->hq = s.hq;
  p->hkv = s.hkv;
  p->nq = s.nq;
  p->nk = s.nk;
  p->d = d;
  p->nhd = nhd;
  // The diffuse activation model; masked rows see fewer than ~1000 keys, so the cases use the
  // sharp bounds of accuracy_targets.hpp (as the dense suite does below 1000 keys).
  p->in = test::make_inputs(0, seed, dt, s.b, s.hq, s.hkv, s.nq, s.nk, d, nhd);
  p->q = to_device(p->in.q);
  p->k = to_device(p->in.k);
  p->v = to_device(p->in.v);
  return p;
}

std::unique_ptr<test::DeviceBuffer> to_device(const HostMask& m) {
  auto buf = std::make_unique<test::DeviceBuffer>(m.bytes.size());
  buf->upload(m.bytes.data(), m.bytes.size());
  return buf;
}

// What a GPU call wrote.
struct GpuResult {
  std::vector<std::uint16_t> raw;  // the output's storage (the problem's layout)
  std::vector<float> o;            // [B][Hq][Nq][d]
  std::vector<float> lse;          // [B][Hq][Nq]
};

// Output and LSE buffers of a problem (the output in the problem's layout).
struct OutBuffers {
  ref::HostTensor shape;
  std::unique_ptr<test::DeviceBuffer> o, lse;
  explicit OutBuffers(const Problem& p)
      : shape(p.dt, p.b, p.hq, p.nq, p.d, p.nhd),
        o(std::make_unique<test::DeviceBuffer>(bytes_of(shape))),
        lse(std::make_unique<test::DeviceBuffer>(static_cast<std::size_t>(p.b * p.hq * p.nq) * 4)) {}
  TensorRef ref() const { return Problem::view(shape, *o); }
  void poison(unsigned char byte) {
    o->poison(byte);
    lse->poison(byte);
    test::synchronize();
  }
  GpuResult read() const {
    GpuResult r;
    ref::HostTensor h = shape;
    o->download(h.bits().data(), h.bits().size() * 2);
    r.raw = h.bits();
    r.o.reserve(static_cast<std::size_t>(h.ref().numel()));
    for (std::int64_t b = 0; b < h.batch(); ++b)
      for (std::int64_t hh = 0; hh < h.heads(); ++hh)
        for (std::int64_t n = 0; n < h.seq(); ++n)
          for (std::int64_t c = 0; c < h.dim(); ++c) r.o.push_back(h.get(b, hh, n, c));
    r.lse.resize(lse->bytes() / 4);
    lse->download(r.lse.data(), r.lse.size() * 4);
    return r;
  }
};

AttentionParams call_params(int bits, CausalMode causal) {
  AttentionParams a;
  a.causal = causal;
  a.qk_bits = static_cast<QkBits>(bits);
  a.small_q_path = SmallQPath::Quantized;  // unmasked calls compared with masked ones (always quantized)
  return a;
}

// One attention call (mask: nullptr for none), outputs poisoned with NaN first.
GpuResult run_gpu(Context& ctx, const Problem& p, const HostMask* mask, const test::DeviceBuffer* mask_dev,
                  CausalMode causal, int bits) {
  OutBuffers out(p);
  out.poison(0xFF);  // NaN in f16, bf16 and f32
  AttentionParams a = call_params(bits, causal);
  a.lse = static_cast<float*>(out.lse->get());
  if (mask) a.mask = mask->on_device(mask_dev->get());
  ctx.attention(p.dq(), p.dk(), p.dv(), out.ref(), a);
  test::synchronize();
  return out.read();
}

// The GPU result against the reference.
struct Verdict {
  ref::Metrics m;
  double lse_err = 0;               // max |LSE - reference| over rows with a visible key
  std::int64_t empty_rows = 0;      // rows with no visible key (reference)
  std::int64_t empty_bad = 0;       // ... whose output is not exactly 0 or LSE not -inf
  std::int64_t lost_rows = 0;       // rows with a visible key whose LSE is -inf or not finite
};

Verdict judge(const RefResult& want, const GpuResult& got, std::int64_t d) {
  Verdict v;
  v.m = ref::compare(want.o, got.o);
  for (std::size_t r = 0; r < want.lse.size(); ++r) {
    const float g = got.lse[r];
    if (want.lse[r] == -kInf) {
      ++v.empty_rows;
      bool ok = std::isinf(g) && g < 0;
      const float* o = got.o.data() + r * static_cast<std::size_t>(d);
      for (std::int64_t c = 0; c < d; ++c) ok = ok && o[c] == 0.f;
      v.empty_bad += !ok;
      continue;
    }
    if (!std::isfinite(g)) {
      ++v.lost_rows;
      v.lse_err = kInf;
      continue;
    }
    v.lse_err = std::max(v.lse_err, std::fabs(static_cast<double>(g) - want.lse[r]));
  }
  return v;
}

// The accuracy checks of the suite: the dense suite's bounds for attention over fewer than
// ~1000 keys (test::target(bits, 1)), rows without a visible key exactly O = 0 and LSE = -inf.
void check_verdict(const std::string& name, const Verdict& v, int bits, bool expect_empty_rows) {
  INFO(name);
  std::printf("mask %-62s cos %.6f relL1 %.5f lse err %.2e | rows without keys %lld\n", name.c_str(), v.m.cos_sim,
              v.m.rel_l1, v.lse_err, (long long)v.empty_rows);
  const test::Accuracy t = test::target(bits, 1);
  CHECK(v.m.nonfinite == 0);
  CHECK(v.m.cos_sim >= t.cos_min);
  CHECK(v.m.rel_l1 <= t.rel_l1_max);
  CHECK(v.lost_rows == 0);
  CHECK(v.lse_err <= t.lse_max);
  CHECK(v.empty_bad == 0);
  if (expect_empty_rows) CHECK(v.empty_rows > 0);  // the case covers rows that see no key
}

// A masked call checked against the reference.
void check_masked(Context& ctx, const std::string& name, const Problem& p, const HostMask& m, CausalMode causal,
                  int bits, bool expect_empty_rows) {
  const auto md = to_device(m);
  const GpuResult got = run_gpu(ctx, p, &m, md.get(), causal, bits);
  check_verdict(name, judge(masked_reference(p.in, &m, causal), got, p.d), bits, expect_empty_rows);
}

std::string name_of(const char* what, const HostMask& m, const Problem& p, CausalMode causal, int bits) {
  char b[200];
  std::snprintf(b, sizeof b, "%s: %s, int%d %s %s d=%lld%s", what, m.shape.c_str(), bits, causal_mode_name(causal),
                dtype_name(p.dt), (long long)p.d, p.nhd ? " NHD" : "");
  return b;
}

// The tile the Context plans for a call (masked and unmasked calls are expected to share it).
kernels::TileConfig planned_tile(Context& ctx, const Problem& p, const AttentionParams& a, const TensorRef& out) {
  auto& impl = runtime::context_impl(ctx);
  const plan::AttentionProblem prob = plan::validate_attention(p.dq(), p.dk(), p.dv(), out, a, impl.arch());
  return runtime::plan_attention(prob, impl).tile;
}

// A masked call gives the bits (output and LSE) of the same call without a mask.
void check_same_bits_as_unmasked(Context& ctx, const std::string& name, const Problem& p, const HostMask& m,
                                 CausalMode causal, int bits) {
  CAPTURE(name);
  const auto md = to_device(m);
  const GpuResult masked = run_gpu(ctx, p, &m, md.get(), causal, bits);
  const GpuResult plain = run_gpu(ctx, p, nullptr, nullptr, causal, bits);
  {
    OutBuffers o(p);
    AttentionParams a = call_params(bits, causal);
    a.lse = static_cast<float*>(o.lse->get());  // as in the calls above
    AttentionParams am = a;
    am.mask = m.on_device(md->get());
    const kernels::TileConfig t0 = planned_tile(ctx, p, a, o.ref()), t1 = planned_tile(ctx, p, am, o.ref());
    INFO("unmasked tile bq" << t0.bq << " bk" << t0.bk << " w" << t0.warps << " s" << t0.stages << ", masked bq"
                            << t1.bq << " bk" << t1.bk << " w" << t1.warps << " s" << t1.stages);
    CHECK(t0 == t1);
  }
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < masked.raw.size(); ++i) differ += masked.raw[i] != plain.raw[i];
  std::int64_t lse_differ = 0;
  for (std::size_t i = 0; i < masked.lse.size(); ++i)
    lse_differ += std::memcmp(&masked.lse[i], &plain.lse[i], 4) != 0;
  std::printf("mask %-62s bit-identical to the unmasked call: %lld output / %lld LSE elements differ\n", name.c_str(),
              (long long)differ, (long long)lse_differ);
  CHECK(std::memcmp(masked.raw.data(), plain.raw.data(), masked.raw.size() * 2) == 0);
  CHECK(std::memcmp(masked.lse.data(), plain.lse.data(), masked.lse.size() * 4) == 0);
  // and both are attention
  check_verdict(name + " (vs fp64)", judge(masked_reference(p.in, nullptr, causal), masked, p.d), bits, false);
}

std::uint64_t announce_seed() {
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  return seed;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
TEST_CASE("gpu mask: bool masks of every broadcast shape match fp64; rows without keys are 0 / -inf") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const struct {
    DType dt;
    int d;
  } setups[] = {{DType::F16, 128}, {DType::BF16, 64}};
  int n = 0;
  for (const auto& su : setups) {
    const std::uint64_t sd = seed + static_cast<std::uint64_t>(++n) * 100;
    CAPTURE(sd);
    const auto p = make_problem(sd, su.dt, su.d, s);
    const MaskFn fn = structured(sd, s.nq, s.nk, false);
    // broadcast over heads
    const HostMask per_batch = make_mask(MaskType::Bool, s.b, 1, s.nq, s.nk, fn);
    check_masked(ctx, name_of("bool", per_batch, *p, CausalMode::None, 8), *p, per_batch, CausalMode::None, 8, true);
    // one mask for every batch and head, rows padded (a view of a wider tensor)
    const HostMask one = make_mask(MaskType::Bool, 1, 1, s.nq, s.nk, fn, 24);
    check_masked(ctx, name_of("bool", one, *p, CausalMode::None, 8), *p, one, CausalMode::None, 8, true);
    // key padding [B,1,1,Nk]: a batch with no key at all (first setup) or a single key (second)
    const std::vector<std::int64_t> lens =
        n == 1 ? std::vector<std::int64_t>{s.nk * 7 / 8 + 3, 0} : std::vector<std::int64_t>{1, s.nk};
    const HostMask kp = make_mask(MaskType::Bool, s.b, 1, 1, s.nk, padding(lens, 1.f, 0.f));
    check_masked(ctx, name_of("key padding", kp, *p, CausalMode::None, 8), *p, kp, CausalMode::None, 8, n == 1);
    // a row mask [B,1,Nq,1] (stride_k = 0): every third row of batch 1 sees nothing
    const HostMask rows = make_mask(MaskType::Bool, s.b, 1, s.nq, 1,
                                    [](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t) -> float {
                                      return b == 1 && i % 3 == 1 ? 0.f : 1.f;
                                    });
    check_masked(ctx, name_of("row mask", rows, *p, CausalMode::None, 8), *p, rows, CausalMode::None, 8, true);
  }
  // [B,H,Nq,Nk] (per batch and head), q/k/v in NHD
  const std::uint64_t sd = seed + 7;
  CAPTURE(sd);
  const auto p = make_problem(sd, DType::F16, 128, s, true);
  const HostMask full = make_mask(MaskType::Bool, s.b, s.hq, s.nq, s.nk, structured(sd, s.nq, s.nk, false));
  check_masked(ctx, name_of("bool", full, *p, CausalMode::None, 8), *p, full, CausalMode::None, 8, true);
}

TEST_CASE("gpu mask: additive f16 / bf16 / f32 masks (random terms, -inf, Hugging Face -1e4 padding) match fp64") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const auto pa = make_problem(seed + 1, DType::F16, 128, s);
  const auto pb = make_problem(seed + 2, DType::BF16, 64, s);
  {
    const HostMask m = make_mask(MaskType::F16, s.b, 1, s.nq, s.nk, random_additive(seed + 11, s.nq));
    check_masked(ctx, name_of("additive", m, *pa, CausalMode::None, 8), *pa, m, CausalMode::None, 8, true);
  }
  {
    const HostMask m = make_mask(MaskType::BF16, 1, s.hq, s.nq, s.nk, structured(seed + 12, s.nq, s.nk, true));
    check_masked(ctx, name_of("additive", m, *pb, CausalMode::None, 8), *pb, m, CausalMode::None, 8, true);
  }
  {  // per batch and head, stored transposed ([B,H,Nk,Nq]: stride_q = 1, stride_k = Nq + 3)
    const HostMask m = make_mask(MaskType::F32, s.b, s.hq, s.nq, s.nk, random_additive(seed + 13, s.nq), 3, true);
    check_masked(ctx, name_of("additive", m, *pa, CausalMode::None, 8), *pa, m, CausalMode::None, 8, true);
  }
  // Hugging Face style: 0 on kept keys, a large negative finite value on padded ones ([B,1,1,Nk]).
  const std::vector<std::int64_t> lens = {s.nk - 77, s.nk * 2 / 5};
  for (MaskType t : {MaskType::F16, MaskType::BF16, MaskType::F32}) {
    const Problem& p = t == MaskType::BF16 ? *pb : *pa;
    const HostMask m = make_mask(t, s.b, 1, 1, s.nk, padding(lens, 0.f, -1e4f));
    check_masked(ctx, name_of("padding -1e4", m, p, CausalMode::None, 8), p, m, CausalMode::None, 8, false);
  }
  // ... and the f16 dtype's finfo.min (-65504), which Hugging Face uses for f16 models.
  const HostMask m = make_mask(MaskType::F16, s.b, 1, 1, s.nk, padding(lens, 0.f, -65504.f));
  check_masked(ctx, name_of("padding finfo.min", m, *pa, CausalMode::None, 8), *pa, m, CausalMode::None, 8, false);
}

TEST_CASE("gpu mask: causal + key padding, and a prefix-LM mask, match fp64") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const auto pa = make_problem(seed + 1, DType::F16, 128, s);
  const auto pb = make_problem(seed + 2, DType::BF16, 64, s);
  {  // top-left: row i sees keys j <= i below the batch's length
    const HostMask m = make_mask(MaskType::Bool, s.b, 1, 1, s.nk, padding({s.nq * 4 / 7, s.nk}, 1.f, 0.f));
    check_masked(ctx, name_of("causal + padding", m, *pa, CausalMode::TopLeft, 8), *pa, m, CausalMode::TopLeft, 8,
                 false);
  }
  {  // bottom-right with additive padding (0 / -inf)
    const float ninf = -std::numeric_limits<float>::infinity();
    const HostMask m = make_mask(MaskType::F16, s.b, 1, 1, s.nk, padding({s.nk - 50, s.nk - s.nq / 2}, 0.f, ninf));
    check_masked(ctx, name_of("causal + padding", m, *pb, CausalMode::BottomRight, 8), *pb, m,
                 CausalMode::BottomRight, 8, false);
  }
  {  // bottom-right with Hugging Face's padding of -1e4 (causal + padding in one call)
    const HostMask m = make_mask(MaskType::F16, s.b, 1, 1, s.nk, padding({s.nk / 3, s.nk - 9}, 0.f, -1e4f));
    check_masked(ctx, name_of("causal + padding -1e4", m, *pb, CausalMode::BottomRight, 8), *pb, m,
                 CausalMode::BottomRight, 8, false);
  }
  // Prefix-LM: keys below the batch's prefix are visible to every row, the rest causal
  // (bottom-right aligned: the last query sees every key).
  const std::vector<std::int64_t> prefix = {s.nk / 8, s.nk / 3 + 1};
  const std::int64_t off = s.nk - s.nq;
  const MaskFn plm = [=](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) -> float {
    return j < prefix[static_cast<std::size_t>(b)] || j <= i + off ? 1.f : 0.f;
  };
  const HostMask mb = make_mask(MaskType::Bool, s.b, 1, s.nq, s.nk, plm);
  check_masked(ctx, name_of("prefix-LM", mb, *pa, CausalMode::None, 8), *pa, mb, CausalMode::None, 8, false);
  const HostMask mf = make_mask(MaskType::F32, s.b, 1, s.nq, s.nk,
                                [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) -> float {
                                  return plm(b, h, i, j) != 0.f ? 0.f : -std::numeric_limits<float>::infinity();
                                });
  check_masked(ctx, name_of("prefix-LM", mf, *pa, CausalMode::None, 8), *pa, mf, CausalMode::None, 8, false);
}

TEST_CASE("gpu mask: all-visible masks give the unmasked call's bits; the causal mask as a tensor matches causal") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const auto pa = make_problem(seed + 1, DType::F16, 128, s);
  const auto pb = make_problem(seed + 2, DType::BF16, 64, s);
  const MaskFn all_true = [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) { return 1.f; };
  // zeros of both signs: -0 is no additive term either
  const MaskFn zeros = [](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    return (b + h + i + j) % 2 ? -0.f : 0.f;
  };
  const HostMask t1 = make_mask(MaskType::Bool, 1, 1, s.nq, s.nk, all_true);
  check_same_bits_as_unmasked(ctx, name_of("all true", t1, *pa, CausalMode::None, 8), *pa, t1, CausalMode::None, 8);
  const HostMask t2 = make_mask(MaskType::Bool, s.b, 1, 1, s.nk, all_true);
  check_same_bits_as_unmasked(ctx, name_of("all true", t2, *pa, CausalMode::TopLeft, 8), *pa, t2, CausalMode::TopLeft,
                              8);
  const HostMask z1 = make_mask(MaskType::F16, s.b, s.hq, s.nq, s.nk, zeros);
  check_same_bits_as_unmasked(ctx, name_of("all zero", z1, *pb, CausalMode::None, 8), *pb, z1, CausalMode::None, 8);
  const HostMask z2 = make_mask(MaskType::F32, 1, 1, 1, s.nk, zeros);
  check_same_bits_as_unmasked(ctx, name_of("all zero", z2, *pa, CausalMode::None, 8), *pa, z2, CausalMode::None, 8);

  // The causal masks as tensors: tril (j <= i, top-left) and j <= i + Nk - Nq (bottom-right).
  for (CausalMode cm : {CausalMode::TopLeft, CausalMode::BottomRight}) {
    const std::int64_t nq = s.nq, nk = s.nk;
    const HostMask tril = make_mask(MaskType::Bool, 1, 1, nq, nk,
                                    [=](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) -> float {
                                      return ref::key_visible(cm, i, j, nq, nk) ? 1.f : 0.f;
                                    });
    const std::string name = name_of("causal as a tensor", tril, *pa, CausalMode::None, 8);
    CAPTURE(name);
    const auto md = to_device(tril);
    const GpuResult masked = run_gpu(ctx, *pa, &tril, md.get(), CausalMode::None, 8);
    const GpuResult causal = run_gpu(ctx, *pa, nullptr, nullptr, cm, 8);
    const std::vector<double> want(causal.o.begin(), causal.o.end());
    const ref::Metrics m = ref::compare(want, masked.o);
    double lse_diff = 0;
    for (std::size_t i = 0; i < masked.lse.size(); ++i)
      lse_diff = std::max(lse_diff, std::fabs(static_cast<double>(masked.lse[i]) - causal.lse[i]));
    std::printf("mask %-62s vs CausalMode::%s: relL1 %.2e max abs %.2e, LSE diff %.2e\n", name.c_str(),
                causal_mode_name(cm), m.rel_l1, m.max_abs, lse_diff);
    // The same quantized inputs and tiles: only the rounding of the score's last operations may
    // differ (the mask's +0 keeps the value; a contraction into an FMA may change).
    CHECK(m.nonfinite == 0);
    CHECK(m.rel_l1 <= 1e-3);
    CHECK(lse_diff <= 1e-3);
    check_verdict(name + " (vs fp64)", judge(masked_reference(pa->in, nullptr, cm), masked, pa->d), 8, false);
  }
}

TEST_CASE("gpu mask: masks hiding whole tiles at the start, the end and inside the key range match fp64") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  Sizes s = sizes();
  // Nk = 2000, keys visible in [600, 900) only (reduced: Nk = 600, [180, 270)).
  s.nk = test::reduced() ? 600 : 2000;
  const std::int64_t lo = s.nk * 3 / 10, hi = s.nk * 9 / 20, nk = s.nk;
  const auto p = make_problem(seed + 1, DType::F16, 128, s);
  {
    const HostMask m = make_mask(MaskType::Bool, 1, 1, s.nq, s.nk,
                                 [=](std::int64_t, std::int64_t, std::int64_t, std::int64_t j) -> float {
                                   return j >= lo && j < hi ? 1.f : 0.f;
                                 });
    check_masked(ctx, name_of("window", m, *p, CausalMode::None, 8), *p, m, CausalMode::None, 8, false);
  }
  {  // per batch: b 0 the window with random terms; b 1 two windows, the last one ending at Nk
     // (interior all-masked tiles between them); rows [Nq/3, Nq/3 + 10) see nothing
    const std::int64_t nq = s.nq;
    const std::uint64_t sd = seed + 21;
    const HostMask m =
        make_mask(MaskType::F32, s.b, 1, s.nq, s.nk, [=](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) {
          const float ninf = -std::numeric_limits<float>::infinity();
          if (i >= nq / 3 && i < nq / 3 + 10) return ninf;
          const bool vis = b == 0 ? (j >= lo && j < hi) : ((j >= nk * 3 / 4 && j < nk * 3 / 4 + 40) || j >= nk - 63);
          return vis ? static_cast<float>(4.0 * unit(cell(sd, b, 0, i, j)) - 2.0) : ninf;
        });
    check_masked(ctx, name_of("windows", m, *p, CausalMode::None, 8), *p, m, CausalMode::None, 8, true);
  }
  {  // with top-left causal: the window [Nk/20, Nk/5); rows before Nk/20 see nothing
    const std::int64_t a = nk / 20, b = nk / 5;
    const HostMask m = make_mask(MaskType::Bool, 1, 1, s.nq, s.nk,
                                 [=](std::int64_t, std::int64_t, std::int64_t, std::int64_t j) -> float {
                                   return j >= a && j < b ? 1.f : 0.f;
                                 });
    check_masked(ctx, name_of("window", m, *p, CausalMode::TopLeft, 8), *p, m, CausalMode::TopLeft, 8, true);
  }
}

TEST_CASE("gpu mask: the mma.sync family (Context with family Mma): 4- and 8-bit masked calls") {
  Context& ctx = mma_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const auto pa = make_problem(seed + 1, DType::F16, 128, s);
  const auto pb = make_problem(seed + 2, DType::BF16, 64, s);
  {
    const HostMask m = make_mask(MaskType::Bool, s.b, 1, s.nq, s.nk, structured(seed + 11, s.nq, s.nk, false));
    check_masked(ctx, name_of("mma bool", m, *pb, CausalMode::None, 4), *pb, m, CausalMode::None, 4, true);
  }
  {
    const HostMask m = make_mask(MaskType::F32, s.b, s.hq, s.nq, s.nk, random_additive(seed + 12, s.nq));
    check_masked(ctx, name_of("mma additive", m, *pa, CausalMode::None, 4), *pa, m, CausalMode::None, 4, true);
  }
  {  // causal + a mask whose leading tiles are skipped (the causal diagonal shifts with them)
    const std::int64_t a = s.nk / 5, b = s.nk * 4 / 5;
    const HostMask m = make_mask(MaskType::Bool, 1, 1, s.nq, s.nk,
                                 [=](std::int64_t, std::int64_t, std::int64_t, std::int64_t j) -> float {
                                   return j >= a && j < b ? 1.f : 0.f;
                                 });
    check_masked(ctx, name_of("mma window", m, *pa, CausalMode::TopLeft, 8), *pa, m, CausalMode::TopLeft, 8, true);
  }
  const HostMask t = make_mask(MaskType::Bool, s.b, 1, 1, s.nk,
                               [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) { return 1.f; });
  check_same_bits_as_unmasked(ctx, name_of("mma all true", t, *pb, CausalMode::None, 4), *pb, t, CausalMode::None, 4);
}

TEST_CASE("gpu mask: bad masks are refused naming params.mask, and nothing is written") {
  Context& ctx = test::gpu_context();
  const std::uint64_t seed = announce_seed();
  const Sizes s{2, 4, 2, 64, 96};
  const auto p = make_problem(seed, DType::BF16, 64, s);
  OutBuffers out(*p);
  // (bf16: the kernels a refused call may plan before its pointers are checked are those of the
  // valid C call below)
  const HostMask good = make_mask(MaskType::BF16, s.b, 1, s.nq, s.nk, random_additive(seed + 1, s.nq));
  const auto md = to_device(good);
  std::vector<std::uint16_t> host_mask(good.bytes.size() / 2, 0);

  struct Bad {
    const char* what;
    MaskRef mask;
  };
  std::vector<Bad> bad;
  {
    MaskRef m = good.on_device(md->get());
    m.data = nullptr;
    bad.push_back({"null data with a type", m});
  }
  {
    MaskRef m = good.on_device(md->get());
    m.stride_q = -m.stride_q;
    bad.push_back({"negative stride_q", m});
  }
  {
    MaskRef m = good.on_device(md->get());
    m.stride_k = -1;
    bad.push_back({"negative stride_k", m});
  }
  {
    MaskRef m = good.on_device(out.o->get());
    bad.push_back({"mask overlapping out", m});
  }
  {
    MaskRef m = good.on_device(static_cast<const char*>(out.o->get()) + 64);  // starts inside out
    m.type = MaskType::Bool;
    bad.push_back({"bool mask starting inside out", m});
  }
  {
    MaskRef m = good.on_device(md->get());
    m.type = static_cast<MaskType>(9);
    bad.push_back({"unknown type", m});
  }
  {
    MaskRef m = good.on_device(static_cast<const char*>(md->get()) + 2);
    m.type = MaskType::F32;
    bad.push_back({"f32 data not 4-byte aligned", m});
  }
  {
    MaskRef m = good.on_device(host_mask.data());
    bad.push_back({"host memory", m});
  }

  out.poison(kPoison);
  const std::size_t obytes = out.o->bytes(), lbytes = out.lse->bytes();
  auto untouched = [&] {
    test::synchronize();
    std::vector<unsigned char> o(obytes), l(lbytes);
    out.o->download(o.data(), obytes);
    out.lse->download(l.data(), lbytes);
    return std::all_of(o.begin(), o.end(), [](unsigned char c) { return c == kPoison; }) &&
           std::all_of(l.begin(), l.end(), [](unsigned char c) { return c == kPoison; });
  };
  for (const Bad& b : bad) {
    const std::string what = b.what;
    CAPTURE(what);
    AttentionParams a = call_params(8, CausalMode::None);
    a.lse = static_cast<float*>(out.lse->get());
    a.mask = b.mask;
    bool thrown = false;
    try {
      ctx.attention(p->dq(), p->dk(), p->dv(), out.ref(), a);
    } catch (const Error& e) {
      thrown = true;
      INFO("message: " << e.what());
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find("params.mask") != std::string::npos);
    }
    CHECK(thrown);
    CHECK(untouched());
  }
  {  // a mask with varlen (key padding goes to SeqLens::kv_lens)
    test::DeviceBuffer kvl(static_cast<std::size_t>(s.b) * 4);
    const std::vector<std::int32_t> lens(static_cast<std::size_t>(s.b), static_cast<std::int32_t>(s.nk));
    kvl.upload(lens.data(), lens.size() * 4);
    SeqLens l;
    l.batch = s.b;
    l.kv_lens = static_cast<const std::int32_t*>(kvl.get());
    AttentionParams a = call_params(8, CausalMode::None);
    a.lse = static_cast<float*>(out.lse->get());
    a.mask = good.on_device(md->get());
    bool thrown = false;
    try {
      ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), l, a);
    } catch (const Error& e) {
      thrown = true;
      INFO("message: " << e.what());
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find("params.mask") != std::string::npos);
    }
    CHECK(thrown);
    CHECK(untouched());
  }

  // The C function: the same refusals, and a valid call gives the bits of the C++ call.
  sage2_context* c = nullptr;
  REQUIRE(sage2_context_create(0, nullptr, 1, &c) == SAGE2_OK);
  auto c_tensor = [](const TensorRef& t) {
    sage2_tensor r;
    r.data = t.data;
    r.dtype = static_cast<std::int32_t>(t.dtype);
    r.batch = t.batch;
    r.heads = t.heads;
    r.seq = t.seq;
    r.dim = t.dim;
    r.stride_batch = t.stride_batch;
    r.stride_head = t.stride_head;
    r.stride_seq = t.stride_seq;
    r.stride_dim = t.stride_dim;
    return r;
  };
  auto c_mask = [](const MaskRef& m) {
    sage2_mask r;
    r.data = m.data;
    r.type = static_cast<std::int32_t>(m.type);
    r.stride_batch = m.stride_batch;
    r.stride_head = m.stride_head;
    r.stride_q = m.stride_q;
    r.stride_k = m.stride_k;
    return r;
  };
  const sage2_tensor cq = c_tensor(p->dq()), ck = c_tensor(p->dk()), cv = c_tensor(p->dv()), co = c_tensor(out.ref());
  sage2_attention_params cp;
  sage2_attention_params_init(&cp);
  cp.qk_bits = 8;
  cp.lse = static_cast<float*>(out.lse->get());
  for (const Bad& b : bad) {
    const std::string what = b.what;
    CAPTURE(what);
    const sage2_mask cm = c_mask(b.mask);
    CHECK(sage2_attention_masked(c, &cq, &ck, &cv, &co, &cm, &cp, nullptr) == SAGE2_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(sage2_last_error()).find("params.mask") != std::string::npos);
    CHECK(untouched());
  }
  {  // a valid mask with distinct strides (each field must reach the library): the C++ call's bits
    const HostMask m =
        make_mask(MaskType::BF16, s.b, s.hq, s.nq, s.nk, structured(seed + 2, s.nq, s.nk, true), 5, true);
    const auto mdev = to_device(m);
    const sage2_mask cm = c_mask(m.on_device(mdev->get()));
    out.poison(0xFF);
    REQUIRE(sage2_attention_masked(c, &cq, &ck, &cv, &co, &cm, &cp, nullptr) == SAGE2_OK);
    test::synchronize();
    const GpuResult via_c = out.read();
    const GpuResult via_cpp = run_gpu(ctx, *p, &m, mdev.get(), CausalMode::None, 8);
    CHECK(std::memcmp(via_c.raw.data(), via_cpp.raw.data(), via_c.raw.size() * 2) == 0);
    CHECK(std::memcmp(via_c.lse.data(), via_cpp.lse.data(), via_c.lse.size() * 4) == 0);
    check_verdict(name_of("C API", m, *p, CausalMode::None, 8),
                  judge(masked_reference(p->in, &m, CausalMode::None), via_c, p->d), 8, true);
  }
  CHECK(sage2_context_destroy(c) == SAGE2_OK);
}

TEST_CASE("gpu mask: a CUDA graph replays with the mask's contents rewritten on the device") {
  Context& ctx = test::gpu_context();
  const auto& api = base::driver::api();
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  const std::uint64_t seed = announce_seed();
  const Sizes s = sizes();
  const auto p = make_problem(seed + 1, DType::F16, 128, s);
  const std::int64_t nq = s.nq, nk = s.nk;
  // Three contents of one [B,1,Nq,Nk] bool mask: structured (captured), windows that hide leading
  // and trailing tiles per batch, and all visible (class 1 everywhere).
  const HostMask m0 = make_mask(MaskType::Bool, s.b, 1, nq, nk, structured(seed + 2, nq, nk, false));
  const HostMask m1 = make_mask(MaskType::Bool, s.b, 1, nq, nk,
                                [=](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) -> float {
                                  const std::int64_t lo = b == 0 ? nk / 2 : 0, hi = b == 0 ? nk : nk / 5;
                                  return j >= lo && j < hi && i % 17 != 3 ? 1.f : 0.f;
                                });
  const HostMask m2 = make_mask(MaskType::Bool, s.b, 1, nq, nk,
                                [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) { return 1.f; });
  REQUIRE(m1.bytes.size() == m0.bytes.size());
  const auto md = to_device(m0);
  OutBuffers out(*p);
  AttentionParams a = call_params(8, CausalMode::None);
  a.lse = static_cast<float*>(out.lse->get());
  a.mask = m0.on_device(md->get());

  CUstream stream;
  base::driver::check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // Warm-up outside capture: compiles kernels and sizes this stream's workspace.
  ctx.attention(p->dq(), p->dk(), p->dv(), out.ref(), a, stream);
  base::driver::check(api.cuStreamSynchronize(stream), "sync");
  const std::size_t held = runtime::context_impl(ctx).workspace().bytes_held();
  base::driver::check(api.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
  ctx.attention(p->dq(), p->dk(), p->dv(), out.ref(), a, stream);
  CUgraph graph;
  base::driver::check(api.cuStreamEndCapture(stream, &graph), "end capture");
  CUgraphExec exec;
  base::driver::check(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
  CHECK(runtime::context_impl(ctx).workspace().bytes_held() == held);  // no allocation while capturing

  const HostMask* rounds[] = {&m1, &m2, &m0, &m1};
  int round = 0;
  for (const HostMask* m : rounds) {
    CAPTURE(round);
    md->upload(m->bytes.data(), m->bytes.size());
    out.poison(0xFF);  // (synchronizes: the new mask has landed)
    base::driver::check(api.cuGraphLaunch(exec, stream), "graph launch");
    base::driver::check(api.cuStreamSynchronize(stream), "sync");
    const GpuResult got = out.read();
    char name[64];
    const char* what = m == &m0 ? "structured" : m == &m1 ? "windows" : "all true";
    std::snprintf(name, sizeof name, "graph replay %d (%s)", round, what);
    check_verdict(name, judge(masked_reference(p->in, m, CausalMode::None), got, p->d), 8, m != &m2);
    ++round;
  }
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy_v2(stream);
}
