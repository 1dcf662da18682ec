// sage2 — SageAttention2 (quantized attention) compiled at run time by NVRTC.
// Public C++ API. The C ABI with the same capabilities is in sage2/sage2.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// CUstream and cudaStream_t are both pointers to this opaque type, so a stream from
// either API (or torch.cuda.current_stream().cuda_stream) can be passed directly.
struct CUstream_st;

namespace sage2 {

namespace runtime {
class ContextAccess;
}

// ---------------------------------------------------------------------------------------------
// Errors: every failure is a sage2::Error carrying a code and a message that names the offending
// values (and, for compile failures, the kernel key and the full NVRTC log).
// The numeric values are part of the C ABI (sage2_status in sage2.h) and never change.
enum class ErrorCode : int {
  Ok = 0,
  InvalidArgument = 1,   // a caller-supplied value is wrong (the message names it)
  Unsupported = 2,       // valid request this build/device cannot serve (e.g. arch sm_80)
  NoDriver = 3,          // libcuda.so.1 could not be loaded
  DriverError = 4,       // a CUDA driver call failed (message carries the driver's name/text)
  CompileError = 5,      // NVRTC rejected generated source (message carries key + log)
  NvrtcMissing = 6,      // libnvrtc could not be used
  CacheError = 7,        // the on-disk cache could not be used (normally only a warning)
  OutOfMemory = 8,       // device or workspace allocation failed
  Internal = 9,          // a bug in sage2
};

const char* error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// ---------------------------------------------------------------------------------------------
// Basic enums shared by the API, the kernels' specs and the CPU reference.
enum class DType : int { F16 = 0, BF16 = 1, F32 = 2 };
const char* dtype_name(DType t) noexcept;
std::size_t dtype_size(DType t) noexcept;

// Causal masking when q_len != kv_len:
//  TopLeft     — query i sees keys j <= i            (torch SDPA's is_causal)
//  BottomRight — query i sees keys j <= i + kv_len - q_len   (FlashAttention >= 2.1)
// Default is TopLeft, matching torch.nn.functional.scaled_dot_product_attention.
enum class CausalMode : int { None = 0, TopLeft = 1, BottomRight = 2 };
const char* causal_mode_name(CausalMode m) noexcept;

enum class QkBits : int { Auto = 0, Int4 = 4, Int8 = 8 };
enum class Toggle : int { Auto = 0, On = 1, Off = 2 };
// Precision of the P̃V product. Fp8: P̂ = e4m3(448·P̃), V̂ per-channel e4m3 (tensor-core FP8,
// the fastest; sm_89 and newer). Fp16: P̂ = fp16(P̃), V̂ = fp16(V − μ), fp32 accumulation (about 2×
// smaller error; the mma.sync family on every arch, so on sm_90a it leaves the wgmma family).
// Auto: Fp16 where FP8 is unavailable (Ampere, sm_80/86/87), else Fp8.
enum class PvPrecision : int { Auto = 0, Fp8 = 1, Fp16 = 2 };
const char* pv_precision_name(PvPrecision p) noexcept;  // "auto", "fp8", "fp16"
// Accumulation of the P̃V product (SageAttention2++). Fp32: the tensor cores accumulate in fp32.
// Fp16: they accumulate in fp16 inside a KV tile (at most 64 keys), and each tile's sum is added
// into the fp32 O between tiles (the reference's "fp32+fp16" with FP8 P̃V, "fp16+fp32" with FP16
// P̃V): twice the tensor rate where fp32 accumulation runs at half rate (GeForce cards), a little
// less accurate (V̂ is scaled to |V̂| <= 2.25 so that a tile's fp16 sum cannot overflow: FP8 P̃V).
// Offered on the mma.sync family of sm_80/86/87 (FP16 P̃V) and sm_89/100/103/120/121 (FP8 or FP16
// P̃V); not on sm_90a (Unsupported: fp32 only there; SAGE2_TARGET_ARCH=sm_89 runs the Ada path).
// Auto: the arch's default (docs/gpu-coverage.md; kernels/arch.cpp). PreferFp16: Fp16 where it
// is offered, Fp32 elsewhere (what the reference's fp16-accumulator values map to: portable code).
enum class PvAccum : int { Auto = 0, Fp32 = 1, Fp16 = 2, PreferFp16 = 3 };
const char* pv_accum_name(PvAccum a) noexcept;  // "auto", "fp32", "fp16", "prefer_fp16"

// Which path computes a call with few query rows (AttentionParams::small_q_path).
//  Quantized — the SageAttention2 path: quantize Q, K and V, then 8/4-bit attention.
//  Direct    — no quantization: split-KV attention straight from the fp16/bf16 Q, K and V
//              (mma.sync f16/bf16 with fp32 accumulation, P rounded to the input dtype), then a
//              merge of the splits. Re-quantizing all of K and V cannot pay when only a few query
//              rows read them (decode). Head dims up to 512; no masks, no varlen; the
//              quantization options (qk_bits, smooth_q/k/v) do not apply to it. Accuracy: the
//              fp16/bf16 contract of FlashAttention (rel-L1 ~1e-3 fp16, ~5e-3 bf16 vs fp64),
//              tighter than the 8-bit one.
//  Auto      — Direct for dense calls (no mask, no varlen) with head dim <= 256 where it measured
//              faster, with R = q_len · q_heads / kv_heads query rows per kv head: on sm_90 R <= 160,
//              or R <= 256 over kv_len >= 2R keys, or a small call (batch · q_heads · q_len ·
//              kv_len · head_dim <= 2e9), and always R <= 512; elsewhere R <= 64
//              (plan/direct_rule.hpp); Quantized otherwise.
enum class SmallQPath : int { Auto = 0, Quantized = 1, Direct = 2 };
const char* small_q_path_name(SmallQPath p) noexcept;  // "auto", "quantized", "direct"

// ---------------------------------------------------------------------------------------------
// A rank-4 tensor view [batch, heads, seq, dim] with element strides. HND and NHD layouts are
// the same view with different strides; the last dim must be contiguous (stride_dim == 1).
struct TensorRef {
  const void* data = nullptr;
  DType dtype = DType::F16;
  std::int64_t batch = 0, heads = 0, seq = 0, dim = 0;
  std::int64_t stride_batch = 0, stride_head = 0, stride_seq = 0, stride_dim = 1;

