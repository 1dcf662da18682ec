// The C ABI: catches every exception at the boundary and turns it into a status + message.
#include "sage2/sage2.h"

#include <cstring>
#include <new>
#include <string>

#include "jit/nvrtc_library.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/c_api_internal.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "sage2/sage2.hpp"
// Generated at every build by cmake/build_commit.cmake (defines SAGE2_BUILD_COMMIT). This is its
// only includer, so a new commit recompiles this one file; sage2::build_commit() lives here too.
#include "sage2_build_commit.h"

namespace sage2 {
std::string build_commit() { return SAGE2_BUILD_COMMIT; }
}  // namespace sage2

namespace sage2::runtime::c_abi {
std::string& last_error() {
  thread_local std::string e;
  return e;
}

void copy_out(const std::string& s, char* dst, size_t n) {
  if (!dst || n == 0) return;
  const size_t k = s.size() < n - 1 ? s.size() : n - 1;
  std::memcpy(dst, s.data(), k);
  dst[k] = '\0';
}
}  // namespace sage2::runtime::c_abi

namespace {
using sage2::runtime::c_abi::copy_out;
using sage2::runtime::c_abi::guarded;
using sage2::runtime::c_abi::require;
// Options in C: SAGE2_FROM_ENV (or a NULL cache_dir) leaves a field unset, so the environment
// gives it; anything else outside the enum is the caller's mistake and is named.
sage2::ContextOptions to_cpp(const sage2_context_options* o) {
  sage2::ContextOptions r;
  if (!o) return r;
  auto in = [](int32_t v, int32_t max, const char* name) {
    if (v != SAGE2_FROM_ENV && (v < 0 || v > max))
      throw sage2::Error(sage2::ErrorCode::InvalidArgument, std::string("options.") + name + "=" + std::to_string(v) +
                                                                " (SAGE2_FROM_ENV or 0.." + std::to_string(max) + ")");
    return v != SAGE2_FROM_ENV;
  };
  if (o->cache_dir) r.cache_dir = o->cache_dir;
  if (in(o->disk_cache, 1, "disk_cache")) r.disk_cache = o->disk_cache == 1;
  if (in(o->family, 2, "family")) r.family = static_cast<sage2::AttentionFamily>(o->family);
  if (in(o->quant_path, 4, "quant_path")) r.quant_path = static_cast<sage2::QuantPath>(o->quant_path);
  if (in(o->tuning, 1, "tuning")) r.tuning = o->tuning == 1;
  return r;
}

// Resolved options (every field set) in C; cache_dir points into `resolved`.
void to_c(const sage2::ContextOptions& resolved, sage2_context_options* o) {
  o->cache_dir = resolved.cache_dir.c_str();
  o->disk_cache = resolved.disk_cache.value() ? 1 : 0;
  o->family = static_cast<int32_t>(resolved.family.value());
  o->quant_path = static_cast<int32_t>(resolved.quant_path.value());
  o->tuning = resolved.tuning.value() ? 1 : 0;
}

void to_c(const sage2::KernelStats& k, sage2_kernel_stats* out) {
  out->compiled = k.compiled;
  out->disk_loads = k.disk_loads;
  out->memory_hits = k.memory_hits;
  out->loaded = k.loaded;
  out->compile_seconds = k.compile_seconds;
}

thread_local sage2::ContextOptions g_resolved;  // what sage2_context_options_resolve's cache_dir points into

}  // namespace

extern "C" {

const char* sage2_last_error(void) { return sage2::runtime::c_abi::last_error().c_str(); }

const char* sage2_status_name(sage2_status s) {
  return sage2::error_code_name(static_cast<sage2::ErrorCode>(s));
}

const char* sage2_version(void) { return SAGE2_VERSION; }

const char* sage2_build_commit(void) { return SAGE2_BUILD_COMMIT; }

int sage2_device_count(void) { return sage2::device_count(); }

sage2_status sage2_context_create(int device, const char* cache_dir, int disk_cache, sage2_context** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    sage2::ContextOptions o;
    if (disk_cache == 0) o.disk_cache = false;  // 1 has always meant "unless the environment disables it"
    if (cache_dir) o.cache_dir = cache_dir;
    *out = new sage2_context{sage2::Context(device, o)};
  });
}

