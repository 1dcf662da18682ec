// Reference of the GPU quantize stage (kernels/quant_buffers.hpp): same buffers, same float ops.
// The groups come from kernels::quant_layout of the config's kernel spec — the one source of truth
// shared with the kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>

#include "kernels/quantize_shape.hpp"
#include "reference/internal.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace detail {

std::int64_t sanitize(std::vector<float>& x, std::vector<std::uint8_t>& bad) {
  bad.assign(x.size(), 0);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      x[i] = 0.f;
      bad[i] = 1;
      ++count;
    }
  }
  return count;
}

namespace {
void zero_nonfinite(std::vector<float>& x) {
  for (float& v : x)
    if (!std::isfinite(v)) v = 0.f;
}
}  // namespace

void smoothed_k(const TensorRef& k, const QuantizedHost& qs, std::int64_t b, std::int64_t h, std::vector<float>& out) {
  const int d = qs.layout.head_dim;
  load_head(k, b, h, out);
  zero_nonfinite(out);
  const float* mean = qs.k_mean.data() + (b * qs.layout.kv_heads + h) * qs.layout.d_qk;
  const std::int64_t n = qs.layout.kv_len;
  for (std::int64_t i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) out[static_cast<std::size_t>(i * d + c)] -= mean[c];
}

void smoothed_q(const TensorRef& q, const QuantizedHost& qs, std::int64_t b, std::int64_t h, std::vector<float>& out) {
  const auto& L = qs.layout;
  const int d = L.head_dim;
  load_head(q, b, h, out);
  zero_nonfinite(out);
  if (!L.config.smooth_q) return;
  for (std::int64_t i = 0; i < L.q_len; ++i) {
    const std::int64_t blk = i / L.config.tile.bq;
    const float* mean = qs.q_mean.data() + ((b * L.q_heads + h) * L.q_blocks + blk) * L.d_qk;
    for (int c = 0; c < d; ++c) out[static_cast<std::size_t>(i * d + c)] -= mean[c];
  }
}

float v_amax(const QuantizedHost& qs, std::int64_t b, std::int64_t h, int c) {
  const std::int64_t bh = b * qs.layout.kv_heads + h;
  if (qs.sample_statistics) return qs.v_amax[static_cast<std::size_t>(bh * qs.layout.d_v + c)];
  return v_amax_of_stats(qs, bh, c);
}

float v_amax_of_stats(const QuantizedHost& qs, std::int64_t bh, int c) {
  const auto& L = qs.layout;
  const float* st = qs.v_stats.data() + bh * 3 * L.d_v;
  const float mn = st[L.d_v + c], mx = st[2 * L.d_v + c];
  return v_amax_of(mn, mx, qs.v_mean[static_cast<std::size_t>(bh * L.d_v + c)], L.config.smooth_v);
}

float v_amax_of_keys(const std::vector<float>& x, int d, std::int64_t n0, std::int64_t n1, int c, float mu, bool smooth) {
  float mn = std::numeric_limits<float>::infinity(), mx = -std::numeric_limits<float>::infinity();
  for (std::int64_t n = n0; n < n1; ++n) {
    const float v = x[static_cast<std::size_t>(n * d + c)];
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  return v_amax_of(mn, mx, mu, smooth);
}

float v16_scale(float amax, int max_exp) {
  std::uint32_t bits;
  std::memcpy(&bits, &amax, sizeof bits);
  const int e = static_cast<int>((bits >> 23) & 0xffu) - 126;  // amax < 2^e
  const int k = std::max(0, e - max_exp);
  const std::uint32_t out = static_cast<std::uint32_t>(127 + k) << 23;
  float r;
  std::memcpy(&r, &out, sizeof r);
  return r;
}

}  // namespace detail

