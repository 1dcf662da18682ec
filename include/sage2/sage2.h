/* sage2 — C ABI. Every function returns a sage2_status; on failure the calling thread's
 * sage2_last_error() describes it (offending argument and value, kernel key, NVRTC log).
 * Status values equal sage2::ErrorCode and never change. */
#ifndef SAGE2_SAGE2_H
#define SAGE2_SAGE2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sage2_status {
  SAGE2_OK = 0,
  SAGE2_ERROR_INVALID_ARGUMENT = 1,
  SAGE2_ERROR_UNSUPPORTED = 2,
  SAGE2_ERROR_NO_DRIVER = 3,
  SAGE2_ERROR_DRIVER = 4,
  SAGE2_ERROR_COMPILE = 5,
  SAGE2_ERROR_NVRTC_MISSING = 6,
  SAGE2_ERROR_CACHE = 7,
  SAGE2_ERROR_OUT_OF_MEMORY = 8,
  SAGE2_ERROR_INTERNAL = 9
} sage2_status;

typedef struct sage2_context sage2_context;

/* Message of the last failed call on this thread ("" after a success). Valid until the next
 * sage2 call on this thread. */
const char* sage2_last_error(void);
/* Stable name of a status, e.g. "invalid_argument". */
const char* sage2_status_name(sage2_status s);

/* Library version string, e.g. "0.1.0". */
const char* sage2_version(void);
/* The source commit this libsage2 was built from (added in 0.1: additive): `git rev-parse HEAD` of
 * the source tree at build time (40 lowercase hex digits), followed by "-dirty" when tracked files
 * differed from that commit, or "unknown" when the sources were not a git checkout or git was
 * missing. A static string; never NULL. */
const char* sage2_build_commit(void);
/* Number of visible CUDA devices (0 without a driver). */
int sage2_device_count(void);

/* cache_dir may be NULL (environment default); disk_cache 0 disables the disk cache, any other
 * value leaves it to the environment (SAGE2_DISABLE_DISK_CACHE). Every other setting takes its
 * environment default; sage2_context_create_with_options sets them in code. */
sage2_status sage2_context_create(int device, const char* cache_dir, int disk_cache, sage2_context** out);

/* ---- context options (added in 0.1: additive, never changed) ------------------------------ */
/* A field holding SAGE2_FROM_ENV (or a NULL cache_dir) takes the value of its environment
 * variable when the context is created, else the built-in default; any other value wins over the
 * environment. The variables are listed in docs/deploying.md ("Environment variables"). */
#define SAGE2_FROM_ENV (-1)
typedef enum sage2_attention_family {
  SAGE2_FAMILY_AUTO = 0,  /* wgmma for 8-bit QK on sm_90a up to head dim 256, mma.sync otherwise */
  SAGE2_FAMILY_MMA = 1,
  SAGE2_FAMILY_WGMMA = 2  /* sm_90a only: refused at context creation elsewhere */
} sage2_attention_family;
typedef enum sage2_quant_path {
  SAGE2_QUANTIZE_SPLIT = 0, /* separate launches: channel statistics, K, V (and Q) */
  SAGE2_QUANTIZE_FUSED = 1,   /* one launch for the whole stage (device counters) */
  SAGE2_QUANTIZE_CLUSTER = 2, /* one launch, a thread-block cluster per (batch, kv head); sm_90+ */
  SAGE2_QUANTIZE_AUTO = 3,    /* the fastest measured */
  SAGE2_QUANTIZE_ONEPASS = 4  /* K and V in one cooperative launch, read from memory once */
} sage2_quant_path;

typedef struct sage2_context_options {
  const char* cache_dir; /* NULL: $SAGE2_CACHE_DIR, $XDG_CACHE_HOME/sage2, ~/.cache/sage2 */
  int32_t disk_cache;    /* 1 on, 0 off (compile in memory only); env: SAGE2_DISABLE_DISK_CACHE */
  int32_t family;        /* sage2_attention_family; env: SAGE2_ATTENTION_FAMILY (default auto) */
  int32_t quant_path;    /* sage2_quant_path; env: SAGE2_QUANT_PATH (default auto) */
  int32_t tuning;        /* 1 use the tuning database, 0 heuristic only; env: SAGE2_DISABLE_TUNING */
} sage2_context_options;
/* Set from C through the environment only (the struct above never changes): the target arch
 * (SAGE2_TARGET_ARCH) and using a root-owned, read-only kernel cache (SAGE2_CACHE_TRUST_ROOT=1;
 * C++: ContextOptions::cache_trust_root). */

