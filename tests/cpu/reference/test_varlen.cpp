// Specification: the CPU reference of variable-length batches (reference::exact_attention_varlen,
// reference::emulate_attention_varlen; the host twin of Context::attention_varlen).
//  - Packed form: the output rows and LSE of sequence b are, bit for bit, those of the dense call
//    of that sequence alone (exact and emulation; several kernel configs, 4/8-bit, GQA, the three
//    causal modes), for lengths 0 and 1 among others; tokens outside every sequence are never read
//    and the rows after cu_q[B] hold NaN (no defined value).
//  - Per-sequence quantization: the emulation of two sequences is NOT the emulation of their
//    concatenation restricted to the same keys — the K mean and the V scales are per sequence —
//    while exact attention, which has no shared statistics, is the same either way.
//  - Causal masks align per sequence (TopLeft j <= i, BottomRight j <= i + len_k - len_q), seen
//    directly in the LSE of uniform scores; len_k = 0 gives O = 0 and LSE = -inf.
//  - Key-padding form: batch b equals the dense call with k, v truncated to kv_lens[b].
//  - Lengths that break SeqLens's rules are rejected with the array named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool throws_invalid(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    const bool ok = e.code() == ErrorCode::InvalidArgument && std::string(e.what()).find(needle) != std::string::npos;
    if (!ok) MESSAGE("message: " << e.what());
    return ok;
  }
  return false;
}

KernelConfig config(AttentionFamily fam, const char* arch, int bits, int d, KernelTile tile, bool smooth_q,
                    bool smooth_v, CausalMode causal) {
  KernelConfig c;
  c.family = fam;
  c.arch = arch;
  c.qk_bits = bits;
  c.head_dim = d;
  c.tile = tile;
  c.smooth_q = smooth_q;
  c.smooth_k = true;
  c.smooth_v = smooth_v;
  c.causal = causal;
  c.return_lse = true;
  return c;
}

// A packed batch built from independent dense sequences: sequence b is its own dense problem
// (HND, batch 1, seeded per sequence, so every sequence has its own channel biases), copied into
// the packed NHD tensors at cu[b]. Tokens after the last sequence (spare rows) hold NaN: a read of
// one would poison outputs.
struct PackedBatch {
  std::vector<std::int32_t> len_q, len_k;
  std::vector<AttentionInputs> dense;  // one per sequence (sizes max(len, 1): a tensor has >= 1 token)
  HostTensor q, k, v;                  // [1, H, total, d] NHD
  HostSeqLens lens;
  std::int64_t total_q = 0, total_k = 0;
};

PackedBatch make_packed(std::uint64_t seed, DType dt, std::int64_t hq, std::int64_t hkv, std::int64_t d,
                        const std::vector<std::int32_t>& len_q, const std::vector<std::int32_t>& len_k,
                        std::int64_t spare_q = 3, std::int64_t spare_k = 2) {
  PackedBatch p;
  p.len_q = len_q;
  p.len_k = len_k;
  p.lens = HostSeqLens::packed_from_lengths(len_q, len_k);
  p.total_q = p.lens.cu_seqlens_q.back() + spare_q;
  p.total_k = p.lens.cu_seqlens_k.back() + spare_k;
  p.q = HostTensor(dt, 1, hq, p.total_q, d, true);
  p.k = HostTensor(dt, 1, hkv, p.total_k, d, true);
  p.v = HostTensor(dt, 1, hkv, p.total_k, d, true);
  for (std::size_t b = 0; b < len_q.size(); ++b) {
    p.dense.push_back(
        make_activation_like(seed + 101 * b, dt, 1, hq, hkv, std::max(len_q[b], 1), std::max(len_k[b], 1), d));
    const AttentionInputs& in = p.dense.back();
    const std::int64_t q0 = p.lens.cu_seqlens_q[b], k0 = p.lens.cu_seqlens_k[b];
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < len_q[b]; ++i)
        for (std::int64_t c = 0; c < d; ++c) p.q.set(0, h, q0 + i, c, in.q.get(0, h, i, c));
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < len_k[b]; ++j)
        for (std::int64_t c = 0; c < d; ++c) {
          p.k.set(0, h, k0 + j, c, in.k.get(0, h, j, c));
          p.v.set(0, h, k0 + j, c, in.v.get(0, h, j, c));
        }
  }
  for (std::int64_t h = 0; h < hq; ++h)
    for (std::int64_t i = p.lens.cu_seqlens_q.back(); i < p.total_q; ++i)
      for (std::int64_t c = 0; c < d; ++c) p.q.set(0, h, i, c, kNaNf);
  for (std::int64_t h = 0; h < hkv; ++h)
    for (std::int64_t j = p.lens.cu_seqlens_k.back(); j < p.total_k; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        p.k.set(0, h, j, c, kNaNf);
        p.v.set(0, h, j, c, kNaNf);
      }
  return p;
}