namespace {

// The stage's channel sums in the fixed fp32 order of kernels/quant_buffers.hpp: chunks of T
// tokens; inside a chunk P slot sums (slot s: tokens c0+s, c0+s+P, ... from 0.f), added left to
// right from slot 0's; chunk sums added left to right from chunk 0's. Bit-equal to the fused
// kernel (T, P from kernels/quantize_shape — the kernel's own numbers).
void stage_sums(const std::vector<float>& x, std::int64_t n, int d, int T, int P, float* sum) {
  const auto sz = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<float> part(sz(d)), chunk(sz(d));
  for (std::int64_t c0 = 0; c0 < n; c0 += T) {
    const std::int64_t c1 = std::min<std::int64_t>(n, c0 + T);
    for (int s = 0; s < P; ++s) {
      std::fill(part.begin(), part.end(), 0.f);
      for (std::int64_t i = c0 + s; i < c1; i += P)
        for (int c = 0; c < d; ++c) part[sz(c)] += x[sz(i * d + c)];
      for (int c = 0; c < d; ++c) chunk[sz(c)] = s == 0 ? part[sz(c)] : chunk[sz(c)] + part[sz(c)];
    }
    for (int c = 0; c < d; ++c) sum[c] = c0 == 0 ? chunk[sz(c)] : sum[c] + chunk[sz(c)];
  }
}

void pack_row(const std::int8_t* codes, int d_qk, int qk_bits, std::int8_t* out) {
  if (qk_bits == 8) {
    for (int c = 0; c < d_qk; ++c) out[c] = codes[c];
    return;
  }
  for (int j = 0; j < d_qk / 2; ++j) {
    const auto lo = static_cast<std::uint8_t>(codes[2 * j] & 0x0F);
    const auto hi = static_cast<std::uint8_t>(codes[2 * j + 1] & 0x0F);
    out[j] = static_cast<std::int8_t>(static_cast<std::uint8_t>(lo | (hi << 4)));
  }
}

}  // namespace

void unpack_codes(const std::int8_t* row, int qk_bits, int d_qk, int* out) {
  if (qk_bits == 8) {
    for (int c = 0; c < d_qk; ++c) out[c] = row[c];
    return;
  }
  for (int j = 0; j < d_qk / 2; ++j) {
    const auto byte = static_cast<std::uint8_t>(row[j]);
    int lo = byte & 0x0F, hi = byte >> 4;
    out[2 * j] = lo >= 8 ? lo - 16 : lo;       // two's complement nibble
    out[2 * j + 1] = hi >= 8 ? hi - 16 : hi;
  }
}

int QuantizedHost::q_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const {
  const auto& L = layout;
  const std::int8_t* row = q_codes.data() + ((b * L.q_heads + h) * L.q_len_pad + n) * L.row_bytes;
  if (L.config.qk_bits == 8) return row[c];
  const auto byte = static_cast<std::uint8_t>(row[c / 2]);
  const int nib = (c % 2) ? (byte >> 4) : (byte & 0x0F);
  return nib >= 8 ? nib - 16 : nib;
}

int QuantizedHost::k_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const {
  const auto& L = layout;
  const std::int8_t* row = k_codes.data() + ((b * L.kv_heads + h) * L.kv_len_pad + n) * L.row_bytes;
  if (L.config.qk_bits == 8) return row[c];
  const auto byte = static_cast<std::uint8_t>(row[c / 2]);
  const int nib = (c % 2) ? (byte >> 4) : (byte & 0x0F);
  return nib >= 8 ? nib - 16 : nib;
}

std::uint8_t QuantizedHost::v_code(std::int64_t b, std::int64_t h, std::int64_t n, int c) const {
  const auto& L = layout;
  return v_codes[static_cast<std::size_t>(((b * L.kv_heads + h) * L.d_v + c) * L.kv_len_pad + L.v_slot(n))];
}

std::uint16_t QuantizedHost::v_code16(std::int64_t b, std::int64_t h, std::int64_t n, int c) const {
  const auto& L = layout;
  const std::size_t i = 2 * static_cast<std::size_t>(((b * L.kv_heads + h) * L.d_v + c) * L.kv_len_pad + L.v_slot(n));
  return static_cast<std::uint16_t>(v_codes[i] | (v_codes[i + 1] << 8));  // little-endian, as the GPU stores
}

float QuantizedHost::v_value(std::int64_t b, std::int64_t h, std::int64_t n, int c) const {
  return layout.v_code_bytes == 2 ? half_to_float(v_code16(b, h, n, c)) : fp8_to_float(v_code(b, h, n, c), Fp8Format::E4M3);
}

namespace {

std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }
constexpr float kInf = std::numeric_limits<float>::infinity();

