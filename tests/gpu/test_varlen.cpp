// Specification of Context::attention_varlen on the GPU (issue 17; sage2::SeqLens in sage2.hpp).
// The library's contract: everything a sequence's quantization shares is computed over that
// sequence alone, with the block grouping of a dense call of it, so
//  - packed form (cu_seqlens): the output rows and LSE of sequence b are bit for bit those of a
//    dense Context::attention call of that sequence alone (B = 1, its own lengths, same heads,
//    options and tile), for random lengths with 0 and 1 and one long sequence among 20 short
//    ones, GQA 4, f16/bf16, the three causal modes (aligned per sequence), head dims 64/128/80,
//    8- and 4-bit; a sequence with len_k = 0 gets O = 0 and LSE = -inf; the output also agrees
//    with the CPU emulation of the same spec (reference::emulate_attention_varlen) and with fp64
//    attention (8-bit: the dense suite's targets; INT4, which has no smooth-Q here: as accurate
//    as the emulated algorithm itself);
//  - the LSE is packed [Hq, total_q];
//  - rows after cu[B] (output and LSE) are untouched, and tokens outside every sequence (NaN
//    here) are never read;
//  - a max_seqlen bound below a sequence's length still gives that sequence's dense result;
//  - key-padding form (kv_lens): batch b equals the dense call with k, v truncated to kv_lens[b];
//  - length arrays that break the rules (decreasing, cu[0] != 0, cu[B] beyond the tokens,
//    kv_lens out of range) give NaN in every output and LSE element, no fault, and the Context
//    computes the next valid call correctly;
//  - a call captured in a CUDA graph, replayed after new lengths (same totals) are written into
//    the same device arrays, gives the new lengths' result.
// Every case uses one Context with tuning off (dense and varlen calls then run the heuristic
// default tile, which depends on neither length: plan/candidates.hpp) and the split quantize
// stage (the one varlen path; explicit so that the dense calls use it too), and passes
// smooth_q = Off to both calls (varlen has no smooth-Q; Auto would turn it on for dense 4-bit).
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "accuracy_targets.hpp"
#include "gpu_env.hpp"
#include "kernels/kernel_spec.hpp"
#include "plan/attention_validate.hpp"
#include "reference/kernel_config.hpp"
#include "runtime/attention_plan.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

constexpr unsigned char kPoison = 0xA5;       // varlen outputs before the call (finite in f16, bf16, f32)
constexpr unsigned char kDensePoison = 0x5A;  // dense outputs before the calls (differs from kPoison)
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Context& varlen_context() {
  static Context ctx(0, ContextOptions{.quant_path = QuantPath::Split, .tuning = false});
  return ctx;
}

std::size_t bytes_of(const ref::HostTensor& t) {
  return static_cast<std::size_t>(t.ref().numel()) * dtype_size(t.dtype());
}

std::unique_ptr<test::DeviceBuffer> to_device(const ref::HostTensor& t) {
  auto b = std::make_unique<test::DeviceBuffer>(bytes_of(t));
  b->upload(t.ref().data, bytes_of(t));
  return b;
}

std::unique_ptr<test::DeviceBuffer> to_device(const std::vector<std::int32_t>& v) {
  auto b = std::make_unique<test::DeviceBuffer>(v.size() * 4);
  b->upload(v.data(), v.size() * 4);
  return b;
}

void overwrite(test::DeviceBuffer& b, const std::vector<std::int32_t>& v) {
  REQUIRE(v.size() * 4 <= b.bytes());
  b.upload(v.data(), v.size() * 4);
  test::synchronize();  // the copy has landed before any stream reads it
}

TensorRef on_device(const ref::HostTensor& t, const test::DeviceBuffer& b) {
  TensorRef r = t.ref();
  r.data = b.get();
  return r;
}

// Tokens [n0, n0 + len) of batch b of t, as a batch-1 view with t's strides.
TensorRef tokens(const TensorRef& t, std::int64_t b, std::int64_t n0, std::int64_t len) {
  TensorRef r = t;
  r.data = static_cast<const char*>(t.data) +
           (b * t.stride_batch + n0 * t.stride_seq) * static_cast<std::int64_t>(dtype_size(t.dtype));
  r.batch = 1;
  r.seq = len;
  return r;
}

float decode(DType dt, std::uint16_t bits) {
  return dt == DType::BF16 ? ref::bf16_to_float(bits) : ref::half_to_float(bits);
}

bool all_bytes(const void* p, std::size_t n, unsigned char byte) {
  const auto* c = static_cast<const unsigned char*>(p);
  return std::all_of(c, c + n, [&](unsigned char x) { return x == byte; });
}