// Mismatches between the packed result's rows of every sequence and the dense results (`dense`
// called per sequence with both lengths > 0); sequences with len_k = 0 must have O = 0 and LSE =
// -inf; rows after cu_q[B] must be NaN (O and LSE).
template <class Result, class Dense>
int count_mismatches(const PackedBatch& p, const Result& r, Dense&& dense) {
  int bad = 0;
  const auto& cu = p.lens.cu_seqlens_q;
  REQUIRE(r.batch == 1);
  REQUIRE(r.q_len == p.total_q);
  for (std::size_t b = 0; b < p.len_q.size(); ++b) {
    if (p.len_q[b] == 0) continue;
    if (p.len_k[b] == 0) {
      for (std::int64_t h = 0; h < r.heads; ++h)
        for (std::int64_t i = cu[b]; i < cu[b + 1]; ++i) {
          bad += r.lse[static_cast<std::size_t>(h * r.q_len + i)] != -std::numeric_limits<double>::infinity();
          for (std::int64_t c = 0; c < r.dim; ++c) bad += r.o[r.index(0, h, i, c)] != 0;
        }
      continue;
    }
    const AttentionInputs& in = p.dense[b];
    const Result d = dense(in.q.ref(), in.k.ref(), in.v.ref());
    REQUIRE(d.q_len == p.len_q[b]);
    for (std::int64_t h = 0; h < r.heads; ++h)
      for (std::int64_t i = 0; i < p.len_q[b]; ++i) {
        bad += !same_bits(r.lse[static_cast<std::size_t>(h * r.q_len + cu[b] + i)],
                          d.lse[static_cast<std::size_t>(h * d.q_len + i)]);
        for (std::int64_t c = 0; c < r.dim; ++c)
          bad += !same_bits(r.o[r.index(0, h, cu[b] + i, c)], d.o[d.index(0, h, i, c)]);
      }
  }
  for (std::int64_t h = 0; h < r.heads; ++h)
    for (std::int64_t i = cu.back(); i < p.total_q; ++i) {
      bad += !std::isnan(r.lse[static_cast<std::size_t>(h * r.q_len + i)]);
      for (std::int64_t c = 0; c < r.dim; ++c) bad += !std::isnan(r.o[r.index(0, h, i, c)]);
    }
  return bad;
}

}  // namespace