void sage2_context_options_init(sage2_context_options* o) {
  if (!o) return;
  o->cache_dir = nullptr;
  o->disk_cache = o->family = o->quant_path = o->tuning = SAGE2_FROM_ENV;
}

sage2_status sage2_context_create_with_options(int device, const sage2_context_options* options,
                                               sage2_context** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    *out = new sage2_context{sage2::Context(device, to_cpp(options))};
  });
}

sage2_status sage2_context_options_resolve(sage2_context_options* options) {
  return guarded([&] {
    require(options != nullptr, "options is NULL");
    g_resolved = sage2::resolve_context_options(to_cpp(options));
    to_c(g_resolved, options);
  });
}

sage2_status sage2_context_options_get(const sage2_context* ctx, sage2_context_options* options) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    require(options != nullptr, "options is NULL");
    to_c(ctx->cpp.options(), options);
  });
}

sage2_status sage2_set_log_level(int level) {
  return guarded([&] {
    if (level == SAGE2_FROM_ENV) return sage2::set_log_level(std::nullopt);
    if (level < 0 || level > 3)
      throw sage2::Error(sage2::ErrorCode::InvalidArgument,
                         "level=" + std::to_string(level) + " (SAGE2_FROM_ENV, 0 error, 1 warn, 2 info, 3 debug)");
    sage2::set_log_level(static_cast<sage2::LogLevel>(level));
  });
}

sage2_status sage2_set_log_callback(sage2_log_callback callback, void* user) {
  return guarded([&] { sage2::base::log::set_callback(callback, user); });
}

sage2_status sage2_context_destroy(sage2_context* ctx) {
  return guarded([&] { delete ctx; });
}

sage2_status sage2_context_device(const sage2_context* ctx, char* name, size_t name_size, char* arch,
                                  size_t arch_size) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    copy_out(ctx->cpp.device().name, name, name_size);
    copy_out(ctx->cpp.device().arch, arch, arch_size);
  });
}

sage2_status sage2_context_target(const sage2_context* ctx, int* ptx, char* path, size_t path_size, char* note,
                                  size_t note_size) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    const sage2::DeviceInfo& d = ctx->cpp.device();
    if (ptx) *ptx = d.ptx ? 1 : 0;
    copy_out(d.path, path, path_size);
    copy_out(d.target_note, note, note_size);
  });
}

sage2_status sage2_version_info(int* nvrtc_major, int* nvrtc_minor, int* driver_version) {
  return guarded([&] {
    const sage2::VersionInfo v = sage2::version_info();
    if (nvrtc_major) *nvrtc_major = v.nvrtc_major;
    if (nvrtc_minor) *nvrtc_minor = v.nvrtc_minor;
    if (driver_version) *driver_version = v.driver_version;
  });
}

sage2_status sage2_context_cache_dir(const sage2_context* ctx, char* buf, size_t size) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    copy_out(ctx->cpp.cache_dir(), buf, size);
  });
}

sage2_status sage2_default_cache_dir(char* buf, size_t size) {
  return guarded([&] {
    const sage2::base::config::CacheConfig c = sage2::base::config::cache_config();
    copy_out(c.disk_cache ? c.cache_dir : std::string(), buf, size);
  });
}

sage2_status sage2_context_kernel_stats(const sage2_context* ctx, sage2_kernel_stats* out) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    require(out != nullptr, "out is NULL");
    to_c(ctx->cpp.kernel_stats(), out);
  });
}

sage2_status sage2_process_kernel_stats(sage2_kernel_stats* out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    to_c(sage2::process_kernel_stats(), out);
  });
}

sage2_status sage2_nvrtc_add_candidate(const char* path, const char* rule) {
  return guarded([&] {
    require(path != nullptr && *path, "path is NULL or empty");
    if (!sage2::jit::nvrtc::add_candidate(path, rule && *rule ? rule : "added by the application"))
      throw sage2::Error(sage2::ErrorCode::Unsupported,
                         std::string("NVRTC is already loaded (or its search has run); ") + path + " not added");
  });
}

sage2_status sage2_nvrtc_library(char* path, size_t path_size, char* rule, size_t rule_size, char* passed_over,
                                 size_t passed_over_size) {
  return guarded([&] {
    const auto& a = sage2::jit::nvrtc::api();  // Error(NvrtcMissing) listing every candidate
    copy_out(a.file, path, path_size);
    copy_out(a.rule, rule, rule_size);
    copy_out(sage2::jit::nvrtc::attempt().tried, passed_over, passed_over_size);
  });
}