  // Contiguous [batch, heads, seq, dim] (HND).
  static TensorRef hnd(const void* data, DType dtype, std::int64_t batch, std::int64_t heads,
                       std::int64_t seq, std::int64_t dim);
  // Contiguous [batch, seq, heads, dim] (NHD).
  static TensorRef nhd(const void* data, DType dtype, std::int64_t batch, std::int64_t heads,
                       std::int64_t seq, std::int64_t dim);
  std::int64_t numel() const { return batch * heads * seq * dim; }
};

// ---------------------------------------------------------------------------------------------
// An attention mask: a view of device memory broadcastable to [batch, q heads, q len, kv len] —
// element (b, h, i, j) at data + (b·stride_batch + h·stride_head + i·stride_q + j·stride_k)
// elements, a stride of 0 broadcasting its dim (torch's expand). Bool (1 byte): nonzero = the key
// takes part (torch SDPA's rule). Additive (f16, bf16, f32): added to the scaled score, -inf
// masks the key out (a NaN makes the row NaN, as in torch). Masked-out keys take no part in the
// row's max, sum or P̂; a row that sees no key gets O = 0 and LSE = -inf. Tiles of the mask with
// nothing visible before the first or after the last visible one of a query block are neither
// loaded nor computed; between visible ones, a tile with nothing visible (and a constant additive
// tile that provably adds exactly 0) is skipped by the wgmma family's serial loop, computed as
// masked without reading elements elsewhere. An additive value whose scaled value overflows fp32 (below about -2.4e38, the lowest
// bf16/f32 values) counts as -inf. Not with varlen calls (give key padding as SeqLens::kv_lens).
enum class MaskType : int { None = 0, Bool = 1, F16 = 2, BF16 = 3, F32 = 4 };
const char* mask_type_name(MaskType t) noexcept;  // "none", "bool", "f16", "bf16", "f32"
struct MaskRef {
  const void* data = nullptr;
  MaskType type = MaskType::None;
  std::int64_t stride_batch = 0, stride_head = 0, stride_q = 0, stride_k = 0;
};

// ---------------------------------------------------------------------------------------------
// Options of one attention call.
struct AttentionParams {
  CausalMode causal = CausalMode::None;
  std::optional<float> sm_scale;   // default 1/sqrt(head_dim)
  QkBits qk_bits = QkBits::Auto;   // Auto: 8 on every arch; Int4 only where the arch has INT4 mma
                                   // (Ampere, Ada; emulated on Hopper; not on Blackwell)
  Toggle smooth_q = Toggle::Auto;  // Auto: on with 4-bit, off with 8-bit
  PvPrecision pv_precision = PvPrecision::Auto;  // P̃V in FP8 or FP16 (PvPrecision above)
  PvAccum pv_accum = PvAccum::Auto;  // P̃V accumulated in fp32, or fp16 inside a tile (PvAccum above)
  bool smooth_k = true;
  bool smooth_v = false;
  // Optional: the log-sum-exp of the (un-smoothed) scaled scores, natural log, fp32,
  // contiguous [batch, q_heads, q_len], device memory. Rows with no visible key get -inf.
  float* lse = nullptr;
  // Optional caller workspace (device memory, >= workspace_size() bytes, 256-byte aligned).
  // Without it the Context's pool (one buffer per stream, grown on demand) is used.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Optional attention mask (MaskRef above); type None: no mask.
  MaskRef mask;
  // Quantized or direct computation of calls with few query rows (SmallQPath above).
  SmallQPath small_q_path = SmallQPath::Auto;
};

// ---------------------------------------------------------------------------------------------
// Variable-length batches: B sequences of their own lengths in one call. Two forms:
//  Packed (FlashAttention's varlen): cu_seqlens_q and cu_seqlens_k set; q and out are views with
//    batch 1 of the packed [total_q, Hq, d] tensors (TensorRef::nhd(data, dtype, 1, Hq, total_q, d)),
//    k and v of [total_k, Hkv, d]. Sequence b holds tokens [cu[b], cu[b+1]) of each.
//  Key padding: both null, kv_lens set; q [B, Hq, Nq, d] and k, v [B, Hkv, Nk, d] as for
//    attention(); query rows of batch b see keys [0, kv_lens[b]) only.
// The arrays are int32 device memory, read on the device (no host synchronisation, so new
// lengths of the same totals replay in a CUDA graph). cu arrays have B + 1 entries with cu[0] = 0,
// never decreasing, cu[B] <= the tensor's token count (rows after cu[B] are not written);
// 0 <= kv_lens[b] <= Nk. Lengths 0 and 1 are valid. Arrays that break these rules are found on
// the device: then every output element (and LSE) is NaN and nothing else runs.
// Everything a sequence's quantization shares (Q/K groups, the K mean of smooth-K, V's channel
// scales and mean) is computed over that sequence alone; causal masks apply per sequence
// (BottomRight: j <= i + len_k - len_q of the sequence). LSE (optional, fp32): packed [Hq, total_q];
// key padding [B, Hq, Nq]. Not supported with varlen: smooth-Q (4-bit QK uses no smoothing of Q
// here) and the fused/cluster quantize paths (auto resolves to split).
struct SeqLens {
  std::int64_t batch = 0;                       // B, the number of sequences (>= 1)
  const std::int32_t* cu_seqlens_q = nullptr;   // packed: [B + 1]
  const std::int32_t* cu_seqlens_k = nullptr;   // packed: [B + 1]
  const std::int32_t* kv_lens = nullptr;        // key padding: [B]
  // Upper bounds of the sequence lengths, used to choose the tile (0: the tensor's token count).
  // A sequence longer than its bound is still computed correctly.
  std::int64_t max_seqlen_q = 0, max_seqlen_k = 0;
};

// ---------------------------------------------------------------------------------------------
// Configuration. Each setting has one SAGE2_* environment variable that gives its default; a value
// set in code wins over the environment. docs/deploying.md ("Environment variables") lists them all.

// The attention kernel family. Auto: wgmma for 8-bit QK with FP8 P̃V on sm_90a up to head dim
// 256, mma.sync otherwise. Wgmma on a device that is not sm_90a is refused when the Context is created.
enum class AttentionFamily : int { Auto = 0, Mma = 1, Wgmma = 2 };
const char* attention_family_name(AttentionFamily f) noexcept;  // "auto", "mma", "wgmma"

// The quantize stage. Split: separate launches (channel statistics, K, V, and Q where the attention
// kernel does not quantize Q itself). OnePass: K and V in one launch of the split kernels' items,
// the codes of a group following its statistics closely enough to re-read K and V from L2 rather
// than DRAM (dense calls: varlen calls take the split path). Fused: one launch for the whole stage, CTAs
// handing statistics over through device counters (measured slower on the H100: bench/NOTES.md,
// "Fused quantize stage"). Cluster: one launch, one thread-block cluster per (batch, kv head)
// exchanging the K/V statistics in distributed shared memory (sm_90 and newer). These four give the
// same numbers. Auto: the fastest measured (docs/performance.md): the split launches, and for
// dense calls k̄, μ and V's scales from a sample of KV tiles with headroom (docs/numerics.md,
// "Sampled statistics") — another rounding of the same algorithm, within the same accuracy.
enum class QuantPath : int { Split = 0, Fused = 1, Cluster = 2, Auto = 3, OnePass = 4 };
const char* quant_path_name(QuantPath p) noexcept;  // "split", "fused", "cluster", "auto", "onepass"

// Options of one Context. A field left unset (nullopt, or an empty cache_dir) takes the value of
// its environment variable, read when the Context is created, else the built-in default.
struct ContextOptions {
  // false: compile in memory only; never read or write the disk cache (nor the tuning database).
  // Unset: off when SAGE2_DISABLE_DISK_CACHE is 1/true/yes/on, else on.
  std::optional<bool> disk_cache;
  // Kernel cache and tuning database directory. Empty: $SAGE2_CACHE_DIR, else
  // $XDG_CACHE_HOME/sage2, else ~/.cache/sage2.
  std::string cache_dir;
  // Unset: $SAGE2_ATTENTION_FAMILY (auto | mma | wgmma), else Auto.
  std::optional<AttentionFamily> family;
  // Unset: $SAGE2_QUANT_PATH (auto | split | onepass | fused | cluster), else Auto.
  std::optional<QuantPath> quant_path;
  // false: always the heuristic tile, never the tuning database. Unset: off when
  // SAGE2_DISABLE_TUNING is 1/true/yes/on, else on.
  std::optional<bool> tuning;
  // Generate code for this arch of the table ("sm_80", "sm_86", "sm_89", "sm_90a", "sm_100",
  // "sm_120", ...) instead of the device's: PTX for its virtual architecture, JIT-compiled by the
  // driver — to run the Ampere or Ada/Blackwell paths on a newer GPU (validation). The Context
  // refuses (Unsupported) a target the device cannot run (a newer arch; sm_90a off compute
  // capability 9.0). Empty: $SAGE2_TARGET_ARCH, else the device's own target (DeviceInfo::arch).
  std::string target_arch;
  // true: also load kernels from a cache folder and entries owned by root (uid 0) that no one else
  // can write — a read-only cache an administrator installed for a fleet. The cache folder and
  // entries of the current user are always used; those of another user, or writable by group or
  // others, never (a cubin planted there would run inside this process). Unset: on when
  // SAGE2_CACHE_TRUST_ROOT is 1/true/yes/on, else off. From C: SAGE2_CACHE_TRUST_ROOT.
  std::optional<bool> cache_trust_root;
  // true: a call whose optimized kernels are neither loaded nor in the disk cache runs quick
  // kernels, compiled as fast as NVRTC can (in memory only, by the sage2-jit-worker program beside
  // the library, or $SAGE2_JIT_WORKER; without one, calls wait), while the optimized ones compile
  // on a background thread; the Context's later calls of that shape use them once they are ready.
  // The quick kernels are the call's own specialisation's (same tiles, possibly other last bits),
  // or, for a dense unmasked call at head dim <= 512 that runs quantized, the direct path's
  // (unquantized: its first results differ by the quantization error; workspace_size() then covers
  // both). No call waits for the background compile; a CUDA graph captured with the quick kernels
  // keeps running them (they stay loaded while the Context lives); destroying the Context waits for
  // a compile in flight. false: every call waits for the optimized kernels (deterministic
  // deployments and benchmarks: the early calls of a new shape differ from the later ones). Unset:
  // SAGE2_TIERED_COMPILE (1/true/yes/on: on; any other value: off), and on when that is unset too.
  // From C: SAGE2_TIERED_COMPILE. With cold compile caches it cuts an H200 host's first call at a
  // new head dim from 1.2–2.1 s to 0.20–0.31 s at hd 72–320; the optimized kernels (compiled
  // beside the quick ones from the start) serve from 1.1–3.1 s (docs/deploying.md).
  std::optional<bool> tiered_compile;
};

// The options a Context created now with `options` would use: every unset field filled from the
// environment, else the built-in default (so every field is set). Throws InvalidArgument when an
// environment variable it needs holds an unknown value (SAGE2_ATTENTION_FAMILY=foo).
ContextOptions resolve_context_options(const ContextOptions& options = {});

// Log messages at least as severe as the level go to stderr. The level: $SAGE2_LOG_LEVEL (error |
// warn | info | debug), else Warn. set_log_level() overrides the environment for the whole process
// (logging is process-wide: much of it happens where no Context is at hand); nullopt returns to it.
enum class LogLevel : int { Error = 0, Warn = 1, Info = 2, Debug = 3 };
void set_log_level(std::optional<LogLevel> level) noexcept;
LogLevel log_level() noexcept;  // the level in effect now

// ---------------------------------------------------------------------------------------------
// A Context binds sage2 to one CUDA device. If the calling thread has a current CUDA context on
// that device (e.g. PyTorch's), sage2 uses it; otherwise it retains the device's primary
// context. Kernels are compiled (or loaded from the disk cache) on first use and kept per
// Context. A Context may be used from several threads at once.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string arch;           // the code target sage2 uses: "sm_80" ... "sm_90a" ... "sm_121"
  bool ptx = false;           // the code is PTX for arch's virtual architecture, JIT-compiled by the
                              // driver (a GPU newer than the table, an old NVRTC, target_arch)
  std::string path;           // what it runs, e.g. "INT8 QKᵀ (INT4 opt-in) + FP16 P̃V ..., mma family"
  std::string target_note;    // why PTX / another arch than the device's ("" when native)
  int sm_count = 0;
  std::size_t total_memory = 0;
};