TEST_CASE("varlen reference: each packed sequence is bit for bit the dense call of it alone") {
  // Lengths 0 and 1 for queries and keys, a key-less sequence (q 5, k 0), q > k (BottomRight rows
  // with no key), sequences starting at offsets that are no multiple of any tile, one longer one.
  const std::vector<std::int32_t> lq = {37, 0, 1, 5, 150, 1, 40, 0, 64};
  const std::vector<std::int32_t> lk = {50, 7, 1, 0, 131, 90, 3, 0, 64};
  struct Setup {
    const char* name;
    AttentionFamily fam;
    const char* arch;
    int bits, d;
    KernelTile tile;
    bool smooth_q, smooth_v;
    std::int64_t hq, hkv;
    DType dt;
  };
  const Setup setups[] = {
      {"mma int4 sm_89 d64 GQA4 f16",
       AttentionFamily::Mma,
       "sm_89",
       4,
       64,
       {64, 64, 4, 2},
       false,
       false,
       4,
       1,
       DType::F16},
      {"mma int4 smooth-q d64 GQA2 bf16",
       AttentionFamily::Mma,
       "sm_89",
       4,
       64,
       {64, 32, 4, 1},
       true,
       false,
       4,
       2,
       DType::BF16},
      {"wgmma int8 d80 GQA4 bf16",
       AttentionFamily::Wgmma,
       "sm_90a",
       8,
       80,
       {64, 64, 4, 2},
       false,
       false,
       4,
       1,
       DType::BF16},
      {"mma int8 sm_90a d64 smooth-v MHA f16",
       AttentionFamily::Mma,
       "sm_90a",
       8,
       64,
       {128, 64, 8, 2},
       false,
       true,
       2,
       2,
       DType::F16},
  };
  for (const Setup& s : setups) {
    const std::string name = s.name;
    CAPTURE(name);
    const PackedBatch p = make_packed(17, s.dt, s.hq, s.hkv, s.d, lq, lk);
    for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight}) {
      const std::string mode = causal_mode_name(cm);
      CAPTURE(mode);
      const KernelConfig cfg = config(s.fam, s.arch, s.bits, s.d, s.tile, s.smooth_q, s.smooth_v, cm);
      EmulationOptions eo;
      eo.round_output = true;
      eo.threads = 2;
      const EmulationResult em = emulate_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), p.lens, cfg, eo);
      CHECK(em.heads == s.hq);
      CHECK(em.dim == s.d);
      CHECK(count_mismatches(p, em, [&](const TensorRef& q, const TensorRef& k, const TensorRef& v) {
              return emulate_attention(q, k, v, cfg, eo);
            }) == 0);
      AttentionOptions ao;
      ao.causal = cm;
      ao.threads = 2;
      const ExactResult ex = exact_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), p.lens, ao);
      CHECK(count_mismatches(p, ex, [&](const TensorRef& q, const TensorRef& k, const TensorRef& v) {
              return exact_attention(q, k, v, ao);
            }) == 0);
      // and the emulation is the algorithm it claims to be: close to fp64 on the sequences' rows
      std::vector<double> want;
      std::vector<float> got;
      for (std::int64_t h = 0; h < s.hq; ++h)
        for (std::int64_t i = 0; i < p.lens.cu_seqlens_q.back(); ++i)
          for (std::int64_t c = 0; c < s.d; ++c) {
            want.push_back(ex.o[ex.index(0, h, i, c)]);
            got.push_back(em.o[em.index(0, h, i, c)]);
          }
      const Metrics m = compare(want, got);
      CHECK(m.nonfinite == 0);
      CHECK(m.cos_sim > (s.bits == 8 ? 0.999 : 0.99));
    }
  }
}

