#include "plan/attention_validate.hpp"

#include "kernels/attention_family.hpp"
#include "plan/direct_rule.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <sstream>

namespace sage2::plan {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorCode::InvalidArgument, msg); }

std::string shape_str(const TensorRef& t) {
  std::ostringstream o;
  o << "[" << t.batch << ", " << t.heads << ", " << t.seq << ", " << t.dim << "] strides [" << t.stride_batch << ", "
    << t.stride_head << ", " << t.stride_seq << ", " << t.stride_dim << "]";
  return o.str();
}

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) { return __builtin_mul_overflow(a, b, &out); }
bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) { return __builtin_add_overflow(a, b, &out); }
// Adds a dim's reach, (size - 1) · stride elements, to `last` (the largest element offset so far);
// false when that overflows 64 bits. Tensors and masks bound their memory this way.
bool extend_span(std::int64_t size, std::int64_t stride, std::int64_t& last) {
  std::int64_t span;
  return !mul_overflows(size - 1, stride, span) && !add_overflows(last, span, last);
}

void check_tensor(const TensorRef& t, const char* name) {
  const std::string n(name);
  if (!t.data) fail(n + ": data pointer is null");
  if (t.dtype != DType::F16 && t.dtype != DType::BF16)
    fail(n + ": dtype " + dtype_name(t.dtype) + " is not supported (f16 or bf16)");
  if (t.batch <= 0 || t.heads <= 0 || t.seq <= 0 || t.dim <= 0)
    fail(n + ": every size must be positive, got shape " + shape_str(t));
  if (t.stride_dim != 1) fail(n + ": the last dim must be contiguous (stride_dim=" + std::to_string(t.stride_dim) + ")");
  const std::int64_t sizes[3] = {t.batch, t.heads, t.seq};
  const std::int64_t strides[3] = {t.stride_batch, t.stride_head, t.stride_seq};
  const char* dims[3] = {"stride_batch", "stride_head", "stride_seq"};
  std::int64_t last = t.dim - 1;  // largest element offset
  for (int i = 0; i < 3; ++i) {
    if (strides[i] < 0) fail(n + ": " + dims[i] + "=" + std::to_string(strides[i]) + " is negative");
    if (strides[i] == 0 && sizes[i] > 1)
      fail(n + ": " + dims[i] + "=0 on a dim of size " + std::to_string(sizes[i]) + " (rows would alias)");
    if (!extend_span(sizes[i], strides[i], last)) fail(n + ": element offsets overflow 64 bits for shape " + shape_str(t));
  }
  std::int64_t bytes;
  if (mul_overflows(last + 1, 2, bytes)) fail(n + ": byte size overflows 64 bits for shape " + shape_str(t));
  if (reinterpret_cast<std::uintptr_t>(t.data) % 2 != 0)
    fail(n + ": data pointer is not aligned to its 2-byte element size");
}

bool overlaps(const ByteRange& a, const ByteRange& b) { return a.first <= b.last && b.first <= a.last; }

