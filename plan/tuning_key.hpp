// The signature under which an attention problem is tuned and looked up.
//
// A tuning database is per device (one file per device name and arch, see tuning_db.hpp), so the
// key holds what varies for one device:
//   family · head dim · causal (yes/no) · qk bits · smooth Q/K/V · input dtype
//   · query-length bucket · key-length bucket · GQA bucket
// Buckets (so that one measurement serves nearby sizes):
//   seq_bucket(n)  = the smallest power of two >= n, clamped to [64, 131072]
//                    (n in (2048, 4096] → 4096; n <= 64 → 64; n > 65536 → 131072)
//   gqa_bucket     = q_heads / kv_heads rounded up to a power of two, clamped to [1, 16]
// Both causal masks (top-left, bottom-right) share entries: they run the same loop and differ
// only in the diagonal's offset. Everything that changes the kernel's code but not its speed
// (return_lse, the exact causal mask) is not part of the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/kernel_spec.hpp"
#include "plan/attention_validate.hpp"

namespace sage2::plan {

inline constexpr int kMinSeqBucket = 64;
inline constexpr int kMaxSeqBucket = 1 << 17;
inline constexpr int kMaxGqaBucket = 16;

int seq_bucket(std::int64_t len);                               // len >= 1
int gqa_bucket(std::int64_t q_heads, std::int64_t kv_heads);    // q_heads % kv_heads == 0 expected
bool is_seq_bucket(int b);                                      // a value seq_bucket() can return
bool is_gqa_bucket(int b);

struct TuningKey : kernels::QuantOptions, kernels::PvOptions {
  kernels::KernelFamily family = kernels::KernelFamily::AttentionMma;
  int head_dim = 128;
  bool causal = false;
  DType dtype = DType::F16;
  // (PvOptions: pv_fp16 ends the specialisation part of the strings in "|pv16", pv_acc16 then "|acc16")
  int q_bucket = 4096, kv_bucket = 4096, gqa_bucket = 1;

  // "attn_mma|d128|causal|int8|sq0.sk1.sv0|f16|q4096.kv4096.g1"
  std::string str() const;
  // The part without the size buckets: "attn_mma|d128|causal|int8|sq0.sk1.sv0|f16"
  std::string specialisation_str() const;
  bool same_specialisation(const TuningKey& o) const;
  bool operator==(const TuningKey&) const = default;
};

struct TuningKeyHash {
  std::size_t operator()(const TuningKey& k) const noexcept;
};

// The key of a validated problem (defaults already resolved by validate_attention).
TuningKey tuning_key(const plan::AttentionProblem& p,
                     kernels::KernelFamily family = kernels::KernelFamily::AttentionMma);

// Distance between the size buckets of two keys of one specialisation, in powers of two:
// |log2 q − log2 q'| + |log2 kv − log2 kv'| + |log2 g − log2 g'|.
int bucket_distance(const TuningKey& a, const TuningKey& b);

}  // namespace sage2::plan