TEST_CASE("varlen reference: quantization statistics are per sequence, not shared by the batch") {
  // Two sequences with their own channel biases. Concatenated into ONE sequence [s1; s0] with a
  // top-left causal mask, the first len(s1) query rows see exactly the keys of s1 — the same
  // attention problem as s1 alone, but with the K mean, V scales and Q blocks of the whole
  // concatenation. Exact attention (no statistics) cannot tell the two apart; the emulation must.
  const std::int64_t n1 = 96, n0 = 160, d = 64;
  const PackedBatch two =
      make_packed(5, DType::F16, 2, 1, d, {static_cast<std::int32_t>(n1), static_cast<std::int32_t>(n0)},
                  {static_cast<std::int32_t>(n1), static_cast<std::int32_t>(n0)}, 0, 0);
  const HostSeqLens one{{0, static_cast<std::int32_t>(n1 + n0)}, {0, static_cast<std::int32_t>(n1 + n0)}, {}};
  for (AttentionFamily fam : {AttentionFamily::Mma, AttentionFamily::Wgmma}) {
    const std::string family = attention_family_name(fam);
    CAPTURE(family);
    const KernelConfig cfg = config(fam, "sm_90a", 8, d, {64, 64, 4, 2}, false, false, CausalMode::TopLeft);
    const EmulationResult sep = emulate_attention_varlen(two.q.ref(), two.k.ref(), two.v.ref(), two.lens, cfg);
    const EmulationResult cat = emulate_attention_varlen(two.q.ref(), two.k.ref(), two.v.ref(), one, cfg);
    AttentionOptions ao;
    ao.causal = CausalMode::TopLeft;
    const ExactResult sep_x = exact_attention_varlen(two.q.ref(), two.k.ref(), two.v.ref(), two.lens, ao);
    const ExactResult cat_x = exact_attention_varlen(two.q.ref(), two.k.ref(), two.v.ref(), one, ao);
    std::int64_t exact_diff = 0, emul_diff = 0, count = 0;
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < n1; ++i)
        for (std::int64_t c = 0; c < d; ++c) {
          ++count;
          exact_diff += !same_bits(sep_x.o[sep_x.index(0, h, i, c)], cat_x.o[cat_x.index(0, h, i, c)]);
          emul_diff += !same_bits(sep.o[sep.index(0, h, i, c)], cat.o[cat.index(0, h, i, c)]);
        }
    MESSAGE("outputs of s1 that change when its statistics are shared with s0: " << emul_diff << " of " << count);
    CHECK(exact_diff == 0);        // the same attention problem ...
    CHECK(emul_diff > count / 2);  // ... quantized with other statistics: most outputs move
  }
  // The cause, in the stage's buffers: s1's K mean over its own keys differs from the mean over
  // the concatenation (the sequences have different channel biases).
  const KernelConfig cfg = config(AttentionFamily::Mma, "sm_90a", 8, d, {64, 64, 4, 2}, false, false, CausalMode::None);
  const AttentionInputs& s1 = two.dense[0];
  const QuantizedHost alone = quantize_stage(s1.q.ref(), s1.k.ref(), s1.v.ref(), cfg);
  const QuantizedHost whole = quantize_stage(two.q.ref(), two.k.ref(), two.v.ref(), cfg);
  int mean_diff = 0, vscale_diff = 0;
  for (int c = 0; c < d; ++c) {
    mean_diff += alone.k_mean[static_cast<std::size_t>(c)] != whole.k_mean[static_cast<std::size_t>(c)];
    vscale_diff += alone.v_scale[static_cast<std::size_t>(c)] != whole.v_scale[static_cast<std::size_t>(c)];
  }
  CHECK(mean_diff > d / 2);
  CHECK(vscale_diff > 0);
}