/* Every field "from the environment": SAGE2_FROM_ENV, cache_dir NULL. */
void sage2_context_options_init(sage2_context_options* options);
/* options may be NULL (all from the environment). A value out of range, or an environment
 * variable holding an unknown value, is SAGE2_ERROR_INVALID_ARGUMENT naming it. */
sage2_status sage2_context_create_with_options(int device, const sage2_context_options* options,
                                               sage2_context** out);
/* Replaces every "from the environment" field of *options by the value a context created now
 * would use (the environment's, else the built-in default); needs no driver. The cache_dir it
 * writes stays valid until the next sage2_context_options_resolve call on this thread. */
sage2_status sage2_context_options_resolve(sage2_context_options* options);
/* The options a context uses (every field set). cache_dir stays valid while the context lives. */
sage2_status sage2_context_options_get(const sage2_context* ctx, sage2_context_options* options);

/* Log level of the whole process: 0 error, 1 warn, 2 info, 3 debug, or SAGE2_FROM_ENV to follow
 * SAGE2_LOG_LEVEL again (default warn). */
sage2_status sage2_set_log_level(int level);
/* (added in 0.1: additive) Where library notices go: each notice the log level lets through is
 * passed to `callback` (level 0 error .. 3 debug, the message without the "sage2 <level>: " prefix
 * or newline, valid only during the call, and `user`) instead of being written to stderr; NULL
 * restores stderr. Process-wide; the callback may run on any thread that calls into sage2 and must
 * not call sage2 itself. The Python binding routes notices to the `logging` logger "sage2". */
typedef void (*sage2_log_callback)(int level, const char* message, void* user);
sage2_status sage2_set_log_callback(sage2_log_callback callback, void* user);
sage2_status sage2_context_destroy(sage2_context* ctx);
/* Writes the device name and code target ("sm_90a") into caller buffers (NUL-terminated,
 * truncated to the given sizes). */
sage2_status sage2_context_device(const sage2_context* ctx, char* name, size_t name_size, char* arch,
                                  size_t arch_size);
/* (added in 0.1: additive) How the context's code is made: *ptx 1 when it is PTX JIT-compiled by
 * the driver (a GPU newer than sage2's arch table, an old NVRTC, SAGE2_TARGET_ARCH), the path its
 * calls get ("INT8 QK + FP16 P~V ..., mma family") and the note saying why PTX / another arch
 * ("" when native). Any pointer may be NULL; strings NUL-terminated and truncated to the sizes. */
sage2_status sage2_context_target(const sage2_context* ctx, int* ptx, char* path, size_t path_size, char* note,
                                  size_t note_size);

/* ---- facts for tools and bindings (added in 0.1: additive, never changed) --------------- */
/* Versions of the NVRTC library sage2 loads (0/0 when unusable) and of the CUDA driver
 * (cuDriverGetVersion, e.g. 13000; 0 without a driver). Each pointer may be NULL. */
sage2_status sage2_version_info(int* nvrtc_major, int* nvrtc_minor, int* driver_version);
/* The kernel cache directory this context reads and writes, NUL-terminated and truncated to
 * `size` bytes; "" when its disk cache is disabled. */
sage2_status sage2_context_cache_dir(const sage2_context* ctx, char* buf, size_t size);
/* The cache directory a context created with cache_dir NULL would use ($SAGE2_CACHE_DIR,
 * $XDG_CACHE_HOME/sage2, ~/.cache/sage2); "" when SAGE2_DISABLE_DISK_CACHE is set. Needs no
 * driver. Same buffer rules as above. */
sage2_status sage2_default_cache_dir(char* buf, size_t size);
/* Facts of the context's device; each pointer may be NULL. */
sage2_status sage2_context_device_props(const sage2_context* ctx, int* ordinal, int* sm_count,
                                        uint64_t* total_memory);

/* ---- kernel counts (added in 0.1: additive) ----------------------------------------------- */
/* Where kernels came from (sage2::KernelStats in sage2.hpp): compiled by NVRTC, loaded from the
 * disk cache, requests served by a kernel already held, kernels held now, and the compiles' wall
 * time. Per context, or for the whole process (every context, destroyed ones included; held now:
 * by the live ones). A call whose plan is cached asks for no kernel and counts nothing. */