std::string lengths_str(const std::vector<std::int32_t>& q, const std::vector<std::int32_t>& k) {
  std::string s;
  for (std::size_t b = 0; b < q.size(); ++b) s += (b ? " " : "") + std::to_string(q[b]) + "/" + std::to_string(k[b]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// A packed problem: q [total_q, Hq, d], k and v [total_k, Hkv, d] (NHD views with batch 1), on
// host and device, with its cu_seqlens. Each sequence's K and V get a channel shift of their own
// (K's leaves exact attention unchanged; both move the per-sequence statistics far from a
// batch-wide one). Tokens after the last sequence hold NaN.
struct Packed {
  DType dt = DType::F16;
  std::int64_t hq = 0, hkv = 0, d = 0, total_q = 0, total_k = 0;
  std::vector<std::int32_t> len_q, len_k;
  ref::HostSeqLens lens;
  ref::AttentionInputs host;
  std::unique_ptr<test::DeviceBuffer> q, k, v, cu_q, cu_k;
  TensorRef dq() const { return on_device(host.q, *q); }
  TensorRef dk() const { return on_device(host.k, *k); }
  TensorRef dv() const { return on_device(host.v, *v); }
  std::int64_t batch() const { return static_cast<std::int64_t>(len_q.size()); }
  std::int32_t cuq(std::size_t b) const { return lens.cu_seqlens_q[b]; }
  std::int32_t cuk(std::size_t b) const { return lens.cu_seqlens_k[b]; }
};

std::unique_ptr<Packed> make_packed(std::uint64_t seed, DType dt, std::int64_t hq, std::int64_t hkv, std::int64_t d,
                                    const std::vector<std::int32_t>& len_q, const std::vector<std::int32_t>& len_k,
                                    std::int64_t spare_q = 5, std::int64_t spare_k = 3) {
  auto p = std::make_unique<Packed>();
  p->dt = dt;
  p->hq = hq;
  p->hkv = hkv;
  p->d = d;
  p->len_q = len_q;
  p->len_k = len_k;
  p->lens = ref::HostSeqLens::packed_from_lengths(len_q, len_k);
  p->total_q = p->lens.cu_seqlens_q.back() + spare_q;
  p->total_k = p->lens.cu_seqlens_k.back() + spare_k;
  p->host = test::make_inputs(1, seed, dt, 1, hq, hkv, p->total_q, p->total_k, d, true);
  std::mt19937_64 rng(seed ^ 0x5eed);
  std::normal_distribution<double> shift(0.0, 2.0);
  for (std::size_t b = 0; b < len_q.size(); ++b)
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t c = 0; c < d; ++c) {
        const auto sk = static_cast<float>(shift(rng)), sv = static_cast<float>(shift(rng));
        for (std::int64_t j = p->cuk(b); j < p->cuk(b + 1); ++j) {
          p->host.k.set(0, h, j, c, p->host.k.get(0, h, j, c) + sk);
          p->host.v.set(0, h, j, c, p->host.v.get(0, h, j, c) + sv);
        }
      }
  for (std::int64_t h = 0; h < hq; ++h)
    for (std::int64_t i = p->lens.cu_seqlens_q.back(); i < p->total_q; ++i)
      for (std::int64_t c = 0; c < d; ++c) p->host.q.set(0, h, i, c, kNaNf);
  for (std::int64_t h = 0; h < hkv; ++h)
    for (std::int64_t j = p->lens.cu_seqlens_k.back(); j < p->total_k; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        p->host.k.set(0, h, j, c, kNaNf);
        p->host.v.set(0, h, j, c, kNaNf);
      }
  p->q = to_device(p->host.q);
  p->k = to_device(p->host.k);
  p->v = to_device(p->host.v);
  p->cu_q = to_device(p->lens.cu_seqlens_q);
  p->cu_k = to_device(p->lens.cu_seqlens_k);
  return p;
}

// The packed output and LSE buffers of one problem, poisoned with kPoison.
struct PackedOut {
  ref::HostTensor shape;  // [1, Hq, total_q, d] NHD (host side only describes the layout)
  std::unique_ptr<test::DeviceBuffer> o, lse;
  explicit PackedOut(const Packed& p)
      : shape(p.dt, 1, p.hq, p.total_q, p.d, true),
        o(std::make_unique<test::DeviceBuffer>(bytes_of(shape))),
        lse(std::make_unique<test::DeviceBuffer>(static_cast<std::size_t>(p.hq * p.total_q) * 4)) {
    poison();
  }
  void poison() {
    o->poison(kPoison);
    lse->poison(kPoison);
    test::synchronize();  // the memsets (legacy stream) are done before a call on any stream
  }
  TensorRef ref() const { return on_device(shape, *o); }
  std::vector<std::uint16_t> out_bits() const {
    std::vector<std::uint16_t> v(bytes_of(shape) / 2);
    o->download(v.data(), v.size() * 2);
    return v;
  }
  std::vector<float> lse_values() const {
    std::vector<float> v(lse->bytes() / 4);
    lse->download(v.data(), v.size() * 4);
    return v;
  }
};

SeqLens packed_lens(const Packed& p, std::int64_t max_q = -1, std::int64_t max_k = -1) {
  SeqLens l;
  l.batch = p.batch();
  l.cu_seqlens_q = static_cast<const std::int32_t*>(p.cu_q->get());
  l.cu_seqlens_k = static_cast<const std::int32_t*>(p.cu_k->get());
  l.max_seqlen_q = max_q >= 0 ? max_q : *std::max_element(p.len_q.begin(), p.len_q.end());
  l.max_seqlen_k = max_k >= 0 ? max_k : *std::max_element(p.len_k.begin(), p.len_k.end());
  return l;
}

AttentionParams params(int bits, CausalMode causal) {
  AttentionParams a;
  a.causal = causal;
  a.qk_bits = static_cast<QkBits>(bits);
  a.smooth_q = Toggle::Off;
  a.small_q_path = SmallQPath::Quantized;  // the dense calls compared with varlen (which is always quantized)
  return a;
}

// What the varlen call must have written, from dense calls of each sequence alone (lengths as
// in p.lens, whatever the device arrays hold).
struct Mismatches {
  std::int64_t out_rows = 0, lse = 0, empty_rows = 0, tail = 0, sequences = 0;
};

Mismatches compare_with_dense(Context& ctx, const Packed& p, const AttentionParams& base,
                              const std::vector<std::uint16_t>& got, const std::vector<float>& got_lse) {
  const std::size_t row = static_cast<std::size_t>(p.hq * p.d);  // elements of one packed token
  ref::HostTensor shape(p.dt, 1, p.hq, p.total_q, p.d, true);
  test::DeviceBuffer o(bytes_of(shape)), lse(static_cast<std::size_t>(p.hq * p.total_q) * 4);
  o.poison(kDensePoison);
  lse.poison(kDensePoison);
  const TensorRef od = on_device(shape, o);
  for (std::size_t b = 0; b < p.len_q.size(); ++b) {
    if (p.len_q[b] == 0 || p.len_k[b] == 0) continue;  // no dense call has zero tokens
    AttentionParams a = base;
    a.lse = static_cast<float*>(lse.get()) + p.hq * p.cuq(b);  // [Hq][len_q] of this call
    ctx.attention(tokens(p.dq(), 0, p.cuq(b), p.len_q[b]), tokens(p.dk(), 0, p.cuk(b), p.len_k[b]),
                  tokens(p.dv(), 0, p.cuk(b), p.len_k[b]), tokens(od, 0, p.cuq(b), p.len_q[b]), a);
  }
  test::synchronize();
  std::vector<std::uint16_t> want(bytes_of(shape) / 2);
  std::vector<float> want_lse(static_cast<std::size_t>(p.hq * p.total_q));
  o.download(want.data(), want.size() * 2);
  lse.download(want_lse.data(), want_lse.size() * 4);

  Mismatches m;
  for (std::size_t b = 0; b < p.len_q.size(); ++b) {
    const std::int64_t lq = p.len_q[b], q0 = p.cuq(b);
    if (lq == 0) continue;
    bool bad = false;
    if (p.len_k[b] == 0) {  // no key: O = 0, LSE = -inf on every row
      for (std::int64_t i = q0; i < q0 + lq; ++i) {
        bool row_ok = true;
        for (std::size_t e = 0; e < row; ++e)
          row_ok = row_ok && decode(p.dt, got[static_cast<std::size_t>(i) * row + e]) == 0.f;
        for (std::int64_t h = 0; h < p.hq; ++h)
          row_ok = row_ok && got_lse[static_cast<std::size_t>(h * p.total_q + i)] == kNegInf;
        m.empty_rows += !row_ok;
        bad = bad || !row_ok;
      }
    } else {
      for (std::int64_t i = q0; i < q0 + lq; ++i) {
        const bool same = std::memcmp(got.data() + static_cast<std::size_t>(i) * row,
                                      want.data() + static_cast<std::size_t>(i) * row, row * 2) == 0;
        m.out_rows += !same;
        bad = bad || !same;
        for (std::int64_t h = 0; h < p.hq; ++h) {  // varlen [Hq][total_q] vs dense [Hq][len_q] at Hq·cu[b]
          const float g = got_lse[static_cast<std::size_t>(h * p.total_q + i)];
          const float w = want_lse[static_cast<std::size_t>(p.hq * q0 + h * lq + (i - q0))];
          const bool s = std::memcmp(&g, &w, 4) == 0;
          m.lse += !s;
          bad = bad || !s;
        }
      }
    }
    if (bad && m.sequences++ < 3)
      std::printf("  sequence %zu (len_q %lld, len_k %lld, starts at q %lld / k %lld) differs from its dense call\n", b,
                  (long long)lq, (long long)p.len_k[b], (long long)q0, (long long)p.cuk(b));
  }
  const std::int64_t end = p.lens.cu_seqlens_q.back();  // rows after cu[B]: untouched
  m.tail += !all_bytes(got.data() + static_cast<std::size_t>(end) * row,
                       static_cast<std::size_t>(p.total_q - end) * row * 2, kPoison);
  for (std::int64_t h = 0; h < p.hq; ++h)
    m.tail += !all_bytes(got_lse.data() + h * p.total_q + end, static_cast<std::size_t>(p.total_q - end) * 4, kPoison);
  return m;
}

void check_no_mismatch(const Mismatches& m) {
  CHECK(m.out_rows == 0);    // output rows that differ from the dense call's bits
  CHECK(m.lse == 0);         // LSE entries that differ from the dense call's bits
  CHECK(m.empty_rows == 0);  // len_k = 0 rows that are not O = 0, LSE = -inf
  CHECK(m.tail == 0);        // output / LSE rows after cu[B] that were written (per head for LSE)
}

// Output rows [0, cu[B]) of every head, in [Hq][row][d] order (the reference results' order).
std::vector<float> logical_rows(const Packed& p, const std::vector<std::uint16_t>& got) {
  std::vector<float> v;
  const std::int64_t end = p.lens.cu_seqlens_q.back();
  for (std::int64_t h = 0; h < p.hq; ++h)
    for (std::int64_t i = 0; i < end; ++i)
      for (std::int64_t c = 0; c < p.d; ++c)
        v.push_back(decode(p.dt, got[static_cast<std::size_t>((i * p.hq + h) * p.d + c)]));
  return v;
}

// The lengths of the main case: fixed special sequences (length 0 and 1 for q and k, a key-less
// one, one with q > k), 13 random short ones (0..200, zero one time in ten) and one long one,
// placed after 66 query tokens so that it starts off every tile boundary.
void main_lengths(std::uint64_t seed, std::int32_t long_len, std::vector<std::int32_t>& q,
                  std::vector<std::int32_t>& k) {
  const std::int32_t special[][2] = {{0, 37}, {1, 1}, {5, 0}, {0, 0}, {1, 300}, {40, 3}, {19, 17}};
  q.clear();
  k.clear();
  for (const auto& s : special) {
    q.push_back(s[0]);
    k.push_back(s[1]);
  }
  std::mt19937_64 rng(seed);
  auto short_len = [&] { return rng() % 10 == 0 ? 0 : 1 + static_cast<std::int32_t>(rng() % 200); };
  for (int i = 0; i < 13; ++i) {
    q.push_back(short_len());
    k.push_back(short_len());
  }
  q.insert(q.begin() + 7, long_len);
  k.insert(k.begin() + 7, long_len + 211);
}

struct VarlenCase {
  DType dt;
  CausalMode causal;
  int d, bits;
};

std::vector<VarlenCase> main_cases() {
  std::vector<VarlenCase> v;
  const int dims[] = {64, 128, 80};
  for (DType dt : {DType::F16, DType::BF16})
    for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight})
      for (int d : dims) v.push_back({dt, cm, d, v.size() % 2 ? 4 : 8});  // every axis meets both bit widths
  if (test::reduced()) v.resize(6);
  return v;
}

}  // namespace