TEST_CASE("varlen reference: causal masks align per sequence; no keys → O = 0, LSE = -inf") {
  // q = 0: every visible key scores 0, so LSE_i = log(#visible keys of row i) — the mask of each
  // sequence is read off the LSE (exact), and O_i is the mean of the visible V rows.
  const std::vector<std::int32_t> lq = {3, 6, 1, 4, 0, 2};
  const std::vector<std::int32_t> lk = {7, 2, 1, 0, 5, 9};
  const HostSeqLens lens = HostSeqLens::packed_from_lengths(lq, lk);
  const std::int64_t tq = lens.cu_seqlens_q.back(), tk = lens.cu_seqlens_k.back(), d = 4;
  HostTensor q(DType::F32, 1, 1, tq, d, true), k(DType::F32, 1, 1, tk, d, true), v(DType::F32, 1, 1, tk, d, true);
  for (std::int64_t j = 0; j < tk; ++j)
    for (int c = 0; c < d; ++c) {
      k.set(0, 0, j, c, static_cast<float>(j % 5 + c));
      v.set(0, 0, j, c, static_cast<float>(10 * j + c));  // global key index j: a read of another sequence's key shows
    }
  for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight}) {
    const std::string mode = causal_mode_name(cm);
    CAPTURE(mode);
    AttentionOptions ao;
    ao.causal = cm;
    const ExactResult r = exact_attention_varlen(q.ref(), k.ref(), v.ref(), lens, ao);
    for (std::size_t b = 0; b < lq.size(); ++b)
      for (std::int64_t i = 0; i < lq[b]; ++i) {
        CAPTURE(b);
        CAPTURE(i);
        std::int64_t n_vis = lk[b];  // visible keys are a prefix [0, n_vis) of the sequence's keys
        if (cm == CausalMode::TopLeft) n_vis = std::min<std::int64_t>(lk[b], i + 1);
        if (cm == CausalMode::BottomRight) n_vis = std::clamp<std::int64_t>(i + lk[b] - lq[b] + 1, 0, lk[b]);
        const std::int64_t row = lens.cu_seqlens_q[b] + i;
        const double lse = r.lse[static_cast<std::size_t>(row)];
        if (n_vis == 0) {
          CHECK(lse == -std::numeric_limits<double>::infinity());
          for (int c = 0; c < d; ++c) CHECK(r.o[r.index(0, 0, row, c)] == 0.0);
          continue;
        }
        CHECK(lse == doctest::Approx(std::log(static_cast<double>(n_vis))).epsilon(1e-12));
        // mean of v over global keys [cu_k[b], cu_k[b] + n_vis): 10·(cu_k[b] + (n_vis - 1)/2) + c
        for (int c = 0; c < d; ++c)
          CHECK(r.o[r.index(0, 0, row, c)] ==
                doctest::Approx(10.0 * (lens.cu_seqlens_k[b] + (n_vis - 1) / 2.0) + c).epsilon(1e-12));
      }
  }
  // The emulation applies the same rules: rows without keys (len_k = 0, or BottomRight with
  // len_q > len_k) get exactly O = 0 and LSE = -inf.
  const PackedBatch p = make_packed(3, DType::F16, 2, 1, 32, {4, 1, 6}, {0, 1, 2});
  const KernelConfig cfg =
      config(AttentionFamily::Mma, "sm_90a", 8, 32, {64, 64, 4, 2}, false, false, CausalMode::BottomRight);
  const EmulationResult em = emulate_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), p.lens, cfg);
  auto empty_row = [&](std::int64_t h, std::int64_t row) {
    bool zero = true;
    for (int c = 0; c < 32; ++c) zero = zero && em.o[em.index(0, h, row, c)] == 0.f;
    return zero && em.lse[static_cast<std::size_t>(h * em.q_len + row)] == -std::numeric_limits<float>::infinity();
  };
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t row = 0; row < 4; ++row) CHECK(empty_row(h, row));         // sequence 0: no keys
    CHECK_FALSE(empty_row(h, 4));                                                // sequence 1: one key
    for (std::int64_t i = 0; i < 6; ++i) CHECK(empty_row(h, 5 + i) == (i < 4));  // BottomRight: j <= i - 4
  }
  // length 1 / 1: the single key's V row, exactly (softmax of one score is 1)
  const ExactResult ex = exact_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), p.lens);
  for (std::int64_t h = 0; h < 2; ++h)
    for (int c = 0; c < 32; ++c) CHECK(ex.o[ex.index(0, h, 4, c)] == static_cast<double>(p.v.get(0, 0, 0, c)));
}