typedef struct sage2_kernel_stats {
  int64_t compiled;
  int64_t disk_loads;
  int64_t memory_hits;
  int64_t loaded;
  double compile_seconds;
} sage2_kernel_stats;
/* ctx and out must not be NULL (SAGE2_ERROR_INVALID_ARGUMENT). */
sage2_status sage2_context_kernel_stats(const sage2_context* ctx, sage2_kernel_stats* out);
/* out must not be NULL; needs no driver. */
sage2_status sage2_process_kernel_stats(sage2_kernel_stats* out);

/* ---- NVRTC search (added in 0.1: additive) ------------------------------------------------ */
/* Adds a libnvrtc to try after $SAGE2_LIBNVRTC (and after those added before it), ahead of the
 * system's names; `rule` (may be NULL) is the reason shown by the info tools and in the
 * nvrtc_missing message. The Python binding adds the NVIDIA wheels next to the running torch.
 * Only before NVRTC is first loaded (first compile, sage2_version_info, sage2_nvrtc_library):
 * SAGE2_ERROR_UNSUPPORTED afterwards. */
sage2_status sage2_nvrtc_add_candidate(const char* path, const char* rule);
/* Loads NVRTC if that has not happened yet and writes the file that was loaded, the rule that
 * chose it and the candidates tried before it that failed (one "\n  candidate (rule): why" line
 * each; "" when the first one worked). NUL-terminated, truncated to the sizes; any buffer may be
 * NULL. SAGE2_ERROR_NVRTC_MISSING when none could be loaded: sage2_last_error() then lists every
 * candidate tried, in order, and why it failed. */
sage2_status sage2_nvrtc_library(char* path, size_t path_size, char* rule, size_t rule_size, char* passed_over,
                                 size_t passed_over_size);

/* ---- attention ------------------------------------------------------------------------- */
typedef enum sage2_dtype { SAGE2_DTYPE_F16 = 0, SAGE2_DTYPE_BF16 = 1 } sage2_dtype;
typedef enum sage2_causal {
  SAGE2_CAUSAL_NONE = 0,
  SAGE2_CAUSAL_TOP_LEFT = 1,     /* query i sees keys j <= i (torch SDPA's is_causal) */
  SAGE2_CAUSAL_BOTTOM_RIGHT = 2  /* query i sees keys j <= i + kv_len - q_len (FlashAttention) */
} sage2_causal;

/* A [batch, heads, seq, dim] view of device memory with element strides (stride_dim must be 1).
 * HND and NHD layouts are the same view with different strides. */
typedef struct sage2_tensor {
  const void* data;
  int32_t dtype; /* sage2_dtype */
  int64_t batch, heads, seq, dim;
  int64_t stride_batch, stride_head, stride_seq, stride_dim;
} sage2_tensor;

typedef enum sage2_pv_precision {
  SAGE2_PV_AUTO = 0,  /* FP16 where FP8 is unavailable (Ampere), else FP8 */
  SAGE2_PV_FP8 = 1,   /* P~V in FP8 e4m3 (sm_89 and newer) */
  SAGE2_PV_FP16 = 2   /* P~V in FP16 with fp32 accumulation (every arch; the mma.sync family) */
} sage2_pv_precision;

typedef enum sage2_pv_accum {
  SAGE2_PV_ACCUM_AUTO = 0,  /* the arch's default (sage2::PvAccum in sage2.hpp) */
  SAGE2_PV_ACCUM_FP32 = 1,  /* tensor cores accumulate P~V in fp32 */
  SAGE2_PV_ACCUM_FP16 = 2,  /* fp16 inside a KV tile, added into the fp32 O between tiles (mma.sync
                               family of sm_80/86/87 and sm_89/100/103/120/121; not sm_90a) */
  SAGE2_PV_ACCUM_PREFER_FP16 = 3  /* FP16 where offered, else FP32 */
} sage2_pv_accum;

