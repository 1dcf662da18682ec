#include "plan/tuning_key.hpp"

#include <algorithm>
#include <cstdlib>

namespace sage2::plan {
namespace {

int pow2_ceil_clamped(std::int64_t v, int lo, int hi) {
  if (v <= lo) return lo;
  if (v >= hi) return hi;
  std::int64_t p = lo;
  while (p < v) p <<= 1;
  return static_cast<int>(std::min<std::int64_t>(p, hi));
}

int log2_exact(int v) {
  int l = 0;
  while (v > 1) {
    v >>= 1;
    ++l;
  }
  return l;
}

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

int seq_bucket(std::int64_t len) { return pow2_ceil_clamped(len, kMinSeqBucket, kMaxSeqBucket); }

int gqa_bucket(std::int64_t q_heads, std::int64_t kv_heads) {
  if (kv_heads <= 0 || q_heads <= kv_heads) return 1;
  const std::int64_t group = (q_heads + kv_heads - 1) / kv_heads;
  return pow2_ceil_clamped(group, 1, kMaxGqaBucket);
}

bool is_seq_bucket(int b) { return is_pow2(b) && b >= kMinSeqBucket && b <= kMaxSeqBucket; }
bool is_gqa_bucket(int b) { return is_pow2(b) && b >= 1 && b <= kMaxGqaBucket; }

std::string TuningKey::specialisation_str() const {
  return std::string(kernels::family_name(family)) + "|d" + std::to_string(head_dim) + "|" +
         (causal ? "causal" : "full") + "|int" + std::to_string(qk_bits) + "|sq" + (smooth_q ? "1" : "0") + ".sk" +
         (smooth_k ? "1" : "0") + ".sv" + (smooth_v ? "1" : "0") + "|" + dtype_name(dtype) + (pv_fp16 ? "|pv16" : "") +
         (pv_acc16 ? "|acc16" : "");
}

std::string TuningKey::str() const {
  return specialisation_str() + "|q" + std::to_string(q_bucket) + ".kv" + std::to_string(kv_bucket) + ".g" +
         std::to_string(gqa_bucket);
}

bool TuningKey::same_specialisation(const TuningKey& o) const {
  return family == o.family && head_dim == o.head_dim && causal == o.causal && qk_bits == o.qk_bits &&
         smooth_q == o.smooth_q && smooth_k == o.smooth_k && smooth_v == o.smooth_v && dtype == o.dtype &&
         pv_fp16 == o.pv_fp16 && pv_acc16 == o.pv_acc16;
}

std::size_t TuningKeyHash::operator()(const TuningKey& k) const noexcept {
  // Every field fits in a few bits; pack them and mix.
  std::uint64_t h = static_cast<std::uint64_t>(k.family);
  h = h * 1031 + static_cast<std::uint64_t>(k.head_dim);
  h = h * 4 + (k.causal ? 1 : 0);
  h = h * 16 + static_cast<std::uint64_t>(k.qk_bits);
  h = h * 8 + (k.smooth_q ? 4 : 0) + (k.smooth_k ? 2 : 0) + (k.smooth_v ? 1 : 0);
  h = h * 4 + static_cast<std::uint64_t>(k.dtype);
  h = h * 2 + (k.pv_fp16 ? 1 : 0);
  h = h * 2 + (k.pv_acc16 ? 1 : 0);
  h = h * 32 + static_cast<std::uint64_t>(log2_exact(k.q_bucket));
  h = h * 32 + static_cast<std::uint64_t>(log2_exact(k.kv_bucket));
  h = h * 8 + static_cast<std::uint64_t>(log2_exact(k.gqa_bucket));
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<std::size_t>(h);
}

TuningKey tuning_key(const plan::AttentionProblem& p, kernels::KernelFamily family) {
  TuningKey k;
  k.family = family;
  k.head_dim = p.head_dim;
  k.causal = p.causal != CausalMode::None;
  k.quant() = p.quant();
  k.dtype = p.dtype;
  k.pv() = p.pv();
  k.q_bucket = seq_bucket(p.q_len);
  k.kv_bucket = seq_bucket(p.kv_len);
  k.gqa_bucket = gqa_bucket(p.q_heads, p.kv_heads);
  return k;
}

int bucket_distance(const TuningKey& a, const TuningKey& b) {
  return std::abs(log2_exact(a.q_bucket) - log2_exact(b.q_bucket)) +
         std::abs(log2_exact(a.kv_bucket) - log2_exact(b.kv_bucket)) +
         std::abs(log2_exact(a.gqa_bucket) - log2_exact(b.gqa_bucket));
}

}  // namespace sage2::plan