TEST_CASE("varlen reference: key padding equals the dense call on the truncated keys") {
  const std::int64_t B = 4, hq = 4, hkv = 2, nq = 70, nk = 130, d = 64;
  const AttentionInputs in = make_activation_like(29, DType::BF16, B, hq, hkv, nq, nk, d);
  const std::vector<std::int32_t> kv_lens = {130, 1, 0, 77};
  const HostSeqLens lens = HostSeqLens::key_padding(kv_lens);
  // Dense problems of batch b alone, copied into tensors of their own (kv_lens[b] keys).
  auto truncated = [&](std::int64_t b) {
    AttentionInputs t{HostTensor(DType::BF16, 1, hq, nq, d), HostTensor(DType::BF16, 1, hkv, kv_lens[b], d),
                      HostTensor(DType::BF16, 1, hkv, kv_lens[b], d)};
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < nq; ++i)
        for (std::int64_t c = 0; c < d; ++c) t.q.set(0, h, i, c, in.q.get(b, h, i, c));
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < kv_lens[b]; ++j)
        for (std::int64_t c = 0; c < d; ++c) {
          t.k.set(0, h, j, c, in.k.get(b, h, j, c));
          t.v.set(0, h, j, c, in.v.get(b, h, j, c));
        }
    return t;
  };
  for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight}) {
    const std::string mode = causal_mode_name(cm);
    CAPTURE(mode);
    const KernelConfig cfg = config(AttentionFamily::Wgmma, "sm_90a", 8, d, {64, 128, 4, 2}, false, false, cm);
    AttentionOptions ao;
    ao.causal = cm;
    const EmulationResult em = emulate_attention_varlen(in.q.ref(), in.k.ref(), in.v.ref(), lens, cfg);
    const ExactResult ex = exact_attention_varlen(in.q.ref(), in.k.ref(), in.v.ref(), lens, ao);
    REQUIRE(em.batch == B);
    REQUIRE(ex.batch == B);
    REQUIRE(em.q_len == nq);
    int bad = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      CAPTURE(b);
      if (kv_lens[b] == 0) {
        for (std::int64_t h = 0; h < hq; ++h)
          for (std::int64_t i = 0; i < nq; ++i) {
            bad += em.lse[static_cast<std::size_t>((b * hq + h) * nq + i)] != -std::numeric_limits<float>::infinity();
            bad += ex.lse[static_cast<std::size_t>((b * hq + h) * nq + i)] != -std::numeric_limits<double>::infinity();
            for (std::int64_t c = 0; c < d; ++c)
              bad += em.o[em.index(b, h, i, c)] != 0.f || ex.o[ex.index(b, h, i, c)] != 0.0;
          }
        continue;
      }
      const AttentionInputs t = truncated(b);
      const EmulationResult dm = emulate_attention(t.q.ref(), t.k.ref(), t.v.ref(), cfg);
      const ExactResult dx = exact_attention(t.q.ref(), t.k.ref(), t.v.ref(), ao);
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t i = 0; i < nq; ++i) {
          bad += !same_bits(em.lse[static_cast<std::size_t>((b * hq + h) * nq + i)],
                            dm.lse[static_cast<std::size_t>(h * nq + i)]);
          bad += !same_bits(ex.lse[static_cast<std::size_t>((b * hq + h) * nq + i)],
                            dx.lse[static_cast<std::size_t>(h * nq + i)]);
          for (std::int64_t c = 0; c < d; ++c) {
            bad += !same_bits(em.o[em.index(b, h, i, c)], dm.o[dm.index(0, h, i, c)]);
            bad += !same_bits(ex.o[ex.index(b, h, i, c)], dx.o[dx.index(0, h, i, c)]);
          }
        }
    }
    CHECK(bad == 0);
    // Padding is not masking alone: the dense emulation over all 130 keys with the padded keys
    // merely masked would use their statistics too. Batch 3 (77 of 130 keys) differs from the
    // emulation of the full-length batch-3 problem even in the rows (TopLeft, i < 77) that see
    // the same keys.
    if (cm == CausalMode::TopLeft) {
      TensorRef q3 = in.q.ref(), k3 = in.k.ref(), v3 = in.v.ref();
      for (TensorRef* t : {&q3, &k3, &v3}) {
        t->data = static_cast<const std::uint16_t*>(t->data) + 3 * t->stride_batch;
        t->batch = 1;
      }
      const EmulationResult full = emulate_attention(q3, k3, v3, cfg);
      int moved = 0;
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t i = 0; i < nq; ++i)
          for (std::int64_t c = 0; c < d; ++c)
            moved += !same_bits(full.o[full.index(0, h, i, c)], em.o[em.index(3, h, i, c)]);
      CHECK(moved > 0);
    }
  }
}