sage2_status sage2_context_device_props(const sage2_context* ctx, int* ordinal, int* sm_count,
                                        uint64_t* total_memory) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    const sage2::DeviceInfo& d = ctx->cpp.device();
    if (ordinal) *ordinal = d.ordinal;
    if (sm_count) *sm_count = d.sm_count;
    if (total_memory) *total_memory = static_cast<uint64_t>(d.total_memory);
  });
}

}  // extern "C"

namespace {
sage2::TensorRef to_cpp(const sage2_tensor* t, const char* name) {
  if (!t) throw sage2::Error(sage2::ErrorCode::InvalidArgument, std::string(name) + ": tensor pointer is NULL");
  if (t->dtype != SAGE2_DTYPE_F16 && t->dtype != SAGE2_DTYPE_BF16)
    throw sage2::Error(sage2::ErrorCode::InvalidArgument,
                       std::string(name) + ": dtype " + std::to_string(t->dtype) + " is not a sage2_dtype (0 f16, 1 bf16)");
  sage2::TensorRef r;
  r.data = t->data;
  r.dtype = t->dtype == SAGE2_DTYPE_F16 ? sage2::DType::F16 : sage2::DType::BF16;
  r.batch = t->batch; r.heads = t->heads; r.seq = t->seq; r.dim = t->dim;
  r.stride_batch = t->stride_batch; r.stride_head = t->stride_head; r.stride_seq = t->stride_seq;
  r.stride_dim = t->stride_dim;
  return r;
}

sage2::AttentionParams to_cpp(const sage2_attention_params* p) {
  sage2::AttentionParams r;
  if (!p) return r;
  if (p->smooth_k != 0 && p->smooth_k != 1)
    throw sage2::Error(sage2::ErrorCode::InvalidArgument, "params.smooth_k=" + std::to_string(p->smooth_k) + " (0 or 1)");
  if (p->smooth_v != 0 && p->smooth_v != 1)
    throw sage2::Error(sage2::ErrorCode::InvalidArgument, "params.smooth_v=" + std::to_string(p->smooth_v) + " (0 or 1)");
  r.causal = static_cast<sage2::CausalMode>(p->causal);
  if (p->sm_scale != 0.0f) r.sm_scale = p->sm_scale;
  r.qk_bits = static_cast<sage2::QkBits>(p->qk_bits);
  r.pv_precision = static_cast<sage2::PvPrecision>(p->pv_precision);
  r.smooth_q = static_cast<sage2::Toggle>(p->smooth_q);
  r.smooth_k = p->smooth_k == 1;
  r.smooth_v = p->smooth_v == 1;
  r.lse = p->lse;
  r.workspace = p->workspace;
  r.workspace_bytes = p->workspace_bytes;
  r.small_q_path = static_cast<sage2::SmallQPath>(p->small_q_path);
  r.pv_accum = static_cast<sage2::PvAccum>(p->pv_accum);
  return r;
}

sage2_tensor make_tensor(const sage2::TensorRef& t) {
  sage2_tensor r;
  r.data = t.data;
  r.dtype = t.dtype == sage2::DType::F16 ? SAGE2_DTYPE_F16 : SAGE2_DTYPE_BF16;
  r.batch = t.batch; r.heads = t.heads; r.seq = t.seq; r.dim = t.dim;
  r.stride_batch = t.stride_batch; r.stride_head = t.stride_head; r.stride_seq = t.stride_seq;
  r.stride_dim = t.stride_dim;
  return r;
}
sage2::DType cpp_dtype(sage2_dtype d) { return d == SAGE2_DTYPE_BF16 ? sage2::DType::BF16 : sage2::DType::F16; }
}  // namespace