typedef struct sage2_attention_params {
  int32_t causal;     /* sage2_causal */
  float sm_scale;     /* 0: 1/sqrt(head dim) */
  int32_t qk_bits;    /* 0 auto (8), 4 (Ampere, Ada, Hopper) or 8 */
  int32_t smooth_q;   /* 0 auto (on with 4-bit), 1 on, 2 off */
  int32_t smooth_k;   /* 1 on (default), 0 off */
  int32_t smooth_v;   /* 0 off (default), 1 on */
  float* lse;         /* optional fp32 [batch, q heads, q len] device memory, natural log */
  void* workspace;    /* optional device workspace (256-byte aligned) */
  size_t workspace_bytes;
  int32_t pv_precision; /* sage2_pv_precision, 0 auto (appended in 0.1: the struct grew by this
                           field; code built against an older sage2.h must be rebuilt) */
  int32_t small_q_path; /* sage2_small_q_path (added in 0.1, appended): 0 auto (default) */
  int32_t pv_accum;     /* sage2_pv_accum (appended): 0 auto (default) */
} sage2_attention_params;

/* Which path computes a call with few query rows (sage2::SmallQPath in sage2.hpp): AUTO takes
 * DIRECT for dense calls with head dim <= 256 and at most 512 (sm_90; 64 elsewhere) query rows
 * per kv head (q_len * q heads / kv heads), QUANTIZED otherwise; DIRECT computes attention from
 * the fp16/bf16 inputs without quantization (no masks, no varlen, head dim <= 512). */
typedef enum sage2_small_q_path {
  SAGE2_SMALL_Q_AUTO = 0,
  SAGE2_SMALL_Q_QUANTIZED = 1,
  SAGE2_SMALL_Q_DIRECT = 2
} sage2_small_q_path;

/* The defaults documented above. */
void sage2_attention_params_init(sage2_attention_params* params);
/* Contiguous views. */
sage2_tensor sage2_tensor_hnd(const void* data, sage2_dtype dtype, int64_t batch, int64_t heads, int64_t seq,
                              int64_t dim);
sage2_tensor sage2_tensor_nhd(const void* data, sage2_dtype dtype, int64_t batch, int64_t heads, int64_t seq,
                              int64_t dim);

/* out = attention(q, k, v) enqueued on `stream` (a CUstream / cudaStream_t; NULL = default).
 * params may be NULL (defaults). Bad input: SAGE2_ERROR_INVALID_ARGUMENT naming the argument,
 * nothing launched. */
sage2_status sage2_attention(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k, const sage2_tensor* v,
                             const sage2_tensor* out, const sage2_attention_params* params, void* stream);
/* Bytes of workspace sage2_attention needs for these arguments. */
sage2_status sage2_workspace_size(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                  const sage2_tensor* v, const sage2_tensor* out,
                                  const sage2_attention_params* params, size_t* bytes);

/* ---- variable-length batches (added in 0.1: additive, never changed) ---------------------------------- */
/* sage2::SeqLens in include/sage2/sage2.hpp documents the two forms (packed with cu_seqlens,
 * key padding with kv_lens), the LSE layouts and what happens with invalid arrays. Pointers are
 * int32 device memory; unused ones NULL. */
typedef struct sage2_seqlens {
  int64_t batch;
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* kv_lens;
  int64_t max_seqlen_q, max_seqlen_k; /* 0: unknown */
} sage2_seqlens;
sage2_status sage2_attention_varlen(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                    const sage2_tensor* v, const sage2_tensor* out, const sage2_seqlens* lens,
                                    const sage2_attention_params* params, void* stream);
sage2_status sage2_workspace_size_varlen(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                         const sage2_tensor* v, const sage2_tensor* out, const sage2_seqlens* lens,
                                         const sage2_attention_params* params, size_t* bytes);
/* ---- attention masks (added in 0.1: additive, never changed) ------------------------------ */
/* sage2::MaskRef in include/sage2/sage2.hpp documents the rules. */
typedef enum sage2_mask_type {
  SAGE2_MASK_NONE = 0,
  SAGE2_MASK_BOOL = 1, /* 1 byte, nonzero: the key takes part */
  SAGE2_MASK_F16 = 2,  /* additive, -inf masks out */
  SAGE2_MASK_BF16 = 3,
  SAGE2_MASK_F32 = 4
} sage2_mask_type;
typedef struct sage2_mask {
  const void* data;
  int32_t type; /* sage2_mask_type */
  int64_t stride_batch, stride_head, stride_q, stride_k; /* elements; 0 broadcasts */
} sage2_mask;
/* sage2_attention with a mask (NULL or type SAGE2_MASK_NONE: none). */
sage2_status sage2_attention_masked(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                    const sage2_tensor* v, const sage2_tensor* out, const sage2_mask* mask,
                                    const sage2_attention_params* params, void* stream);