// Where the kernels came from (issue 43): counts of one Context (Context::kernel_stats) or of the
// whole process (process_kernel_stats: every Context, destroyed ones included). The compile phases
// of sage2::tune and sage2::warmup, which build kernels straight into the disk cache, are not
// counted as compiles — TuneSummary / WarmupSummary report them; what they then load counts as
// disk loads. A call whose plan is cached asks for no kernel and counts nothing.
struct KernelStats {
  std::int64_t compiled = 0;     // kernels compiled by NVRTC (neither in memory nor in the disk cache)
  std::int64_t disk_loads = 0;   // kernels loaded from the disk cache
  std::int64_t memory_hits = 0;  // kernel requests served by a kernel the Context already held
  std::int64_t loaded = 0;       // kernels held now: by this Context / by the live Contexts
  double compile_seconds = 0;    // wall time of those compiles (NVRTC + ptxas)
};

class Context {
 public:
  // Throws NoDriver (no libcuda), InvalidArgument (bad ordinal), Unsupported (arch).
  explicit Context(int device = 0, ContextOptions options = {});
  ~Context();
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& device() const;

  // out = softmax(q·kᵀ·sm_scale [causal mask]) · v, computed the SageAttention2 way (calls with few
  // query rows per kv head: without quantization, see SmallQPath), enqueued on `stream` (nullptr =
  // the legacy default stream). q [B, Hq, Nq, d], k and v [B, Hkv, Nk, d],
  // out [B, Hq, Nq, d] in the input dtype; Hq a multiple of Hkv (GQA/MQA); d in 1..512.
  // No host synchronisation; after a first call of the same shape no allocation either, so
  // the call can be captured in a CUDA graph. Bad input throws InvalidArgument naming the
  // argument and its value, and nothing is launched.
  void attention(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                 const AttentionParams& params = {}, CUstream_st* stream = nullptr);
  // Variable-length batches (SeqLens above). Same rules and errors as attention().
  void attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                        const SeqLens& lens, const AttentionParams& params = {}, CUstream_st* stream = nullptr);
  std::size_t workspace_size_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                                    const SeqLens& lens, const AttentionParams& params = {}) const;
  // Bytes of workspace attention() needs for these arguments. With the tiered compile a new call
  // may start on the direct path (its quick first tier): then the larger of the two paths' needs,
  // until the optimized plan serves the call (the answer never grows for the same arguments).
  std::size_t workspace_size(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                             const TensorRef& out, const AttentionParams& params = {}) const;
  const std::string& cache_dir() const;  // empty when the disk cache is disabled
  // The options in effect (resolve_context_options() of those given, at construction).
  const ContextOptions& options() const;
  // This Context's kernel counts (KernelStats above); never throws.
  KernelStats kernel_stats() const noexcept;

  class Impl;  // internal: runtime/context_impl.hpp

 private:
  friend class runtime::ContextAccess;  // the library's, tools' and tests' way to the internals
  Impl* impl_;
};