// True when two different indices of `t` can address the same element: with the dims of size
// > 1 ordered by stride, each stride must be at least the extent of the dims nested inside it.
// (Inputs may alias themselves — they are only read — but the output may not.)
bool self_overlapping(const TensorRef& t) {
  struct Dim { std::int64_t size, stride; };
  Dim dims[4] = {{t.batch, t.stride_batch}, {t.heads, t.stride_head}, {t.seq, t.stride_seq}, {t.dim, t.stride_dim}};
  std::sort(std::begin(dims), std::end(dims), [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  std::int64_t extent = 1;  // elements spanned by the dims already placed
  for (const Dim& d : dims) {
    if (d.size <= 1) continue;
    if (d.stride < extent) return true;
    extent = d.stride * (d.size - 1) + extent;
  }
  return false;
}

}  // namespace

ByteRange byte_range(const TensorRef& t) {
  const std::int64_t last = (t.batch - 1) * t.stride_batch + (t.heads - 1) * t.stride_head +
                            (t.seq - 1) * t.stride_seq + (t.dim - 1);
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  return {base, base + static_cast<std::uintptr_t>(last) * dtype_size(t.dtype) + dtype_size(t.dtype) - 1};
}

AttentionProblem validate_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                                    const AttentionParams& params, kernels::Arch arch) {
  check_tensor(q, "q");
  check_tensor(k, "k");
  check_tensor(v, "v");
  check_tensor(out, "out");
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    fail(std::string("k/v: dtype must equal q's (") + dtype_name(q.dtype) + "), got k " + dtype_name(k.dtype) + ", v " +
         dtype_name(v.dtype));
  if (out.dtype != q.dtype)
    fail(std::string("out: dtype must equal the input dtype ") + dtype_name(q.dtype) + ", got " + dtype_name(out.dtype));
  if (k.batch != q.batch || v.batch != q.batch || out.batch != q.batch)
    fail("batch sizes differ: q " + std::to_string(q.batch) + ", k " + std::to_string(k.batch) + ", v " +
         std::to_string(v.batch) + ", out " + std::to_string(out.batch));
  if (v.heads != k.heads)
    fail("v: heads=" + std::to_string(v.heads) + " must equal k heads=" + std::to_string(k.heads));
  if (q.heads % k.heads != 0)
    fail("q heads=" + std::to_string(q.heads) + " is not a multiple of kv heads=" + std::to_string(k.heads));
  if (v.seq != k.seq) fail("v: seq=" + std::to_string(v.seq) + " must equal k seq=" + std::to_string(k.seq));
  if (k.dim != q.dim) fail("k: head dim " + std::to_string(k.dim) + " must equal q head dim " + std::to_string(q.dim));
  if (v.dim != q.dim) fail("v: head dim " + std::to_string(v.dim) + " must equal q head dim " + std::to_string(q.dim));
  if (q.dim > 512) fail("head dim " + std::to_string(q.dim) + " exceeds the supported maximum 512");
  if (out.heads != q.heads || out.seq != q.seq || out.dim != q.dim)
    fail("out: shape [" + std::to_string(out.batch) + ", " + std::to_string(out.heads) + ", " + std::to_string(out.seq) +
         ", " + std::to_string(out.dim) + "] must be [batch, q heads, q len, head dim] = [" + std::to_string(q.batch) +
         ", " + std::to_string(q.heads) + ", " + std::to_string(q.seq) + ", " + std::to_string(q.dim) + "]");
  if (self_overlapping(out))
    fail("out: its elements overlap each other (strides " + shape_str(out) +
         "); the output needs one distinct element per (batch, head, seq, dim)");
  const ByteRange ro = byte_range(out);
  if (overlaps(ro, byte_range(q))) fail("out overlaps q in memory");
  if (overlaps(ro, byte_range(k))) fail("out overlaps k in memory");
  if (overlaps(ro, byte_range(v))) fail("out overlaps v in memory");

  const int causal = static_cast<int>(params.causal);
  if (causal < 0 || causal > 2) fail("params.causal=" + std::to_string(causal) + " is not a CausalMode");
  const int bits = static_cast<int>(params.qk_bits);
  if (bits != 0 && bits != 4 && bits != 8) fail("params.qk_bits=" + std::to_string(bits) + " (Auto, 4 or 8)");
  const int sq = static_cast<int>(params.smooth_q);
  if (sq < 0 || sq > 2) fail("params.smooth_q=" + std::to_string(sq) + " is not a Toggle");
  const int pvp = static_cast<int>(params.pv_precision);
  if (pvp < 0 || pvp > 2) fail("params.pv_precision=" + std::to_string(pvp) + " is not a PvPrecision");
  const int pva = static_cast<int>(params.pv_accum);
  if (pva < 0 || pva > 3) fail("params.pv_accum=" + std::to_string(pva) + " is not a PvAccum (0 auto, 1 fp32, 2 fp16, 3 prefer fp16)");
  const int sqp = static_cast<int>(params.small_q_path);
  if (sqp < 0 || sqp > 2) fail("params.small_q_path=" + std::to_string(sqp) + " is not a SmallQPath (0 auto, 1 quantized, 2 direct)");
  if (params.sm_scale && !(std::isfinite(*params.sm_scale) && *params.sm_scale > 0))
    fail("params.sm_scale=" + std::to_string(*params.sm_scale) + " must be finite and positive");
  if (params.lse && reinterpret_cast<std::uintptr_t>(params.lse) % 4 != 0)
    fail("params.lse: pointer is not 4-byte aligned");
  if (params.lse) {
    const auto l0 = reinterpret_cast<std::uintptr_t>(params.lse);
    std::int64_t rows, lse_bytes;
    if (mul_overflows(q.batch, q.heads, rows) || mul_overflows(rows, q.seq, rows) || mul_overflows(rows, 4, lse_bytes))
      fail("params.lse: [batch, q heads, q len] = [" + std::to_string(q.batch) + ", " + std::to_string(q.heads) + ", " +
           std::to_string(q.seq) + "] floats overflow 64 bits");
    const ByteRange rl{l0, l0 + static_cast<std::uintptr_t>(lse_bytes) - 1};
    if (overlaps(rl, ro) || overlaps(rl, byte_range(q)) || overlaps(rl, byte_range(k)) || overlaps(rl, byte_range(v)))
      fail("params.lse overlaps q, k, v or out in memory");
  }
  const MaskRef& mk = params.mask;
  const int mask_type = static_cast<int>(mk.type);
  if (mask_type < 0 || mask_type > 4) fail("params.mask.type=" + std::to_string(mask_type) + " is not a MaskType");
  if (mk.type != MaskType::None) {
    if (!mk.data) fail(std::string("params.mask: data pointer is null (type ") + mask_type_name(mk.type) + ")");
    const std::int64_t esize = mk.type == MaskType::Bool ? 1 : (mk.type == MaskType::F32 ? 4 : 2);
    if (reinterpret_cast<std::uintptr_t>(mk.data) % esize != 0)
      fail("params.mask: data pointer is not aligned to its " + std::to_string(esize) + "-byte element");
    const std::int64_t sizes[4] = {q.batch, q.heads, q.seq, k.seq};
    const std::int64_t strides[4] = {mk.stride_batch, mk.stride_head, mk.stride_q, mk.stride_k};
    const char* names[4] = {"stride_batch", "stride_head", "stride_q", "stride_k"};
    std::int64_t last = 0;
    for (int i = 0; i < 4; ++i) {
      if (strides[i] < 0) fail(std::string("params.mask.") + names[i] + "=" + std::to_string(strides[i]) + " is negative");
      if (!extend_span(sizes[i], strides[i], last)) fail("params.mask: element offsets overflow 64 bits");
    }
    std::int64_t bytes;
    if (mul_overflows(last + 1, esize, bytes)) fail("params.mask: byte size overflows 64 bits");
    const auto m0 = reinterpret_cast<std::uintptr_t>(mk.data);
    if (overlaps(ByteRange{m0, m0 + static_cast<std::uintptr_t>(bytes) - 1}, ro)) fail("params.mask overlaps out in memory");
  }
  if (params.workspace && reinterpret_cast<std::uintptr_t>(params.workspace) % 256 != 0)
    fail("params.workspace: pointer is not 256-byte aligned");
  if (!params.workspace && params.workspace_bytes != 0)
    fail("params.workspace_bytes=" + std::to_string(params.workspace_bytes) + " given without a workspace pointer");

  // What the arch's tensor cores offer (kernels/attention_family.hpp, the arch table): valid requests
  // this device cannot serve.
  const kernels::ArchInfo& ai = kernels::arch_info(arch);
  if (bits == 4 && !ai.int4)
    throw Error(ErrorCode::Unsupported, std::string("params.qk_bits=4: ") + ai.name + " (" + ai.gpus +
                                            ") has no INT4 tensor-core mma; use 8-bit QK (the default)");
  if (params.pv_precision == PvPrecision::Fp8 && !ai.fp8_pv)
    throw Error(ErrorCode::Unsupported, std::string("params.pv_precision=fp8: ") + ai.name + " (" + ai.gpus +
                                            ") has no FP8 tensor cores (sm_89 and newer); use Fp16 or Auto");
  if (params.pv_accum == PvAccum::Fp16 && !ai.pv_acc16)
    throw Error(ErrorCode::Unsupported,
                std::string("params.pv_accum=fp16: ") + ai.name + " (" + ai.gpus +
                    ") accumulates P̃V in fp32 only; fp16 accumulation runs on the mma.sync paths of sm_80/86/87 "
                    "(FP16 P̃V) and sm_89/100/103/120/121 (FP8 or FP16 P̃V) — use Fp32 or Auto, or "
                    "SAGE2_TARGET_ARCH=sm_89 to run the Ada path as PTX");

  AttentionProblem p;
  static_cast<kernels::ProblemShape&>(p) = {q.batch, q.heads, k.heads, q.seq, k.seq, static_cast<int>(q.dim)};
  p.dtype = q.dtype;
  p.causal = params.causal;
  p.qk_bits = bits != 0 ? bits : kernels::default_qk_bits(arch);
  p.pv_fp16 = kernels::resolve_pv_fp16(arch, params.pv_precision);
  p.pv_acc16 = kernels::resolve_pv_acc16(arch, p.pv_fp16, params.pv_accum);
  p.smooth_q = params.smooth_q == Toggle::Auto ? p.qk_bits == 4 : params.smooth_q == Toggle::On;
  p.smooth_k = params.smooth_k;
  p.smooth_v = params.smooth_v;
  p.sm_scale = params.sm_scale ? *params.sm_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.dim)));
  p.return_lse = params.lse != nullptr;
  p.mask = mask_type;
  p.mask_per_batch = mask_type != 0 && mk.stride_batch != 0 && q.batch > 1;
  p.mask_per_head = mask_type != 0 && mk.stride_head != 0 && q.heads > 1;
  p.direct = choose_direct_path(p, params.small_q_path, arch);
  return p;
}