// What every head's work reads: the problem, the buffers' layout, the code range and the sum order.
struct Stage {
  const detail::Problem& p;
  const kernels::QuantBuffers& L;
  const QuantizeOptions& opt;
  int R = 127;               // the code range: 127 (int8) or 7 (int4)
  int stats_T = 0, stats_P = 0;  // the statistics' sum order (kernels/quant_buffers.hpp)
  // Keys the statistics (k̄, μ, k_stats, v_stats) are taken over: kv_len, or the first KV tile's
  // min(bk, kv_len) with QuantizeOptions::kv_tile_statistics.
  std::int64_t stats_keys = 0;
  // QuantizeOptions::sample_statistics: the sampled keys, in their order (empty: the first
  // stats_keys keys).
  std::vector<std::int64_t> sample;
};

// The keys sample_statistics takes when the T tiles of bk keys are more than S: tiles ⌊i·T/S⌋
// (i = 0..S−1), in that order (all full: the last, T − ceil(T/S), is never the partial last tile).
std::vector<std::int64_t> sampled_keys(std::int64_t kv_len, std::int64_t bk, std::int64_t S) {
  const std::int64_t T = (kv_len + bk - 1) / bk;
  std::vector<std::int64_t> keys;
  for (std::int64_t i = 0; i < S; ++i)
    for (std::int64_t n = i * T / S * bk; n < (i * T / S + 1) * bk; ++n) keys.push_back(n);
  return keys;
}

// The stage's buffers, sized by the layout and zero (flags: none bad).
void allocate(QuantizedHost& qs, const Stage& st) {
  const kernels::QuantBuffers& L = st.L;
  qs.q_codes.assign(sz(L.q_codes()), 0);
  qs.q_scale.assign(sz(L.q_scale()), 0.f);
  qs.q_mean.assign(sz(L.q_mean()), 0.f);
  qs.q_kbias.assign(sz(L.q_kbias()), 0.f);
  qs.k_codes.assign(sz(L.k_codes()), 0);
  qs.k_scale.assign(sz(L.k_scale()), 0.f);
  qs.k_mean.assign(sz(L.k_mean()), 0.f);
  qs.k_stats.assign(sz(L.k_stats()), 0.f);
  qs.v_codes.assign(sz(L.v_codes()), 0);
  qs.v_scale.assign(sz(L.v_scale()), 0.f);
  if (st.opt.sample_statistics) qs.v_amax.assign(sz(L.v_scale()), 0.f);
  if (st.opt.kv_tile_statistics) qs.v_tile_scale.assign(sz(st.p.batch * st.p.kv_heads * L.k_blocks * L.d_v), 0.f);
  qs.v_mean.assign(sz(L.v_mean()), 0.f);
  qs.v_stats.assign(sz(L.v_stats()), 0.f);
  qs.q_bad.assign(sz(L.q_bad()), 0);
  qs.k_first_bad.assign(sz(L.k_first_bad()), detail::kNoBad);
  qs.v_first_bad.assign(sz(L.v_first_bad()), detail::kNoBad);
  if (st.opt.margins) {
    const detail::Problem& p = st.p;
    qs.q_margin.assign(sz(p.batch * p.q_heads * L.q_len_pad * L.d_qk), kInf);
    qs.k_margin.assign(sz(p.batch * p.kv_heads * L.kv_len_pad * L.d_qk), kInf);
    qs.v_margin.assign(sz(p.batch * p.kv_heads * L.d_v * L.kv_len_pad), kInf);
  }
}

// Per-channel statistics of one head's first st.stats_keys keys (sum in the stage's order, min,
// max) into stats [3][width] and the mean (when `smooth`) into mean.
void head_stats(const Stage& st, const std::vector<float>& x_all, int width, bool smooth, float* stats, float* mean) {
  const int d = st.p.head_dim;
  std::vector<float> gathered;
  if (!st.sample.empty()) {
    for (std::int64_t n : st.sample) gathered.insert(gathered.end(), x_all.begin() + n * d, x_all.begin() + (n + 1) * d);
  }
  const std::vector<float>& x = st.sample.empty() ? x_all : gathered;
  std::vector<float> sum(sz(d)), mn(sz(d)), mx(sz(d));
  detail::channel_stats(x, st.stats_keys, d, sum.data(), mn.data(), mx.data());
  stage_sums(x, st.stats_keys, d, st.stats_T, st.stats_P, sum.data());
  const auto kv_len_f = static_cast<float>(st.stats_keys);
  for (int c = 0; c < d; ++c) {
    stats[c] = sum[sz(c)];
    stats[width + c] = mn[sz(c)];
    stats[2 * width + c] = mx[sz(c)];
    mean[c] = smooth ? sum[sz(c)] / kv_len_f : 0.f;
  }
}