sage2_status sage2_workspace_size_masked(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                         const sage2_tensor* v, const sage2_tensor* out, const sage2_mask* mask,
                                         const sage2_attention_params* params, size_t* bytes);

/* ---- tuning (added in 0.1: additive) ----------------------------------------------------- */
/* sage2::tune in sage2.hpp: times the candidate tiles of the selected specialisations on the
 * context's device and records the fastest in the tuning database beside the kernel cache.
 * Blocks until done (minutes for the default selection). */
typedef struct sage2_tune_options {
  const int32_t* head_dims;  /* NULL or n_head_dims 0: 64, 96, 128 */
  int32_t n_head_dims;
  int32_t dtype;             /* -1: f16 and bf16; else a sage2_dtype */
  int32_t causal;            /* -1: none and top-left; else a sage2_causal */
  int32_t qk_bits;           /* 0 auto (8), 4 or 8 */
  int32_t pv_precision;      /* sage2_pv_precision */
  const int64_t* seq_lens;   /* NULL or n_seq_lens 0: 1024, 4096, 16384 */
  int32_t n_seq_lens;
  int64_t batch;             /* 0: 16K tokens, 1 to 4 sequences */
  int64_t heads, kv_heads;   /* 32, 0 (= heads) */
  int32_t reps, warmup;      /* 20, 2 */
  double budget_seconds;     /* 1.0: measured time per candidate at most */
  double min_gain;           /* 0.02: a candidate replaces the heuristic tile when this much faster */
  int32_t write_db;          /* 1: write the tuning database */
  int32_t jobs;              /* 0: CPU count, at most 16 */
} sage2_tune_options;
typedef struct sage2_tune_summary {
  int32_t problems, written, failures, improved;
  double best_gain;
  int64_t kernels_compiled, kernels_from_cache, compile_errors;
} sage2_tune_summary;
/* The defaults documented above. */
void sage2_tune_options_init(sage2_tune_options* options);
/* options may be NULL (defaults); summary may be NULL; database (may be NULL) receives the
 * database file ("" when nothing was written), truncated to database_size. */
sage2_status sage2_tune(sage2_context* ctx, const sage2_tune_options* options, sage2_tune_summary* summary,
                        char* database, size_t database_size);

/* Warm-up (sage2::warmup): compiles or loads every kernel that calls with these options can load
 * on the context's device, at any sizes; afterwards such calls compile nothing (here, and from the
 * disk cache in later processes). Blocks until done. */
typedef struct sage2_warmup_options {
  const int32_t* head_dims;  /* NULL or n_head_dims 0: 64, 96, 128 */
  int32_t n_head_dims;
  int32_t dtype;             /* -1: f16 and bf16; else a sage2_dtype */
  int32_t causal;            /* -1: none and top-left; else a sage2_causal */
  int32_t qk_bits;           /* 0 auto (8), 4 or 8 */
  int32_t pv_precision;      /* sage2_pv_precision */
  int32_t return_lse;        /* -1: calls with and without LSE; 0 without; 1 with */
  uint32_t masks;            /* bit t set: calls with mask type t (sage2_mask_type); 0 or 1: unmasked only */
  int32_t varlen;            /* 1: also variable-length calls */
  int32_t pv_accum;          /* a sage2_pv_accum (0 auto) */
  int32_t smooth_q;          /* 0 auto, 1 on, 2 off (sage2_attention_params' convention) */
  int32_t smooth_k, smooth_v;  /* 1, 0 */
  int32_t small_q_path;      /* a sage2_small_q_path (0 auto) */
  int32_t jobs;              /* 0: CPU count, at most 16 */
} sage2_warmup_options;
typedef struct sage2_warmup_summary {
  int64_t kernels, compiled, from_cache;
  double seconds;
} sage2_warmup_summary;
/* The defaults documented above. */
void sage2_warmup_options_init(sage2_warmup_options* options);
/* options may be NULL (defaults); summary may be NULL. */
sage2_status sage2_warmup(sage2_context* ctx, const sage2_warmup_options* options, sage2_warmup_summary* summary);

#ifdef __cplusplus
}
#endif
#endif /* SAGE2_SAGE2_H */