TEST_CASE(
    "gpu varlen: each packed sequence is bit for bit its dense call; LSE [Hq, total_q]; tail untouched; accuracy") {
  Context& ctx = varlen_context();
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  const std::int32_t long_len = test::reduced() ? 300 : 3000;
  const std::int64_t hq = 4, hkv = 1;  // GQA 4
  int n = 0;
  for (const VarlenCase& c : main_cases()) {
    const std::uint64_t s = seed + static_cast<std::uint64_t>(++n);
    std::vector<std::int32_t> lq, lk;
    main_lengths(s, long_len, lq, lk);
    char buf[160];
    std::snprintf(buf, sizeof buf, "int%d %s %s d=%d", c.bits, causal_mode_name(c.causal), dtype_name(c.dt), c.d);
    const std::string name = buf;
    const std::string lengths = lengths_str(lq, lk);
    CAPTURE(name);
    CAPTURE(lengths);
    CAPTURE(s);
    const auto p = make_packed(s, c.dt, hq, hkv, c.d, lq, lk);
    PackedOut out(*p);
    AttentionParams a = params(c.bits, c.causal);
    a.lse = static_cast<float*>(out.lse->get());
    ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), packed_lens(*p), a);
    test::synchronize();
    const std::vector<std::uint16_t> got = out.out_bits();
    const std::vector<float> got_lse = out.lse_values();

    AttentionParams dense = params(c.bits, c.causal);
    check_no_mismatch(compare_with_dense(ctx, *p, dense, got, got_lse));

    // Accuracy: vs the CPU emulation of the spec a dense call of the long sequence plans (same
    // tile: tuning is off), and vs fp64.
    const std::size_t L = 7;        // the long sequence
    const AttentionParams& pa = a;  // the varlen call's parameters (nothing is launched here)
    const TensorRef ql = tokens(p->dq(), 0, p->cuq(L), lq[L]), kl = tokens(p->dk(), 0, p->cuk(L), lk[L]);
    const plan::AttentionProblem prob =
        plan::validate_attention(ql, kl, tokens(p->dv(), 0, p->cuk(L), lk[L]),
                                    tokens(out.ref(), 0, p->cuq(L), lq[L]), pa, runtime::context_impl(ctx).arch());
    const kernels::KernelSpec spec = runtime::plan_attention(prob, runtime::context_impl(ctx));
    ref::EmulationOptions mo;
    mo.round_output = true;
    mo.accum_mantissa_bits = spec.family == kernels::KernelFamily::AttentionWgmma ? 13 : 23;  // as test_attention_api
    const ref::EmulationResult em = ref::emulate_attention_varlen(p->host.q.ref(), p->host.k.ref(), p->host.v.ref(),
                                                                  p->lens, ref::kernel_config(spec), mo);
    ref::AttentionOptions eo;
    eo.causal = c.causal;
    const ref::ExactResult ex =
        ref::exact_attention_varlen(p->host.q.ref(), p->host.k.ref(), p->host.v.ref(), p->lens, eo);
    const std::vector<float> g = logical_rows(*p, got);
    std::vector<double> want, emul;
    std::vector<float> emul_f;
    double lse_exact = 0, lse_algo = 0, lse_emul = 0;
    const std::int64_t end = p->lens.cu_seqlens_q.back();
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < end; ++i) {
        for (std::int64_t cc = 0; cc < c.d; ++cc) {
          want.push_back(ex.o[ex.index(0, h, i, cc)]);
          emul.push_back(em.o[em.index(0, h, i, cc)]);
          emul_f.push_back(em.o[em.index(0, h, i, cc)]);
        }
        const std::size_t at = static_cast<std::size_t>(h * p->total_q + i);
        const double e = ex.lse[at], m = em.lse[at], gl = got_lse[at];
        if (std::isinf(e) && e < 0) {  // no visible key: exactly -inf everywhere
          if (!(std::isinf(gl) && gl < 0)) lse_exact = INFINITY;
          continue;
        }
        lse_exact = std::max(lse_exact, std::fabs(gl - e));
        lse_algo = std::max(lse_algo, std::fabs(m - e));
        lse_emul = std::max(lse_emul, std::fabs(gl - m));
      }
    const ref::Metrics vs_exact = ref::compare(want, g), vs_emul = ref::compare(emul, g),
                       algo = ref::compare(want, emul_f);
    std::printf(
        "varlen %-32s exact: cos %.6f relL1 %.5f | emul: relL1 %.2e | algorithm: cos %.6f relL1 %.5f | "
        "lse err %.2e (algorithm %.2e, vs emul %.2e)\n",
        name.c_str(), vs_exact.cos_sim, vs_exact.rel_l1, vs_emul.rel_l1, algo.cos_sim, algo.rel_l1, lse_exact, lse_algo,
        lse_emul);
    CHECK(vs_exact.nonfinite == 0);
    CHECK(vs_emul.rel_l1 <= 5e-3);  // same algorithm: only exp2 / rounding-order differences
    CHECK(lse_emul <= 0.05);        // (no stage download here: a code at a rounding boundary may flip)
    if (c.bits == 8) {
      // Mostly short sequences: the sharp bounds of the dense suite (fewer than ~1000 keys).
      const test::Accuracy t = test::target(8, 1);
      CHECK(vs_exact.cos_sim >= t.cos_min);
      CHECK(vs_exact.rel_l1 <= t.rel_l1_max);
      CHECK(lse_exact <= std::max(t.lse_max, lse_algo + 0.05));  // (the CPU emulation: up to ~0.35 here)
    } else {
      // INT4 without smooth-Q (varlen has none): the dense suite's 4-bit targets assume smooth-Q.
      // On these outlier-channel inputs the algorithm itself (the CPU emulation) reaches cos ~0.995,
      // rel-L1 ~0.08 and LSE errors of several units; the GPU must be as accurate as it.
      CHECK(vs_exact.cos_sim >= algo.cos_sim - 1e-3);
      CHECK(vs_exact.rel_l1 <= algo.rel_l1 + 5e-3);
      CHECK(lse_exact <= lse_algo + 0.05);
    }
  }
}

