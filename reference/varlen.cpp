// Variable-length batches on the host (sage2/reference.hpp, "Variable-length batches"): every
// sequence is run through the dense reference on views of its own tokens, so the per-sequence
// rules of SeqLens (groups, means and scales over the sequence alone, masks aligned per sequence)
// hold by construction, not by a second implementation that could drift from the dense one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/internal.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace {

using detail::bad_arg;

std::string s(std::int64_t x) { return std::to_string(x); }

// One sequence: batch `b` of the tensors (0 in the packed form), query tokens [q0, q0 + len_q),
// keys [k0, k0 + len_k).
struct Seq {
  std::int64_t b = 0, q0 = 0, len_q = 0, k0 = 0, len_k = 0;
};

void check_cu(const std::vector<std::int32_t>& cu, const char* name, std::int64_t tokens, const char* tensor) {
  if (cu.front() != 0) bad_arg(std::string(name) + "[0]=" + s(cu.front()) + " must be 0");
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      bad_arg(std::string(name) + "[" + s(static_cast<std::int64_t>(i)) + "]=" + s(cu[i]) + " < " + name + "[" +
              s(static_cast<std::int64_t>(i - 1)) + "]=" + s(cu[i - 1]) + " (cu_seqlens never decrease)");
  if (cu.back() > tokens)
    bad_arg(std::string(name) + "[B]=" + s(cu.back()) + " exceeds the " + s(tokens) + " tokens of " + tensor);
}

// The sequences of `lens` for these tensors (shapes already checked by check_qkv), or
// InvalidArgument naming the array and entry that break SeqLens's rules.
std::vector<Seq> sequences(const HostSeqLens& lens, const TensorRef& q, const TensorRef& k) {
  const bool has_cu = !lens.cu_seqlens_q.empty() || !lens.cu_seqlens_k.empty();
  const bool has_kv = !lens.kv_lens.empty();
  if (has_cu && has_kv) bad_arg("lens: both forms set (cu_seqlens_q/k and kv_lens); use one");
  if (!has_cu && !has_kv) bad_arg("lens: neither cu_seqlens_q/k nor kv_lens is set");
  std::vector<Seq> out;
  if (has_cu) {
    const auto& cq = lens.cu_seqlens_q;
    const auto& ck = lens.cu_seqlens_k;
    if (cq.size() != ck.size())
      bad_arg("lens: cu_seqlens_q has " + s(static_cast<std::int64_t>(cq.size())) + " entries, cu_seqlens_k " +
              s(static_cast<std::int64_t>(ck.size())) + " (both B + 1)");
    if (cq.size() < 2)
      bad_arg("lens: cu_seqlens_q has " + s(static_cast<std::int64_t>(cq.size())) +
              " entries; B + 1 with B >= 1 are needed");
    if (q.batch != 1) bad_arg("q.batch=" + s(q.batch) + ": the packed form takes batch-1 views of [total, heads, dim]");
    if (k.batch != 1) bad_arg("k.batch=" + s(k.batch) + ": the packed form takes batch-1 views of [total, heads, dim]");
    check_cu(cq, "cu_seqlens_q", q.seq, "q");
    check_cu(ck, "cu_seqlens_k", k.seq, "k");
    for (std::size_t b = 0; b + 1 < cq.size(); ++b)
      out.push_back(Seq{0, cq[b], cq[b + 1] - cq[b], ck[b], ck[b + 1] - ck[b]});
    return out;
  }
  if (static_cast<std::int64_t>(lens.kv_lens.size()) != q.batch)
    bad_arg("lens: kv_lens has " + s(static_cast<std::int64_t>(lens.kv_lens.size())) +
            " entries, q.batch=" + s(q.batch) + " (one per batch)");
  for (std::size_t b = 0; b < lens.kv_lens.size(); ++b) {
    const std::int32_t n = lens.kv_lens[b];
    if (n < 0 || n > k.seq)
      bad_arg("kv_lens[" + s(static_cast<std::int64_t>(b)) + "]=" + s(n) + " outside [0, " + s(k.seq) + "] (k.seq)");
    out.push_back(Seq{static_cast<std::int64_t>(b), 0, q.seq, 0, n});
  }
  return out;
}

// Tokens [n0, n0 + len) of batch b of t, as a batch-1 tensor with t's strides.
TensorRef slice(const TensorRef& t, std::int64_t b, std::int64_t n0, std::int64_t len) {
  TensorRef r = t;
  const std::int64_t elems = b * t.stride_batch + n0 * t.stride_seq;
  r.data = static_cast<const char*>(t.data) + elems * static_cast<std::int64_t>(dtype_size(t.dtype));
  r.batch = 1;
  r.seq = len;
  return r;
}