// Codes of one block of `rows` rows: per-thread groups, non-finite inputs' codes 0, packed.
void quantize_block(const Stage& st, const float* x, std::int64_t rows, const std::vector<int>& groups, int n_groups,
                    const std::uint8_t* bad, float* scales, float* margins, std::int8_t* packed) {
  const kernels::QuantBuffers& L = st.L;
  const int d = st.p.head_dim;
  std::vector<std::int8_t> codes(sz(rows * L.d_qk));
  detail::quantize_grouped(x, rows, d, d, L.d_qk, groups.data(), n_groups, st.R, codes.data(), scales, margins);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < d; ++c) {
      if (!bad[r * d + c]) continue;   // a non-finite input's code is 0
      codes[sz(r * L.d_qk + c)] = 0;
      if (margins) margins[r * L.d_qk + c] = kInf;
    }
    pack_row(codes.data() + r * L.d_qk, L.d_qk, L.qk_bits, packed + r * L.row_bytes);
  }
}

// K of one (batch, kv head): statistics and k̄ (non-finite elements read as 0; the first row
// holding one is recorded), then the codes of x = float(K) − k̄ in per-thread groups of each block.
void k_head(const Stage& st, const TensorRef& k, std::int64_t bh, QuantizedHost& qs) {
  const detail::Problem& p = st.p;
  const kernels::QuantBuffers& L = st.L;
  const kernels::QuantLayout& ql = L.layout;
  const int d = p.head_dim;
  const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
  std::vector<float> x;
  std::vector<std::uint8_t> bad;
  detail::load_head(k, b, h, x);
  if (detail::sanitize(x, bad) > 0) {
    for (std::int64_t n = 0; n < p.kv_len && qs.k_first_bad[sz(bh)] == detail::kNoBad; ++n)
      for (int c = 0; c < d; ++c)
        if (bad[sz(n * d + c)]) qs.k_first_bad[sz(bh)] = static_cast<std::int32_t>(n);
  }
  head_stats(st, x, L.d_qk, L.smooth_k, qs.k_stats.data() + bh * 3 * L.d_qk, qs.k_mean.data() + bh * L.d_qk);
  detail::smoothed_k(k, qs, b, h, x);
  std::vector<int> groups(sz(ql.bk));
  for (int r = 0; r < ql.bk; ++r) groups[sz(r)] = ql.k_group(r);
  for (std::int64_t blk = 0; blk < L.k_blocks; ++blk) {
    const std::int64_t n0 = blk * ql.bk;
    const std::int64_t rows = std::min<std::int64_t>(ql.bk, p.kv_len - n0);
    quantize_block(st, x.data() + n0 * d, rows, groups, ql.k_groups_per_block(), bad.data() + n0 * d,
                   qs.k_scale.data() + (bh * L.k_blocks + blk) * ql.k_groups_per_block(),
                   st.opt.margins ? qs.k_margin.data() + (bh * L.kv_len_pad + n0) * L.d_qk : nullptr,
                   qs.k_codes.data() + (bh * L.kv_len_pad + n0) * L.row_bytes);
  }
}

// The keys [n0, n1) of V channel c that share one scale (all keys, or one KV tile's), their amax
// and where their scale goes.
struct VRange {
  std::int64_t n0 = 0, n1 = 0;
  float amax = 0.f;
  float* scale = nullptr;
};

// V̂ of channel c in FP16: a power-of-two scale (1 unless |V − μ| reaches 2^15, or 2^9 when V̂
// feeds an fp16 accumulator), fp16 codes in the layout's slots.
void v_channel_fp16(const Stage& st, const std::vector<float>& x, const std::vector<std::uint8_t>& bad,
                    std::int64_t bh, int c, const VRange& r, float mu, QuantizedHost& qs) {
  const kernels::QuantBuffers& L = st.L;
  const int d = st.p.head_dim;
  const float amax = r.amax;
  const bool ok = amax > 0.f && std::isfinite(amax);
  const int max_exp = L.layout.v_acc16 ? kernels::kV16Acc16Exp : kernels::kV16Exp;
  const float delta = ok ? detail::v16_scale(amax, max_exp) : (amax == 0.f ? 1.f : amax);
  *r.scale = delta;
  const float inv = ok ? 1.f / delta : 0.f;
  std::uint8_t* out = qs.v_codes.data() + 2 * (bh * L.d_v + c) * L.kv_len_pad;
  float* mrow = st.opt.margins ? qs.v_margin.data() + (bh * L.d_v + c) * L.kv_len_pad : nullptr;
  for (std::int64_t n = r.n0; n < r.n1; ++n) {
    const std::int64_t slot = (n & ~std::int64_t(15)) + L.layout.v_slot(static_cast<int>(n & 15));
    std::uint16_t code = 0;
    if (!bad[sz(n * d + c)]) code = float_to_half((x[sz(n * d + c)] - mu) * inv);
    out[2 * slot] = static_cast<std::uint8_t>(code & 0xff);
    out[2 * slot + 1] = static_cast<std::uint8_t>(code >> 8);
    if (mrow) mrow[slot] = bad[sz(n * d + c)] ? kInf : half_margin((x[sz(n * d + c)] - mu) * inv);
  }
}