TEST_CASE("gpu varlen: a max_seqlen bound below a sequence's length still gives its dense result") {
  Context& ctx = varlen_context();
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  const auto p = make_packed(seed, DType::F16, 4, 1, 128, {700, 3, 64, 0}, {650, 5, 64, 9});
  PackedOut out(*p);
  AttentionParams a = params(8, CausalMode::BottomRight);
  a.lse = static_cast<float*>(out.lse->get());
  ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), packed_lens(*p, 16, 16), a);
  test::synchronize();
  check_no_mismatch(compare_with_dense(ctx, *p, params(8, CausalMode::BottomRight), out.out_bits(), out.lse_values()));
}

TEST_CASE("gpu varlen: key padding (kv_lens) equals the dense call on the truncated keys") {
  Context& ctx = varlen_context();
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  const std::int64_t B = 5, hq = 4, hkv = 1;
  const std::int64_t nq = test::reduced() ? 100 : 300, nk = test::reduced() ? 150 : 500;
  const std::vector<std::int32_t> kv_lens = {static_cast<std::int32_t>(nk), 1, 0, static_cast<std::int32_t>(nk / 2 + 7),
                                             64};
  const struct {
    DType dt;
    int d, bits;
  } setups[] = {{DType::F16, 128, 8}, {DType::BF16, 64, 4}};
  int n = 0;
  for (const auto& su : setups)
    for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight}) {
      const std::uint64_t s = seed + static_cast<std::uint64_t>(++n);
      char buf[120];
      std::snprintf(buf, sizeof buf, "int%d %s %s d=%d", su.bits, causal_mode_name(cm), dtype_name(su.dt), su.d);
      const std::string name = buf;
      CAPTURE(name);
      CAPTURE(s);
      ref::AttentionInputs in = test::make_inputs(1, s, su.dt, B, hq, hkv, nq, nk, su.d, false);
      for (std::int64_t b = 0; b < B; ++b)  // the padding is never read
        for (std::int64_t j = kv_lens[static_cast<std::size_t>(b)]; j < nk; ++j)
          for (std::int64_t c = 0; c < su.d; ++c) {
            in.k.set(b, 0, j, c, kNaNf);
            in.v.set(b, 0, j, c, kNaNf);
          }
      const auto q = to_device(in.q), k = to_device(in.k), v = to_device(in.v);
      const auto kvl = to_device(kv_lens);
      const TensorRef dq = on_device(in.q, *q), dk = on_device(in.k, *k), dv = on_device(in.v, *v);
      const ref::HostTensor oshape(su.dt, B, hq, nq, su.d);
      test::DeviceBuffer o(bytes_of(oshape)), lse(static_cast<std::size_t>(B * hq * nq) * 4);
      o.poison(kPoison);
      lse.poison(kPoison);
      SeqLens l;
      l.batch = B;
      l.kv_lens = static_cast<const std::int32_t*>(kvl->get());
      AttentionParams a = params(su.bits, cm);
      a.lse = static_cast<float*>(lse.get());
      ctx.attention_varlen(dq, dk, dv, on_device(oshape, o), l, a);
      test::synchronize();
      std::vector<std::uint16_t> got(bytes_of(oshape) / 2);
      std::vector<float> got_lse(static_cast<std::size_t>(B * hq * nq));
      o.download(got.data(), got.size() * 2);
      lse.download(got_lse.data(), got_lse.size() * 4);

      // Dense, batch by batch, keys [0, kv_lens[b]) (the same strides: a view, no copy).
      test::DeviceBuffer wo(bytes_of(oshape)), wl(static_cast<std::size_t>(B * hq * nq) * 4);
      wo.poison(kDensePoison);
      wl.poison(kDensePoison);
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int32_t kl = kv_lens[static_cast<std::size_t>(b)];
        if (kl == 0) continue;
        AttentionParams da = params(su.bits, cm);
        da.lse = static_cast<float*>(wl.get()) + b * hq * nq;  // [B][Hq][Nq]: batch b's [Hq][Nq]
        ctx.attention(tokens(dq, b, 0, nq), tokens(dk, b, 0, kl), tokens(dv, b, 0, kl),
                      tokens(on_device(oshape, wo), b, 0, nq), da);
      }
      test::synchronize();
      std::vector<std::uint16_t> want(got.size());
      std::vector<float> want_lse(got_lse.size());
      wo.download(want.data(), want.size() * 2);
      wl.download(want_lse.data(), want_lse.size() * 4);
      const std::size_t per_batch = static_cast<std::size_t>(hq * nq * su.d);  // HND: a batch is contiguous
      for (std::int64_t b = 0; b < B; ++b) {
        CAPTURE(b);
        const std::size_t o0 = static_cast<std::size_t>(b) * per_batch, l0 = static_cast<std::size_t>(b * hq * nq);
        if (kv_lens[static_cast<std::size_t>(b)] == 0) {
          CHECK(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(o0),
                            got.begin() + static_cast<std::ptrdiff_t>(o0 + per_batch),
                            [&](std::uint16_t x) { return decode(su.dt, x) == 0.f; }));
          CHECK(std::all_of(got_lse.begin() + static_cast<std::ptrdiff_t>(l0),
                            got_lse.begin() + static_cast<std::ptrdiff_t>(l0 + hq * nq),
                            [](float x) { return x == kNegInf; }));
          continue;
        }
        CHECK(std::memcmp(got.data() + o0, want.data() + o0, per_batch * 2) == 0);
        CHECK(std::memcmp(got_lse.data() + l0, want_lse.data() + l0, static_cast<std::size_t>(hq * nq) * 4) == 0);
      }
      // and close to fp64 attention on the truncated keys
      ref::AttentionOptions eo;
      eo.causal = cm;
      const ref::ExactResult ex =
          ref::exact_attention_varlen(in.q.ref(), in.k.ref(), in.v.ref(), ref::HostSeqLens::key_padding(kv_lens), eo);
      std::vector<float> g(got.size());
      for (std::size_t i = 0; i < got.size(); ++i) g[i] = decode(su.dt, got[i]);  // HND: the result's order
      const ref::Metrics m = ref::compare(ex.o, g);
      std::printf("varlen key padding %-28s exact: cos %.6f relL1 %.5f\n", name.c_str(), m.cos_sim, m.rel_l1);
      CHECK(m.nonfinite == 0);
      // 8-bit: the dense suite's sharp bounds; INT4 without smooth-Q (varlen has none): a sanity bound
      // (the CPU emulation of such inputs: cos ~0.995, rel-L1 ~0.08).
      CHECK(m.cos_sim >= (su.bits == 8 ? test::target(8, 1).cos_min : 0.99));
      CHECK(m.rel_l1 <= (su.bits == 8 ? test::target(8, 1).rel_l1_max : 0.12));
    }
}