// Runs `dense(q_view, k_view, v_view)` for every sequence that has rows and keys and copies its
// rows into `res` (shaped by the caller, filled with `fill`); rows of sequences without keys get
// O = 0 and LSE = -inf. Works for ExactResult and EmulationResult alike.
template <class Result, class Dense>
Result run_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const HostSeqLens& lens, std::int64_t dim,
                  Dense&& dense) {
  using T = typename decltype(Result::o)::value_type;
  const detail::Problem p = detail::check_qkv(q, k, v);
  const std::vector<Seq> seqs = sequences(lens, q, k);
  const bool packed = lens.packed();
  Result res;
  res.batch = packed ? 1 : p.batch;
  res.heads = p.q_heads;
  res.q_len = p.q_len;
  res.dim = dim;
  // Packed: rows after cu_q[B] belong to no sequence (NaN: no defined value); every other row is
  // written below.
  const T fill = packed ? std::numeric_limits<T>::quiet_NaN() : T(0);
  res.o.assign(static_cast<std::size_t>(res.batch * res.heads * res.q_len * res.dim), fill);
  res.lse.assign(static_cast<std::size_t>(res.batch * res.heads * res.q_len), fill);
  for (const Seq& sq : seqs) {
    if (sq.len_q == 0) continue;  // no rows
    const std::int64_t b_out = packed ? 0 : sq.b;
    if (sq.len_k == 0) {  // rows that see no key: O = 0, LSE = -inf
      for (std::int64_t h = 0; h < res.heads; ++h)
        for (std::int64_t i = 0; i < sq.len_q; ++i) {
          T* o = res.o.data() + res.index(b_out, h, sq.q0 + i, 0);
          std::fill(o, o + res.dim, T(0));
          res.lse[static_cast<std::size_t>((b_out * res.heads + h) * res.q_len + sq.q0 + i)] =
              -std::numeric_limits<T>::infinity();
        }
      continue;
    }
    const Result r =
        dense(slice(q, sq.b, sq.q0, sq.len_q), slice(k, sq.b, sq.k0, sq.len_k), slice(v, sq.b, sq.k0, sq.len_k));
    for (std::int64_t h = 0; h < res.heads; ++h)
      for (std::int64_t i = 0; i < sq.len_q; ++i) {
        const T* src = r.o.data() + r.index(0, h, i, 0);
        std::copy(src, src + res.dim, res.o.data() + res.index(b_out, h, sq.q0 + i, 0));
        res.lse[static_cast<std::size_t>((b_out * res.heads + h) * res.q_len + sq.q0 + i)] =
            r.lse[static_cast<std::size_t>(h * r.q_len + i)];
      }
  }
  return res;
}

}  // namespace

HostSeqLens HostSeqLens::packed_from_lengths(const std::vector<std::int32_t>& len_q,
                                             const std::vector<std::int32_t>& len_k) {
  if (len_q.size() != len_k.size())
    bad_arg("packed_from_lengths: " + s(static_cast<std::int64_t>(len_q.size())) + " query lengths, " +
            s(static_cast<std::int64_t>(len_k.size())) + " key lengths");
  HostSeqLens l;
  l.cu_seqlens_q.push_back(0);
  l.cu_seqlens_k.push_back(0);
  for (std::size_t b = 0; b < len_q.size(); ++b) {
    if (len_q[b] < 0 || len_k[b] < 0)
      bad_arg("packed_from_lengths: sequence " + s(static_cast<std::int64_t>(b)) + " has a negative length");
    l.cu_seqlens_q.push_back(l.cu_seqlens_q.back() + len_q[b]);
    l.cu_seqlens_k.push_back(l.cu_seqlens_k.back() + len_k[b]);
  }
  return l;
}

HostSeqLens HostSeqLens::key_padding(std::vector<std::int32_t> kv_lens) {
  HostSeqLens l;
  l.kv_lens = std::move(kv_lens);
  return l;
}

std::int64_t HostSeqLens::batch() const {
  if (packed()) return cu_seqlens_q.empty() ? 0 : static_cast<std::int64_t>(cu_seqlens_q.size()) - 1;
  return static_cast<std::int64_t>(kv_lens.size());
}

ExactResult exact_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const HostSeqLens& lens,
                                   const AttentionOptions& options) {
  // The options are checked here too, not only by the dense calls (there may be none: all
  // sequences empty).
  detail::check_qkv(q, k, v);
  const double sm = options.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(q.dim)));
  if (!std::isfinite(sm) || sm == 0.0) bad_arg("sm_scale=" + std::to_string(sm) + " must be finite and non-zero");
  if (options.causal != CausalMode::None && options.causal != CausalMode::TopLeft &&
      options.causal != CausalMode::BottomRight)
    bad_arg("causal=" + s(static_cast<int>(options.causal)) + " is not a CausalMode");
  return run_varlen<ExactResult>(q, k, v, lens, v.dim,
                                 [&](const TensorRef& qs, const TensorRef& ks, const TensorRef& vs) {
                                   return exact_attention(qs, ks, vs, options);
                                 });
}

EmulationResult emulate_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                         const HostSeqLens& lens, const KernelConfig& config,
                                         const EmulationOptions& options) {
  if (options.stage)
    bad_arg(
        "options.stage: the varlen emulation runs one quantize stage per sequence; a single stage "
        "cannot be given");
  // Config and tensors are checked here too, not only by the dense calls (there may be none).
  const detail::Problem p = detail::check_qkv(q, k, v);
  const kernels::KernelSpec spec = kernel_spec(config);
  if (spec.head_dim != p.head_dim) bad_arg("config.head_dim=" + s(spec.head_dim) + " != q.dim=" + s(p.head_dim));
  if (p.dv != p.head_dim) bad_arg("v.dim=" + s(p.dv) + " != q.dim=" + s(p.head_dim) + " (the kernels need equal head dims)");
  // The dense emulation per sequence: its quantize stage sees only that sequence's tokens, so the
  // Q blocks and per-thread groups start at the sequence's first token, the K mean (smooth-K), the
  // V channel scales and mean (and q̄ of smooth-Q) are that sequence's alone, and the causal mask is
  // aligned to its own lengths — the per-sequence grouping of SeqLens, by construction.
  return run_varlen<EmulationResult>(q, k, v, lens, q.dim,
                                     [&](const TensorRef& qs, const TensorRef& ks, const TensorRef& vs) {
                                       return emulate_attention(qs, ks, vs, config, options);
                                     });
}

}  // namespace sage2::reference