TEST_CASE("varlen reference: lengths that break the rules are rejected, naming the array") {
  const PackedBatch p = make_packed(1, DType::F16, 2, 1, 32, {5, 3}, {4, 6});  // total_q 11, total_k 12
  const KernelConfig cfg =
      config(AttentionFamily::Mma, "sm_90a", 8, 32, {64, 64, 4, 2}, false, false, CausalMode::None);
  auto exact = [&](const HostSeqLens& l) {
    return [&, l] { exact_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), l); };
  };
  auto emul = [&](const HostSeqLens& l) {
    return [&, l] { emulate_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), l, cfg); };
  };
  const struct {
    HostSeqLens lens;
    const char* needle;
  } bad[] = {
      {{{1, 5, 8}, {0, 4, 10}, {}}, "cu_seqlens_q[0]=1"},
      {{{0, 5, 8}, {0, 6, 4}, {}}, "cu_seqlens_k[2]=4"},     // decreasing
      {{{0, 5, 12}, {0, 4, 10}, {}}, "cu_seqlens_q[B]=12"},  // beyond the 11 query tokens
      {{{0, 5, 8}, {0, 4, 13}, {}}, "cu_seqlens_k[B]=13"},
      {{{0, 5, 8}, {0, 4}, {}}, "entries"},  // sizes differ
      {{{0}, {0}, {}}, "B >= 1"},
      {{{0, 5, 8}, {0, 4, 10}, {4, 4}}, "both forms"},
      {{{}, {}, {}}, "neither"},
  };
  for (const auto& x : bad) {
    const std::string needle = x.needle;
    CAPTURE(needle);
    CHECK(throws_invalid(exact(x.lens), x.needle));
    CHECK(throws_invalid(emul(x.lens), x.needle));
  }
  // Key padding: kv_lens outside [0, Nk], or not one per batch.
  const AttentionInputs in = make_gaussian(2, DType::F16, 2, 2, 1, 8, 16, 32);
  auto kp = [&](std::vector<std::int32_t> kv) {
    return [&, kv] { exact_attention_varlen(in.q.ref(), in.k.ref(), in.v.ref(), HostSeqLens::key_padding(kv)); };
  };
  CHECK(throws_invalid(kp({16, 17}), "kv_lens[1]=17"));
  CHECK(throws_invalid(kp({-1, 3}), "kv_lens[0]=-1"));
  CHECK(throws_invalid(kp({3}), "kv_lens has 1 entries"));
  // The packed form takes batch-1 views.
  CHECK(throws_invalid(
      [&] { exact_attention_varlen(in.q.ref(), in.k.ref(), in.v.ref(), HostSeqLens::packed_from_lengths({4}, {4})); },
      "q.batch=2"));
  // One quantize stage cannot stand for several sequences.
  const QuantizedHost st = quantize_stage(p.q.ref(), p.k.ref(), p.v.ref(), cfg);
  EmulationOptions eo;
  eo.stage = &st;
  CHECK(throws_invalid([&] { emulate_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), p.lens, cfg, eo); },
                       "options.stage"));
  // The config is checked even when no sequence runs a dense call.
  KernelConfig wrong = cfg;
  wrong.head_dim = 64;
  const HostSeqLens empty = HostSeqLens::packed_from_lengths({0, 0}, {0, 0});
  CHECK(throws_invalid([&] { emulate_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), empty, wrong); },
                       "config.head_dim=64"));
  // Valid: every sequence empty → no rows written, all rows NaN (after cu_q[B] = 0).
  const ExactResult none = exact_attention_varlen(p.q.ref(), p.k.ref(), p.v.ref(), empty);
  CHECK(std::all_of(none.o.begin(), none.o.end(), [](double x) { return std::isnan(x); }));
  CHECK(HostSeqLens::packed_from_lengths({5, 3}, {4, 6}).cu_seqlens_q == std::vector<std::int32_t>{0, 5, 8});
  CHECK(p.lens.batch() == 2);
  CHECK(HostSeqLens::key_padding({1, 2, 3}).batch() == 3);
}
