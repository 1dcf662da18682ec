#include "sage2/sage2.hpp"

namespace sage2 {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Ok: return "ok";
    case ErrorCode::InvalidArgument: return "invalid_argument";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::NoDriver: return "no_driver";
    case ErrorCode::DriverError: return "driver_error";
    case ErrorCode::CompileError: return "compile_error";
    case ErrorCode::NvrtcMissing: return "nvrtc_missing";
    case ErrorCode::CacheError: return "cache_error";
    case ErrorCode::OutOfMemory: return "out_of_memory";
    case ErrorCode::Internal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("sage2 ") + error_code_name(code) + ": " + message), code_(code) {}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
  }
  return "?";
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

const char* causal_mode_name(CausalMode m) noexcept {
  switch (m) {
    case CausalMode::None: return "none";
    case CausalMode::TopLeft: return "top_left";
    case CausalMode::BottomRight: return "bottom_right";
  }
  return "?";
}

const char* mask_type_name(MaskType t) noexcept {
  switch (t) {
    case MaskType::None: return "none";
    case MaskType::Bool: return "bool";
    case MaskType::F16: return "f16";
    case MaskType::BF16: return "bf16";
    case MaskType::F32: return "f32";
  }
  return "?";
}

const char* attention_family_name(AttentionFamily f) noexcept {
  switch (f) {
    case AttentionFamily::Auto: return "auto";
    case AttentionFamily::Mma: return "mma";
    case AttentionFamily::Wgmma: return "wgmma";
  }
  return "?";
}

const char* pv_precision_name(PvPrecision p) noexcept {
  switch (p) {
    case PvPrecision::Auto: return "auto";
    case PvPrecision::Fp8: return "fp8";
    case PvPrecision::Fp16: return "fp16";
  }
  return "?";
}

const char* small_q_path_name(SmallQPath p) noexcept {
  switch (p) {
    case SmallQPath::Auto: return "auto";
    case SmallQPath::Quantized: return "quantized";
    case SmallQPath::Direct: return "direct";
  }
  return "?";
}

const char* quant_path_name(QuantPath p) noexcept {
  switch (p) {
    case QuantPath::Split: return "split";
    case QuantPath::Fused: return "fused";
    case QuantPath::Cluster: return "cluster";
    case QuantPath::Auto: return "auto";
  }
  return "?";
}

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