TEST_CASE("gpu varlen: invalid length arrays give NaN everywhere, no fault; the next valid call is right") {
  Context& ctx = varlen_context();
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  const auto p = make_packed(seed, DType::BF16, 4, 1, 128, {50, 0, 130}, {64, 20, 100}, 6, 4);
  const std::int32_t tq = static_cast<std::int32_t>(p->total_q), tk = static_cast<std::int32_t>(p->total_k);
  const std::vector<std::int32_t> good_q = p->lens.cu_seqlens_q,
                                  good_k = p->lens.cu_seqlens_k;  // {0,50,50,180} {0,64,84,184}
  const struct {
    const char* what;
    std::vector<std::int32_t> q, k;
  } bad[] = {
      {"cu_seqlens_q decreasing", {0, 50, 40, 180}, good_k},
      {"cu_seqlens_q negative entry", {0, -5, 50, 180}, good_k},
      {"cu_seqlens_q[0] != 0", {2, 52, 52, 182}, good_k},
      {"cu_seqlens_q[B] > total_q", {0, 50, 50, tq + 1}, good_k},
      {"cu_seqlens_q[B] = INT32_MAX", {0, 50, 50, INT32_MAX}, good_k},
      {"cu_seqlens_k decreasing", good_q, {0, 64, 60, 184}},
      {"cu_seqlens_k[0] != 0", good_q, {1, 64, 84, 184}},
      {"cu_seqlens_k[B] > total_k", good_q, {0, 64, 84, tk + 100}},
  };
  PackedOut out(*p);
  AttentionParams a = params(8, CausalMode::TopLeft);
  a.lse = static_cast<float*>(out.lse->get());
  for (const auto& x : bad) {
    const std::string what = x.what;
    CAPTURE(what);
    overwrite(*p->cu_q, x.q);
    overwrite(*p->cu_k, x.k);
    out.poison();
    ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), packed_lens(*p, p->total_q, p->total_k), a);
    test::synchronize();  // throws on a device fault
    const std::vector<std::uint16_t> got = out.out_bits();
    const std::vector<float> got_lse = out.lse_values();
    CHECK(std::all_of(got.begin(), got.end(), [&](std::uint16_t b) { return std::isnan(decode(p->dt, b)); }));
    CHECK(std::all_of(got_lse.begin(), got_lse.end(), [](float v) { return std::isnan(v); }));
  }
  // The same Context and arrays, valid lengths again: the dense result.
  overwrite(*p->cu_q, good_q);
  overwrite(*p->cu_k, good_k);
  out.poison();
  ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), packed_lens(*p), a);
  test::synchronize();
  check_no_mismatch(compare_with_dense(ctx, *p, params(8, CausalMode::TopLeft), out.out_bits(), out.lse_values()));

  // Key padding: kv_lens[b] outside [0, Nk].
  const std::int64_t B = 3, nq = 40, nk = 90;
  ref::AttentionInputs in = test::make_inputs(1, seed + 1, DType::F16, B, 4, 1, nq, nk, 64, false);
  const auto q = to_device(in.q), k = to_device(in.k), v = to_device(in.v);
  const ref::HostTensor oshape(DType::F16, B, 4, nq, 64);
  test::DeviceBuffer o(bytes_of(oshape)), lse(static_cast<std::size_t>(B * 4 * nq) * 4);
  auto kvl = to_device(std::vector<std::int32_t>{90, 12, 0});
  SeqLens l;
  l.batch = B;
  l.kv_lens = static_cast<const std::int32_t*>(kvl->get());
  AttentionParams ka = params(8, CausalMode::None);
  ka.lse = static_cast<float*>(lse.get());
  for (const std::vector<std::int32_t>& kv :
       {std::vector<std::int32_t>{90, 91, 3}, std::vector<std::int32_t>{-1, 12, 3}}) {
    CAPTURE(kv[0]);
    CAPTURE(kv[1]);
    overwrite(*kvl, kv);
    o.poison(kPoison);
    lse.poison(kPoison);
    ctx.attention_varlen(on_device(in.q, *q), on_device(in.k, *k), on_device(in.v, *v), on_device(oshape, o), l, ka);
    test::synchronize();
    std::vector<std::uint16_t> got(bytes_of(oshape) / 2);
    std::vector<float> got_lse(static_cast<std::size_t>(B * 4 * nq));
    o.download(got.data(), got.size() * 2);
    lse.download(got_lse.data(), got_lse.size() * 4);
    CHECK(std::all_of(got.begin(), got.end(), [](std::uint16_t b) { return std::isnan(ref::half_to_float(b)); }));
    CHECK(std::all_of(got_lse.begin(), got_lse.end(), [](float x) { return std::isnan(x); }));
  }
  // Valid again: batch 1 (12 keys) is the dense call on its first 12 keys, batch 2 (no key) is 0.
  overwrite(*kvl, {90, 12, 0});
  o.poison(kPoison);
  lse.poison(kPoison);
  ctx.attention_varlen(on_device(in.q, *q), on_device(in.k, *k), on_device(in.v, *v), on_device(oshape, o), l, ka);
  test::DeviceBuffer wo(bytes_of(oshape)), wl(static_cast<std::size_t>(4 * nq) * 4);
  const TensorRef dk = on_device(in.k, *k), dv = on_device(in.v, *v);
  AttentionParams da = params(8, CausalMode::None);
  da.lse = static_cast<float*>(wl.get());  // with an LSE like the varlen call: the same kernel
  ctx.attention(tokens(on_device(in.q, *q), 1, 0, nq), tokens(dk, 1, 0, 12), tokens(dv, 1, 0, 12),
                tokens(on_device(oshape, wo), 1, 0, nq), da);
  test::synchronize();
  const std::size_t per_batch = static_cast<std::size_t>(4 * nq * 64);
  std::vector<std::uint16_t> got(per_batch), want(per_batch);
  o.download(got.data(), per_batch * 2, per_batch * 2);
  wo.download(want.data(), per_batch * 2, per_batch * 2);
  CHECK(std::memcmp(got.data(), want.data(), per_batch * 2) == 0);
  std::vector<float> got_lse(static_cast<std::size_t>(4 * nq)), want_lse(got_lse.size());
  lse.download(got_lse.data(), got_lse.size() * 4, got_lse.size() * 4);
  wl.download(want_lse.data(), want_lse.size() * 4);
  CHECK(std::memcmp(got_lse.data(), want_lse.data(), got_lse.size() * 4) == 0);
  o.download(got.data(), per_batch * 2, 2 * per_batch * 2);
  CHECK(std::all_of(got.begin(), got.end(), [](std::uint16_t b) { return ref::half_to_float(b) == 0.f; }));
}