// V̂ of channel c in E4M3: scale amax/448 (amax/2.25 when V̂ feeds an fp16 accumulator), codes
// in the kernels' stored order.
void v_channel_fp8(const Stage& st, const std::vector<float>& x, const std::vector<std::uint8_t>& bad,
                   std::int64_t bh, int c, const VRange& r, float mu, QuantizedHost& qs) {
  const kernels::QuantBuffers& L = st.L;
  const int d = st.p.head_dim;
  const float amax = r.amax;
  const float vmax = L.layout.v_acc16 ? kernels::kV8Acc16Max : 448.f;
  *r.scale = amax / vmax;
  const float inv = (amax > 0.f && std::isfinite(amax)) ? vmax / amax : 0.f;
  std::uint8_t* out = qs.v_codes.data() + (bh * L.d_v + c) * L.kv_len_pad;
  float* mrow = st.opt.margins ? qs.v_margin.data() + (bh * L.d_v + c) * L.kv_len_pad : nullptr;
  for (std::int64_t n = r.n0; n < r.n1; ++n) {
    const int slot = L.layout.v_slot(static_cast<int>(n));  // stored column (the kernels' order)
    if (bad[sz(n * d + c)]) {   // non-finite input: code 0 (+0.0), no rounding boundary
      out[slot] = 0;
      if (mrow) mrow[slot] = kInf;
      continue;
    }
    const float t = (x[sz(n * d + c)] - mu) * inv;
    out[slot] = float_to_fp8(t, Fp8Format::E4M3);
    if (mrow) mrow[slot] = fp8_margin(t, Fp8Format::E4M3);
  }
}

// V of one (batch, kv head): statistics, mean, codes (transposed [c][n]) scaled per channel or,
// with kv_tile_statistics, per (KV tile, channel); the first non-finite key per channel.
// Non-finite elements read as 0 in a tile's amax as in every other statistic, so a bad V[j, c]
// changes nothing but its own code (0) and the flag v_first_bad[c], which poisons exactly the
// rows that see key j: the policy holds per tile as it does per channel.
void v_head(const Stage& st, const TensorRef& v, std::int64_t bh, QuantizedHost& qs) {
  const detail::Problem& p = st.p;
  const kernels::QuantBuffers& L = st.L;
  const int d = p.head_dim;
  const std::int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
  std::vector<float> x;
  std::vector<std::uint8_t> bad;
  detail::load_head(v, b, h, x);
  if (detail::sanitize(x, bad) > 0) {
    for (int c = 0; c < d; ++c)
      for (std::int64_t n = 0; n < p.kv_len; ++n)
        if (bad[sz(n * d + c)]) {
          qs.v_first_bad[sz(bh * L.d_v + c)] = static_cast<std::int32_t>(n);
          break;
        }
  }
  float* vm = qs.v_mean.data() + bh * L.d_v;
  head_stats(st, x, L.d_v, L.smooth_v, qs.v_stats.data() + bh * 3 * L.d_v, vm);
  if (st.opt.sample_statistics) {  // the sample's amax with headroom, unless a key exceeds it
    for (int c = 0; c < d; ++c) {
      const float a_s = detail::v_amax_of_stats(qs, bh, c);
      const float a_all = detail::v_amax_of_keys(x, d, 0, p.kv_len, c, vm[c], L.smooth_v);
      // the headroom where H·A_s is finite (else A_s); a key above it: every key's amax
      const float ha = st.opt.v_headroom * a_s, amax_h = std::isfinite(ha) ? ha : a_s;
      qs.v_amax[sz(bh * L.d_v + c)] = a_all > amax_h ? a_all : amax_h;
    }
  }
  const bool per_tile = st.opt.kv_tile_statistics;
  const std::int64_t bk = L.layout.bk, scale_ranges = per_tile ? L.k_blocks : 1;
  for (int c = 0; c < d; ++c) {
    for (std::int64_t t = 0; t < scale_ranges; ++t) {
      VRange r;
      if (per_tile) {
        r.n0 = t * bk;
        r.n1 = std::min(p.kv_len, r.n0 + bk);
        r.amax = detail::v_amax_of_keys(x, d, r.n0, r.n1, c, vm[c], L.smooth_v);
        r.scale = qs.v_tile_scale.data() + (bh * L.k_blocks + t) * L.d_v + c;
      } else {
        r.n1 = p.kv_len;
        r.amax = detail::v_amax(qs, b, h, c);
        r.scale = qs.v_scale.data() + bh * L.d_v + c;
      }
      if (L.layout.v_fp16)
        v_channel_fp16(st, x, bad, bh, c, r, vm[c], qs);
      else
        v_channel_fp8(st, x, bad, bh, c, r, vm[c], qs);
    }
  }
}