// Number of CUDA devices visible (0 without a driver; never throws).
int device_count() noexcept;
// The kernel counts of the whole process (KernelStats above); needs no driver.
KernelStats process_kernel_stats() noexcept;

// ---------------------------------------------------------------------------------------------
// Tuning (what sage2-autotune does, as a call): for each selected specialisation (head dim ×
// dtype × causal mode, with the code width and P̃V precision given) compiles the candidate tiles
// of its family, times them on the Context's device at each sequence length (square problems,
// fresh inputs, the heuristic default first) and records the fastest in the tuning database
// beside the kernel cache, which Contexts on this device then read (ContextOptions::tuning). The
// heuristic default stays unless a candidate is more than min_gain faster. Blocks until done;
// minutes for the default selection. Needs a disk cache to write anything.
struct TuneOptions {
  std::vector<int> head_dims = {64, 96, 128};
  std::vector<DType> dtypes = {DType::F16, DType::BF16};
  std::vector<CausalMode> causal = {CausalMode::None, CausalMode::TopLeft};
  int qk_bits = 0;                           // 0: the arch's default (8)
  PvPrecision pv_precision = PvPrecision::Auto;
  std::vector<std::int64_t> seq_lens = {1024, 4096, 16384};
  std::int64_t batch = 0;                    // 0: 16K tokens, 1 to 4 sequences
  std::int64_t heads = 32, kv_heads = 0;     // kv_heads 0: heads
  int reps = 20, warmup = 2;                 // timed calls per candidate at most; untimed first
  double budget_seconds = 1.0;               // measured time per candidate at most
  double min_gain = 0.02;
  bool write_db = true;
  int jobs = 0;                              // parallel compiles (0: CPU count, at most 16)
};
struct TuneSummary {
  int problems = 0;          // (specialisation, sequence length) pairs measured
  int written = 0;           // database entries written
  int failures = 0;          // problems without a result, failed database writes
  int improved = 0;          // problems where a candidate beat the heuristic default
  double best_gain = 0;      // the largest of those gains (0.1 = 10 % more TOPS)
  std::size_t kernels_compiled = 0, kernels_from_cache = 0, compile_errors = 0;
  std::string database;      // the database file ("" when nothing was written)
  // One line per problem: specialisation, sequence length, best and heuristic tile, their TOPS.
  std::vector<std::string> lines;
};
// Throws what creating the timing buffers throws (OutOfMemory), DriverError when the GPU fails;
// a candidate that fails to compile or run is recorded (failures, compile_errors), not thrown.
TuneSummary tune(Context& ctx, const TuneOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Warm-up: compiles (or loads from the disk cache) every kernel that attention calls with these
// options can load on the Context's device — at any batch, head count, GQA group and sequence
// lengths, dense, masked or varlen as selected, decode-sized calls (the direct path) included, with
// the Context's settings and tuning database — and loads them into the Context. Afterwards such
// calls compile nothing, in this process and, from the disk cache, in later ones (and on machines
// that import the cache: sage2-cache export / import). sage2-autotune and Python's sage2.warmup
// compile the same set for the same selection. Blocks until done.
struct WarmupOptions {
  std::vector<int> head_dims = {64, 96, 128};
  std::vector<DType> dtypes = {DType::F16, DType::BF16};
  std::vector<CausalMode> causal = {CausalMode::None, CausalMode::TopLeft};
  std::vector<QkBits> qk_bits = {QkBits::Auto};
  std::vector<PvPrecision> pv_precision = {PvPrecision::Auto};
  std::vector<bool> return_lse = {false};          // calls without / with an LSE output
  std::vector<MaskType> masks = {MaskType::None};  // None: unmasked calls
  bool varlen = false;                             // also variable-length calls (sage2::SeqLens)
  PvAccum pv_accum = PvAccum::Auto;                // as AttentionParams
  Toggle smooth_q = Toggle::Auto;
  bool smooth_k = true, smooth_v = false;
  SmallQPath small_q_path = SmallQPath::Auto;
  int jobs = 0;                                    // parallel compiles (0: CPU count, at most 16)
};
struct WarmupSummary {
  std::size_t kernels = 0;                   // the kernels the selection needs here (all loaded)
  std::size_t compiled = 0, from_cache = 0;  // how they were found
  double seconds = 0;
  std::string selection;                     // the selection, in words
  std::vector<std::string> left_out;         // why combinations of the lists run nowhere here
};
// Throws InvalidArgument for empty lists or values out of range, CompileError when a kernel fails.
WarmupSummary warmup(Context& ctx, const WarmupOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Library-wide facts.
struct VersionInfo {
  std::string library;      // e.g. "0.1.0"
  int nvrtc_major = 0, nvrtc_minor = 0;  // 0/0 when libnvrtc is unusable
  int driver_version = 0;   // cuDriverGetVersion, 0 when no driver was found
};
VersionInfo version_info();
// The source commit the library was built from: 40 hex digits, optionally followed by "-dirty"
// (tracked files differed from it), or "unknown" (no git checkout or no git at build time). The
// same string as sage2_build_commit() in sage2.h; needs no driver.
std::string build_commit();

}  // namespace sage2
