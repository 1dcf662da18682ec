// The per-Context cache of attention call plans (issue 15 item 2: the host path per call).
//
// A call's plan (validated problem, kernel specs, workspace layout, loaded kernels, launch
// shapes) depends only on the call's shapes, strides, dtypes and options, never on its pointers.
// CallSignature is that POD key: every TensorRef field but `data`, and every AttentionParams
// field but the pointers (lse only as present / absent; workspace not at all: its size is checked
// per call). Lookups hash a fixed array of integers: no string is built and no allocation made.
// Pure host code (no driver): the CPU suite specifies it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "sage2/sage2.hpp"

namespace sage2::runtime {

struct CallSignature {
  // 4 tensors × (dtype, 4 sizes, 4 strides) + causal, qk_bits, smooth_q, smooth_k, smooth_v,
  // sm_scale given, sm_scale bits, lse given; varlen form (0 dense, 1 packed, 2 key padding),
  // sequences, length bounds.
  static constexpr int kWords = 4 * 9 + 8 + 4 + 5 + 3;  // + mask type and strides, P̃V precision, small_q_path, P̃V accumulation
  std::array<std::int64_t, kWords> w{};
  bool operator==(const CallSignature& o) const { return w == o.w; }
  bool operator!=(const CallSignature& o) const { return !(*this == o); }
};

inline CallSignature call_signature(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                                    const AttentionParams& p, const SeqLens* lens = nullptr) {
  CallSignature s;
  int i = 0;
  for (const TensorRef* t : {&q, &k, &v, &out}) {
    s.w[i++] = static_cast<std::int64_t>(t->dtype);
    s.w[i++] = t->batch;
    s.w[i++] = t->heads;
    s.w[i++] = t->seq;
    s.w[i++] = t->dim;
    s.w[i++] = t->stride_batch;
    s.w[i++] = t->stride_head;
    s.w[i++] = t->stride_seq;
    s.w[i++] = t->stride_dim;
  }
  s.w[i++] = static_cast<std::int64_t>(p.causal);
  s.w[i++] = static_cast<std::int64_t>(p.qk_bits);
  s.w[i++] = static_cast<std::int64_t>(p.smooth_q);
  s.w[i++] = p.smooth_k ? 1 : 0;
  s.w[i++] = p.smooth_v ? 1 : 0;
  s.w[i++] = p.sm_scale.has_value() ? 1 : 0;
  std::uint32_t bits = 0;
  if (p.sm_scale) std::memcpy(&bits, &*p.sm_scale, sizeof bits);
  s.w[i++] = bits;
  s.w[i++] = p.lse != nullptr ? 1 : 0;
  s.w[i++] = static_cast<std::int64_t>(p.mask.type);
  s.w[i++] = p.mask.stride_batch;
  s.w[i++] = p.mask.stride_head;
  s.w[i++] = p.mask.stride_q;
  s.w[i++] = p.mask.stride_k;
  s.w[i++] = static_cast<std::int64_t>(p.pv_precision);
  s.w[i++] = static_cast<std::int64_t>(p.small_q_path);
  s.w[i++] = static_cast<std::int64_t>(p.pv_accum);
  if (lens) {
    s.w[i++] = lens->cu_seqlens_q ? 1 : 2;
    s.w[i++] = lens->batch;
    s.w[i++] = lens->max_seqlen_q;
    s.w[i++] = lens->max_seqlen_k;
  }
  return s;
}

struct CallSignatureHash {
  std::size_t operator()(const CallSignature& s) const noexcept {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (std::int64_t x : s.w) {
      h ^= static_cast<std::uint64_t>(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdull;
    }
    return static_cast<std::size_t>(h ^ (h >> 33));
  }
};

// Signature → immutable plan, thread-safe (shared lock for lookups). Entries are handed out as
// shared_ptr, so clearing the cache when it is full never frees a plan a call is still using.
template <class Plan>
class CallCache {
 public:
  explicit CallCache(std::size_t capacity = 4096) : capacity_(capacity) {}

  std::shared_ptr<const Plan> find(const CallSignature& s) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(s);
    if (it == map_.end()) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    return it->second;
  }

  // Inserts `plan` unless another thread inserted one for `s` first; returns the cached plan.
  std::shared_ptr<const Plan> insert(const CallSignature& s, std::shared_ptr<const Plan> plan) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (map_.size() >= capacity_ && map_.find(s) == map_.end()) map_.clear();  // bounded: many shapes
    return map_.emplace(s, std::move(plan)).first->second;
  }

  // Sets the plan of `s`, replacing any (the tiered compile's optimized plan taking over from the
  // quick one: calls holding the old plan finish with it).
  void replace(const CallSignature& s, std::shared_ptr<const Plan> plan) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (map_.size() >= capacity_ && map_.find(s) == map_.end()) map_.clear();
    map_[s] = std::move(plan);
  }

  std::size_t size() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return map_.size();
  }
  std::size_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::size_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  std::size_t capacity_;
  mutable std::shared_mutex mu_;
  std::unordered_map<CallSignature, std::shared_ptr<const Plan>, CallSignatureHash> map_;
  mutable std::atomic<std::size_t> hits_{0}, misses_{0};
};

}  // namespace sage2::runtime