// Q of one (batch, q head): non-finite rows flagged, q·k̄, block means (smooth-Q), codes.
void q_head(const Stage& st, const TensorRef& q, std::int64_t bh, QuantizedHost& qs) {
  const detail::Problem& p = st.p;
  const kernels::QuantBuffers& L = st.L;
  const kernels::QuantLayout& ql = L.layout;
  const int d = p.head_dim;
  const std::int64_t b = bh / p.q_heads, h = bh % p.q_heads;
  const std::int64_t hk = h / p.group();
  std::vector<float> x;
  std::vector<std::uint8_t> bad;
  detail::load_head(q, b, h, x);
  if (detail::sanitize(x, bad) > 0) {   // non-finite elements read as 0; rows flagged
    for (std::int64_t i = 0; i < p.q_len; ++i)
      for (int c = 0; c < d; ++c)
        if (bad[sz(i * d + c)]) qs.q_bad[sz(bh * L.q_len_pad + i)] = 1;
  }
  const float* km = qs.k_mean.data() + (b * p.kv_heads + hk) * L.d_qk;
  if (L.smooth_k) {
    for (std::int64_t i = 0; i < p.q_len; ++i) {
      double s = 0;
      for (int c = 0; c < d; ++c) s += static_cast<double>(x[sz(i * d + c)]) * km[c];
      qs.q_kbias[sz(bh * L.q_len_pad + i)] = static_cast<float>(s);
    }
  }
  if (L.smooth_q) {
    for (std::int64_t blk = 0; blk < L.q_blocks; ++blk) {
      const std::int64_t i0 = blk * ql.bq;
      const std::int64_t rows = std::min<std::int64_t>(ql.bq, p.q_len - i0);
      float* qm = qs.q_mean.data() + (bh * L.q_blocks + blk) * L.d_qk;
      for (int c = 0; c < d; ++c) {
        double s = 0;
        for (std::int64_t r = 0; r < rows; ++r) s += x[sz((i0 + r) * d + c)];
        qm[c] = static_cast<float>(s) / static_cast<float>(rows);
      }
    }
  }
  detail::smoothed_q(q, qs, b, h, x);
  const std::vector<int> groups = kernels::q_group_table(ql);
  for (std::int64_t blk = 0; blk < L.q_blocks; ++blk) {
    const std::int64_t i0 = blk * ql.bq;
    const std::int64_t rows = std::min<std::int64_t>(ql.bq, p.q_len - i0);
    quantize_block(st, x.data() + i0 * d, rows, groups, ql.q_groups_per_block(), bad.data() + i0 * d,
                   qs.q_scale.data() + (bh * L.q_blocks + blk) * ql.q_groups_per_block(),
                   st.opt.margins ? qs.q_margin.data() + (bh * L.q_len_pad + i0) * L.d_qk : nullptr,
                   qs.q_codes.data() + (bh * L.q_len_pad + i0) * L.row_bytes);
  }
}

}  // namespace