// C++ helpers of the entry points below: outside extern "C", since they return C++ types.
namespace {

sage2::SeqLens to_cpp(const sage2_seqlens* l) {
  require(l != nullptr, "lens is NULL");
  sage2::SeqLens c;
  c.batch = l->batch;
  c.cu_seqlens_q = l->cu_seqlens_q;
  c.cu_seqlens_k = l->cu_seqlens_k;
  c.kv_lens = l->kv_lens;
  c.max_seqlen_q = l->max_seqlen_q;
  c.max_seqlen_k = l->max_seqlen_k;
  return c;
}


sage2::AttentionParams with_mask(const sage2_attention_params* params, const sage2_mask* mask) {
  sage2::AttentionParams p = to_cpp(params);
  if (mask) {
    p.mask.data = mask->data;
    p.mask.type = static_cast<sage2::MaskType>(mask->type);
    p.mask.stride_batch = mask->stride_batch;
    p.mask.stride_head = mask->stride_head;
    p.mask.stride_q = mask->stride_q;
    p.mask.stride_k = mask->stride_k;
  }
  return p;
}

}  // namespace

extern "C" {

void sage2_attention_params_init(sage2_attention_params* p) {
  if (!p) return;
  *p = sage2_attention_params{};
  p->smooth_k = 1;
}

sage2_tensor sage2_tensor_hnd(const void* data, sage2_dtype dtype, int64_t b, int64_t h, int64_t n, int64_t d) {
  return make_tensor(sage2::TensorRef::hnd(data, cpp_dtype(dtype), b, h, n, d));
}
sage2_tensor sage2_tensor_nhd(const void* data, sage2_dtype dtype, int64_t b, int64_t h, int64_t n, int64_t d) {
  return make_tensor(sage2::TensorRef::nhd(data, cpp_dtype(dtype), b, h, n, d));
}

sage2_status sage2_attention(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k, const sage2_tensor* v,
                             const sage2_tensor* out, const sage2_attention_params* params, void* stream) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    ctx->cpp.attention(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"), to_cpp(params),
                       static_cast<CUstream_st*>(stream));
  });
}

sage2_status sage2_workspace_size(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                  const sage2_tensor* v, const sage2_tensor* out,
                                  const sage2_attention_params* params, size_t* bytes) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    require(bytes != nullptr, "bytes is NULL");
    *bytes = ctx->cpp.workspace_size(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"),
                                     to_cpp(params));
  });
}

sage2_status sage2_attention_masked(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                    const sage2_tensor* v, const sage2_tensor* out, const sage2_mask* mask,
                                    const sage2_attention_params* params, void* stream) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    ctx->cpp.attention(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"), with_mask(params, mask),
                       static_cast<CUstream_st*>(stream));
  });
}

sage2_status sage2_workspace_size_masked(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                         const sage2_tensor* v, const sage2_tensor* out, const sage2_mask* mask,
                                         const sage2_attention_params* params, size_t* bytes) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    require(bytes != nullptr, "bytes is NULL");
    *bytes = ctx->cpp.workspace_size(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"),
                                     with_mask(params, mask));
  });
}

sage2_status sage2_attention_varlen(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                    const sage2_tensor* v, const sage2_tensor* out, const sage2_seqlens* lens,
                                    const sage2_attention_params* params, void* stream) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    ctx->cpp.attention_varlen(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"), to_cpp(lens),
                              to_cpp(params), static_cast<CUstream_st*>(stream));
  });
}

sage2_status sage2_workspace_size_varlen(sage2_context* ctx, const sage2_tensor* q, const sage2_tensor* k,
                                         const sage2_tensor* v, const sage2_tensor* out, const sage2_seqlens* lens,
                                         const sage2_attention_params* params, size_t* bytes) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    require(bytes != nullptr, "bytes is NULL");
    *bytes = ctx->cpp.workspace_size_varlen(to_cpp(q, "q"), to_cpp(k, "k"), to_cpp(v, "v"), to_cpp(out, "out"),
                                            to_cpp(lens), to_cpp(params));
  });
}

}  // extern "C"

// ---- internal: the conversion layer without a context (runtime/c_api_internal.hpp) ------------
sage2_status sage2_validate_attention_args(const sage2_tensor* q, const sage2_tensor* k, const sage2_tensor* v,
                                           const sage2_tensor* out, const sage2_attention_params* params,
                                           sage2::kernels::Arch arch) {
  return guarded([&] {
    const sage2::TensorRef cq = to_cpp(q, "q"), ck = to_cpp(k, "k"), cv = to_cpp(v, "v"), co = to_cpp(out, "out");
    const sage2::AttentionParams cp = to_cpp(params);
    (void)sage2::plan::validate_attention(cq, ck, cv, co, cp, arch);
  });
}