TEST_CASE("gpu varlen: a CUDA graph replays with new lengths written into the same device arrays") {
  Context& ctx = varlen_context();
  const auto& api = base::driver::api();
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  // Two sets of 6 lengths with the same totals (700 query and 700 key tokens).
  const std::vector<std::int32_t> a_q = {100, 0, 37, 500, 1, 62}, a_k = {120, 5, 37, 400, 1, 137};
  const std::vector<std::int32_t> b_q = {1, 300, 0, 250, 149, 0}, b_k = {50, 300, 17, 3, 330, 0};
  auto p = make_packed(seed, DType::F16, 8, 2, 128, a_q, a_k, 4, 4);
  const ref::HostSeqLens lens_a = p->lens, lens_b = ref::HostSeqLens::packed_from_lengths(b_q, b_k);
  REQUIRE(lens_b.cu_seqlens_q.back() == lens_a.cu_seqlens_q.back());
  REQUIRE(lens_b.cu_seqlens_k.back() == lens_a.cu_seqlens_k.back());
  PackedOut out(*p);
  AttentionParams a = params(8, CausalMode::BottomRight);
  a.lse = static_cast<float*>(out.lse->get());
  const SeqLens sl = packed_lens(*p, 0, 0);  // bounds: the tensors' token counts (valid for both sets)

  CUstream stream;
  base::driver::check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // Warm-up outside capture: compiles kernels and sizes this stream's workspace.
  ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), sl, a, stream);
  base::driver::check(api.cuStreamSynchronize(stream), "sync");
  const std::size_t held = runtime::context_impl(ctx).workspace().bytes_held();
  base::driver::check(api.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
  ctx.attention_varlen(p->dq(), p->dk(), p->dv(), out.ref(), sl, a, stream);
  CUgraph graph;
  base::driver::check(api.cuStreamEndCapture(stream, &graph), "end capture");
  CUgraphExec exec;
  base::driver::check(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
  CHECK(runtime::context_impl(ctx).workspace().bytes_held() == held);  // no allocation while capturing

  // Replays: B's lengths, then A's again — each gives the dense result of the lengths it read.
  const ref::HostSeqLens* rounds[] = {&lens_b, &lens_a, &lens_b};
  for (const ref::HostSeqLens* l : rounds) {
    const bool is_b = l == &lens_b;
    CAPTURE(is_b);
    p->lens = *l;
    p->len_q = is_b ? b_q : a_q;
    p->len_k = is_b ? b_k : a_k;
    overwrite(*p->cu_q, l->cu_seqlens_q);
    overwrite(*p->cu_k, l->cu_seqlens_k);
    out.poison();
    base::driver::check(api.cuGraphLaunch(exec, stream), "graph launch");
    base::driver::check(api.cuStreamSynchronize(stream), "sync");
    check_no_mismatch(
        compare_with_dense(ctx, *p, params(8, CausalMode::BottomRight), out.out_bits(), out.lse_values()));
  }
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy_v2(stream);
}