QuantizedHost quantize_stage(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                             const KernelConfig& config, const QuantizeOptions& opt) {
  const detail::Problem p = detail::check_qkv(q, k, v);
  const kernels::KernelSpec spec = kernel_spec(config);
  if (spec.head_dim != p.head_dim)
    detail::bad_arg("config.head_dim=" + std::to_string(spec.head_dim) + " != q.dim=" + std::to_string(p.head_dim));
  if (p.dv != p.head_dim)
    detail::bad_arg("v.dim=" + std::to_string(p.dv) + " != q.dim=" + std::to_string(p.head_dim) + " (the kernels need equal head dims)");
  {
    kernels::KernelSpec check = spec;   // reuse the kernels' own validation (the tensors may be f32)
    check.in_dtype = DType::F16;
    check.validate();
  }
  if (opt.fused_stats_order && opt.cluster_stats_order)
    detail::bad_arg("QuantizeOptions: fused_stats_order and cluster_stats_order are exclusive");

  const kernels::QuantBuffers L = kernels::quant_buffers(p.quant_problem(), spec);
  Stage st{.p = p, .L = L, .opt = opt, .sample = {}};
  st.R = L.qk_bits == 4 ? 7 : 127;
  // Chunks of stats_chunk tokens (the cluster stage: its ranks' chunks); both one-launch stages
  // with the fused CTA's rows per pass, the split path's channel_stats with its own.
  st.stats_T = opt.cluster_stats_order ? static_cast<int>(kernels::quantize_cluster_plan(L).chunk)
                                       : kernels::quantize_stats_chunk(spec);
  // The split walk's rows per pass: the sampled stage's channel_stats runs its own CTA size (the
  // config's spec does not carry sampled_stats: before this, the sampled sums were taken with the
  // every-key walk's 16 slots against the kernel's 8, which moved a sum's last bit now and then).
  kernels::KernelSpec walk_spec = spec;
  walk_spec.sampled_stats = opt.sample_statistics;
  st.stats_P = opt.fused_stats_order || opt.cluster_stats_order ? kernels::quantize_stats_rows_per_pass(spec)
                                                                : kernels::quantize_split_stats_rows_per_pass(walk_spec);
  // One pass over K and V knows the first tile before it writes any code: its means are the
  // sample's (softmax and the LSE, corrected by q·k̄ of the same k̄, do not depend on the choice).
  st.stats_keys = opt.kv_tile_statistics ? std::min<std::int64_t>(p.kv_len, L.layout.bk) : p.kv_len;
  if (opt.kv_tile_statistics && opt.sample_statistics)
    detail::bad_arg("QuantizeOptions: kv_tile_statistics and sample_statistics are exclusive");
  if (opt.sample_statistics && (opt.sample_tiles < 1 || !(opt.v_headroom >= 1.f) || !std::isfinite(opt.v_headroom) ||
                                 opt.sample_unit < 0 || opt.sample_unit % 16 != 0))
    detail::bad_arg("QuantizeOptions: sample_tiles=" + std::to_string(opt.sample_tiles) + " (>= 1), sample_unit=" +
                    std::to_string(opt.sample_unit) + " (0 or a positive multiple of 16) and v_headroom=" +
                    std::to_string(opt.v_headroom) + " (finite, >= 1)");
  const std::int64_t unit = opt.sample_unit > 0 ? opt.sample_unit : L.layout.bk;
  if (opt.sample_statistics && (p.kv_len + unit - 1) / unit > opt.sample_tiles) {
    // One chunk per sampled unit: the split path's statistics kernel takes each sampled unit as
    // one contiguous chunk. (T <= S: every key, in the split stage's own order.)
    st.stats_T = static_cast<int>(unit);
    st.sample = sampled_keys(p.kv_len, unit, opt.sample_tiles);
    st.stats_keys = static_cast<std::int64_t>(st.sample.size());
  }
  QuantizedHost qs;
  qs.kv_tile_statistics = opt.kv_tile_statistics;
  qs.sample_statistics = opt.sample_statistics;
  qs.layout = stage_layout(L, kernel_config(spec));
  allocate(qs, st);
  // K then V per (batch, kv head); then Q per (batch, q head), which reads k̄.
  detail::parallel_for(p.batch * p.kv_heads, opt.threads, [&](std::int64_t bh) {
    k_head(st, k, bh, qs);
    v_head(st, v, bh, qs);
  });
  detail::parallel_for(p.batch * p.q_heads, opt.threads, [&](std::int64_t bh) { q_head(st, q, bh, qs); });
  return qs;
}

}  // namespace sage2::reference
