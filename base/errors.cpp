#include "base/enum_names.hpp"
#include "sage2/sage2.hpp"

namespace sage2 {

namespace {
constexpr base::Named<ErrorCode> kErrorCodeNames[] = {
    {ErrorCode::Ok, "ok"},                   {ErrorCode::InvalidArgument, "invalid_argument"},
    {ErrorCode::Unsupported, "unsupported"}, {ErrorCode::NoDriver, "no_driver"},
    {ErrorCode::DriverError, "driver_error"}, {ErrorCode::CompileError, "compile_error"},
    {ErrorCode::NvrtcMissing, "nvrtc_missing"}, {ErrorCode::CacheError, "cache_error"},
    {ErrorCode::OutOfMemory, "out_of_memory"}, {ErrorCode::Internal, "internal"}};
}  // namespace

const char* error_code_name(ErrorCode code) noexcept { return base::name_of(code, kErrorCodeNames, "unknown"); }

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("sage2 ") + error_code_name(code) + ": " + message), code_(code) {}

const char* dtype_name(DType t) noexcept { return base::name_of(t, base::kDTypeNames); }

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

const char* causal_mode_name(CausalMode m) noexcept { return base::name_of(m, base::kCausalModeNames); }

const char* mask_type_name(MaskType t) noexcept { return base::name_of(t, base::kMaskTypeNames); }

const char* attention_family_name(AttentionFamily f) noexcept { return base::name_of(f, base::kAttentionFamilyNames); }

const char* pv_precision_name(PvPrecision p) noexcept { return base::name_of(p, base::kPvPrecisionNames); }

const char* pv_accum_name(PvAccum a) noexcept { return base::name_of(a, base::kPvAccumNames); }

const char* small_q_path_name(SmallQPath p) noexcept { return base::name_of(p, base::kSmallQPathNames); }

const char* quant_path_name(QuantPath p) noexcept { return base::name_of(p, base::kQuantPathNames); }

TensorRef TensorRef::hnd(const void* data, DType dtype, std::int64_t b, std::int64_t h,
                         std::int64_t n, std::int64_t d) {
  TensorRef t;
  t.data = data; t.dtype = dtype; t.batch = b; t.heads = h; t.seq = n; t.dim = d;
  t.stride_dim = 1; t.stride_seq = d; t.stride_head = n * d; t.stride_batch = h * n * d;
  return t;
}

TensorRef TensorRef::nhd(const void* data, DType dtype, std::int64_t b, std::int64_t h,
                         std::int64_t n, std::int64_t d) {
  TensorRef t;
  t.data = data; t.dtype = dtype; t.batch = b; t.heads = h; t.seq = n; t.dim = d;
  t.stride_dim = 1; t.stride_head = d; t.stride_seq = h * d; t.stride_batch = n * h * d;
  return t;
}

}  // namespace sage2