AttentionProblem validate_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& out, const SeqLens& lens, const AttentionParams& params,
                                           kernels::Arch arch) {
  const bool packed = lens.cu_seqlens_q || lens.cu_seqlens_k;
  if (packed && (!lens.cu_seqlens_q || !lens.cu_seqlens_k))
    fail(std::string("lens: cu_seqlens_q and cu_seqlens_k go together (cu_seqlens_") +
         (lens.cu_seqlens_q ? "k" : "q") + " is null)");
  if (packed && lens.kv_lens) fail("lens: kv_lens (key padding) cannot be combined with cu_seqlens (packed)");
  if (!packed && !lens.kv_lens)
    fail("lens: give cu_seqlens_q and cu_seqlens_k (packed sequences) or kv_lens (key padding)");
  for (const std::int32_t* a : {lens.cu_seqlens_q, lens.cu_seqlens_k, lens.kv_lens})
    if (a && reinterpret_cast<std::uintptr_t>(a) % 4 != 0) fail("lens: an int32 array pointer is not 4-byte aligned");
  if (lens.batch < 1) fail("lens.batch=" + std::to_string(lens.batch) + " must be at least 1");
  if (lens.max_seqlen_q < 0 || lens.max_seqlen_k < 0)
    fail("lens: max_seqlen_q=" + std::to_string(lens.max_seqlen_q) + ", max_seqlen_k=" +
         std::to_string(lens.max_seqlen_k) + " must be >= 0");
  if (packed && (q.batch != 1 || out.batch != 1 || k.batch != 1 || v.batch != 1))
    fail("packed varlen: q, k, v and out must be views with batch 1 of the packed [total, heads, dim] tensors, got "
         "batch q " + std::to_string(q.batch) + ", k " + std::to_string(k.batch) + ", v " + std::to_string(v.batch) +
         ", out " + std::to_string(out.batch));
  if (!packed && lens.batch != q.batch)
    fail("key padding: lens.batch=" + std::to_string(lens.batch) + " must equal q batch " + std::to_string(q.batch));
  if (params.mask.type != MaskType::None)
    fail(std::string("params.mask (") + mask_type_name(params.mask.type) +
         ") cannot be combined with varlen; give key padding as lens.kv_lens");
  if (params.smooth_q == Toggle::On)
    fail("params.smooth_q=On is not supported with varlen (smooth-Q's ΔS has no per-sequence layout)");
  if (params.small_q_path == SmallQPath::Direct)
    fail("params.small_q_path=direct is not supported with varlen (the direct path takes dense calls)");
  AttentionParams dense = params;
  dense.smooth_q = Toggle::Off;
  dense.small_q_path = SmallQPath::Quantized;
  AttentionProblem p = validate_attention(q, k, v, out, dense, arch);
  p.varlen = true;
  p.packed = packed;
  p.batch = lens.batch;
  p.total_q = packed ? q.seq : q.batch * q.seq;
  p.total_k = packed ? k.seq : k.batch * k.seq;
  constexpr std::int64_t kMaxTokens = (std::int64_t(1) << 31) - 1024;  // 32-bit offsets in the kernels
  if (p.total_q >= kMaxTokens || p.total_k >= kMaxTokens || lens.batch >= kMaxTokens)
    fail("varlen: " + std::to_string(p.total_q) + " query and " + std::to_string(p.total_k) + " key tokens in " +
         std::to_string(lens.batch) + " sequences; each must stay below 2^31 - 1024");
  if (packed) {
    p.q_len = lens.max_seqlen_q > 0 ? std::min(lens.max_seqlen_q, q.seq) : q.seq;
    p.kv_len = lens.max_seqlen_k > 0 ? std::min(lens.max_seqlen_k, k.seq) : k.seq;
  }
  return p;
}

}  // namespace sage2::plan
