// Specification of argument validation for attention(): every argument crossed with each kind
// of bad value gives InvalidArgument whose message names the argument — before anything is
// launched (validation is pure host logic and runs first). The same matrix is run through the C
// ABI's conversion layer (sage2_validate_attention_args: what sage2_attention does with its
// arguments once it has a context), plus the values only C callers can pass (NULL tensors,
// dtype codes and smooth flags out of range). Every (argument × bad value) case tried is counted;
// the last test case prints the totals (bench/results/validation_cases.txt records them).
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention_family.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/c_api_internal.hpp"
#include "sage2/sage2.h"

using namespace sage2;
using plan::validate_attention;

namespace {

// Fake, well-separated device addresses: validation never dereferences them.
const void* addr(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

struct Args {
  TensorRef q = TensorRef::hnd(addr(0x10000000), DType::F16, 2, 8, 100, 64);
  TensorRef k = TensorRef::hnd(addr(0x20000000), DType::F16, 2, 2, 120, 64);
  TensorRef v = TensorRef::hnd(addr(0x30000000), DType::F16, 2, 2, 120, 64);
  TensorRef out = TensorRef::hnd(addr(0x40000000), DType::F16, 2, 8, 100, 64);
  AttentionParams p;
};

// One case: the call must be refused with InvalidArgument and a message holding every `mention`.
void expect_invalid(const Args& a, const std::vector<std::string>& mentions, int& counter) {
  ++counter;
  try {
    validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm90a);
    FAIL("accepted bad input; expected a message mentioning '" << mentions.front() << "'");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    const std::string msg = e.what();
    for (const auto& m : mentions) CHECK_MESSAGE(msg.find(m) != std::string::npos, msg << " (expected '" << m << "')");
  }
}
void expect_invalid(const Args& a, const std::string& must_mention, int& counter) {
  expect_invalid(a, std::vector<std::string>{must_mention}, counter);
}

using TensorMut = std::function<void(TensorRef&)>;
struct BadTensor {
  const char* kind;
  TensorMut mutate;
  const char* mention;  // besides the argument name
};
const std::vector<BadTensor>& bad_tensors() {
  static const std::vector<BadTensor> bads = {
      {"null", [](TensorRef& t) { t.data = nullptr; }, "null"},
      {"wrong dtype", [](TensorRef& t) { t.dtype = DType::F32; }, "dtype"},
      {"dtype out of enum range", [](TensorRef& t) { t.dtype = static_cast<DType>(57); }, "dtype"},
      {"zero batch", [](TensorRef& t) { t.batch = 0; }, "positive"},
      {"zero heads", [](TensorRef& t) { t.heads = 0; }, "positive"},
      {"zero seq", [](TensorRef& t) { t.seq = 0; }, "positive"},
      {"zero dim", [](TensorRef& t) { t.dim = 0; }, "positive"},
      {"negative seq", [](TensorRef& t) { t.seq = -5; }, "positive"},
      {"INT64_MIN batch", [](TensorRef& t) { t.batch = INT64_MIN; }, "positive"},
      {"strided last dim", [](TensorRef& t) { t.stride_dim = 2; }, "contiguous"},
      {"zero last-dim stride", [](TensorRef& t) { t.stride_dim = 0; }, "contiguous"},
      {"negative stride", [](TensorRef& t) { t.stride_seq = -64; }, "negative"},
      {"zero stride", [](TensorRef& t) { t.stride_head = 0; }, "stride_head=0"},
      {"huge size", [](TensorRef& t) { t.seq = std::int64_t(1) << 61; t.stride_head = std::int64_t(1) << 62; }, "overflow"},
      {"INT64_MAX stride", [](TensorRef& t) { t.stride_batch = INT64_MAX; }, "overflow"},
      {"misaligned", [](TensorRef& t) { t.data = static_cast<const char*>(t.data) + 1; }, "aligned"},
  };
  return bads;
}
const char* const kTensorNames[] = {"q", "k", "v", "out"};

// ---- the C++ API ------------------------------------------------------------------------------

int cpp_tensor_matrix() {
  int cases = 0;
  for (int which = 0; which < 4; ++which) {
    for (const BadTensor& b : bad_tensors()) {
      Args a;
      TensorRef* t[] = {&a.q, &a.k, &a.v, &a.out};
      b.mutate(*t[which]);
      CAPTURE(kTensorNames[which]);
      CAPTURE(b.kind);
      expect_invalid(a, {std::string(kTensorNames[which]) + ":", b.mention}, cases);
    }
  }
  CHECK(cases == 4 * static_cast<int>(bad_tensors().size()));
  return cases;
}

int cpp_mismatch_matrix() {
  int cases = 0;
  { Args a; a.k.dtype = DType::BF16; expect_invalid(a, "dtype", cases); }
  { Args a; a.v.dtype = DType::BF16; expect_invalid(a, "k/v: dtype", cases); }
  { Args a; a.out.dtype = DType::BF16; expect_invalid(a, "out: dtype", cases); }
  { Args a; a.k.batch = 3; expect_invalid(a, "batch", cases); }
  { Args a; a.out.batch = 1; expect_invalid(a, "out 1", cases); }
  { Args a; a.v.heads = 1; expect_invalid(a, "v: heads=1", cases); }
  { Args a; a.k = TensorRef::hnd(addr(0x20000000), DType::F16, 2, 3, 120, 64); a.v = TensorRef::hnd(addr(0x30000000), DType::F16, 2, 3, 120, 64);
    expect_invalid(a, "not a multiple of kv heads=3", cases); }
  { Args a; a.v.seq = 119; expect_invalid(a, "v: seq=119", cases); }
  { Args a; a.k.dim = 32; a.k.stride_seq = 32; expect_invalid(a, "k: head dim 32", cases); }
  { Args a; a.v.dim = 32; a.v.stride_seq = 32; expect_invalid(a, "v: head dim 32", cases); }
  { Args a; a.out.seq = 99; expect_invalid(a, "out: shape", cases); }
  { Args a; a.out.heads = 4; expect_invalid(a, "out: shape", cases); }
  return cases;
}

int cpp_head_dim_cases() {
  int cases = 0;
  Args a;
  for (TensorRef* t : {&a.q, &a.k, &a.v, &a.out}) {
    t->dim = 600;
    t->stride_seq = 600;
    t->stride_head = t->seq * 600;
    t->stride_batch = t->heads * t->stride_head;
  }
  expect_invalid(a, "600 exceeds the supported maximum 512", cases);
  for (TensorRef* t : {&a.q, &a.k, &a.v, &a.out}) t->dim = 512;
  CHECK_NOTHROW(validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm90a));
  return cases;
}

int cpp_overlap_cases() {
  int cases = 0;
  for (const char* victim : {"q", "k", "v"}) {
    Args a;
    const TensorRef& in = std::string(victim) == "q" ? a.q : std::string(victim) == "k" ? a.k : a.v;
    a.out.data = static_cast<const char*>(in.data) + 64;  // inside the input
    expect_invalid(a, std::string("out overlaps ") + victim, cases);
  }
  {
    Args a;
    a.p.lse = reinterpret_cast<float*>(const_cast<void*>(a.out.data));
    expect_invalid(a, "lse overlaps", cases);
  }
  {
    Args a;
    a.p.lse = reinterpret_cast<float*>(const_cast<void*>(a.k.data)) + 100;
    expect_invalid(a, "lse overlaps", cases);
  }
  return cases;
}

int cpp_param_cases() {
  int cases = 0;
  { Args a; a.p.sm_scale = -1.f; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = 0.f; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = NAN; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = INFINITY; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = -INFINITY; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.qk_bits = static_cast<QkBits>(6); expect_invalid(a, "qk_bits=6", cases); }
  { Args a; a.p.qk_bits = static_cast<QkBits>(-8); expect_invalid(a, "qk_bits=-8", cases); }
  { Args a; a.p.causal = static_cast<CausalMode>(7); expect_invalid(a, "causal=7", cases); }
  { Args a; a.p.causal = static_cast<CausalMode>(-1); expect_invalid(a, "causal=-1", cases); }
  { Args a; a.p.smooth_q = static_cast<Toggle>(9); expect_invalid(a, "smooth_q=9", cases); }
  { Args a; a.p.smooth_q = static_cast<Toggle>(-1); expect_invalid(a, "smooth_q=-1", cases); }
  { Args a; a.p.small_q_path = static_cast<SmallQPath>(3); expect_invalid(a, "small_q_path=3", cases); }
  { Args a; a.p.small_q_path = static_cast<SmallQPath>(-1); expect_invalid(a, "small_q_path=-1", cases); }
  { Args a; a.p.lse = reinterpret_cast<float*>(0x50000002); expect_invalid(a, "lse", cases); }
  { Args a; a.p.workspace = reinterpret_cast<void*>(0x60000010); expect_invalid(a, "workspace", cases); }
  { Args a; a.p.workspace_bytes = 1024; expect_invalid(a, "workspace_bytes=1024", cases); }
  return cases;
}

// ---- the C API (conversion layer + the same validation) -----------------------------------------

struct CArgs {
  sage2_tensor q = sage2_tensor_hnd(addr(0x10000000), SAGE2_DTYPE_F16, 2, 8, 100, 64);
  sage2_tensor k = sage2_tensor_hnd(addr(0x20000000), SAGE2_DTYPE_F16, 2, 2, 120, 64);
  sage2_tensor v = sage2_tensor_hnd(addr(0x30000000), SAGE2_DTYPE_F16, 2, 2, 120, 64);
  sage2_tensor out = sage2_tensor_hnd(addr(0x40000000), SAGE2_DTYPE_F16, 2, 8, 100, 64);
  sage2_attention_params p{};
  CArgs() { sage2_attention_params_init(&p); }
  sage2_status call(kernels::Arch arch = kernels::Arch::Sm90a, bool null_params = false) const {
    return sage2_validate_attention_args(&q, &k, &v, &out, null_params ? nullptr : &p, arch);
  }
};

void expect_c_invalid(sage2_status s, const std::vector<std::string>& mentions, int& counter) {
  ++counter;
  CHECK(s == SAGE2_ERROR_INVALID_ARGUMENT);
  const std::string msg = sage2_last_error();
  for (const auto& m : mentions) CHECK_MESSAGE(msg.find(m) != std::string::npos, msg << " (expected '" << m << "')");
}

// The C++ tensor matrix through the C structs (values cross the conversion unchanged).
int c_tensor_matrix() {
  int cases = 0;
  using CMut = std::function<void(sage2_tensor&)>;
  struct CBad {
    const char* kind;
    CMut mutate;
    const char* mention;
  };
  const std::vector<CBad> bads = {
      {"null data", [](sage2_tensor& t) { t.data = nullptr; }, "null"},
      {"zero batch", [](sage2_tensor& t) { t.batch = 0; }, "positive"},
      {"zero heads", [](sage2_tensor& t) { t.heads = 0; }, "positive"},
      {"zero seq", [](sage2_tensor& t) { t.seq = 0; }, "positive"},
      {"zero dim", [](sage2_tensor& t) { t.dim = 0; }, "positive"},
      {"negative dim", [](sage2_tensor& t) { t.dim = -64; }, "positive"},
      {"INT64_MIN seq", [](sage2_tensor& t) { t.seq = INT64_MIN; }, "positive"},
      {"strided last dim", [](sage2_tensor& t) { t.stride_dim = 2; }, "contiguous"},
      {"negative last-dim stride", [](sage2_tensor& t) { t.stride_dim = -1; }, "contiguous"},
      {"negative stride", [](sage2_tensor& t) { t.stride_batch = -1; }, "negative"},
      {"zero stride", [](sage2_tensor& t) { t.stride_seq = 0; }, "stride_seq=0"},
      {"huge size", [](sage2_tensor& t) { t.seq = std::int64_t(1) << 61; t.stride_head = std::int64_t(1) << 62; }, "overflow"},
      {"misaligned", [](sage2_tensor& t) { t.data = static_cast<const char*>(t.data) + 3; }, "aligned"},
      // Only a C caller can pass these: dtype codes that are no sage2_dtype.
      {"dtype -1", [](sage2_tensor& t) { t.dtype = -1; }, "dtype -1"},
      {"dtype 2 (f32 in the C++ enum, not a sage2_dtype)", [](sage2_tensor& t) { t.dtype = 2; }, "dtype 2"},
      {"dtype 3", [](sage2_tensor& t) { t.dtype = 3; }, "dtype 3"},
      {"dtype 255", [](sage2_tensor& t) { t.dtype = 255; }, "dtype 255"},
      {"dtype INT32_MIN", [](sage2_tensor& t) { t.dtype = INT32_MIN; }, "is not a sage2_dtype"},
      {"dtype INT32_MAX", [](sage2_tensor& t) { t.dtype = INT32_MAX; }, "is not a sage2_dtype"},
  };
  for (int which = 0; which < 4; ++which) {
    for (const CBad& b : bads) {
      CArgs a;
      sage2_tensor* t[] = {&a.q, &a.k, &a.v, &a.out};
      b.mutate(*t[which]);
      CAPTURE(kTensorNames[which]);
      CAPTURE(b.kind);
      expect_c_invalid(a.call(), {std::string(kTensorNames[which]) + ":", b.mention}, cases);
    }
    // A NULL tensor pointer.
    CArgs a;
    const sage2_tensor* t[] = {&a.q, &a.k, &a.v, &a.out};
    t[which] = nullptr;
    CAPTURE(kTensorNames[which]);
    expect_c_invalid(sage2_validate_attention_args(t[0], t[1], t[2], t[3], &a.p, kernels::Arch::Sm90a),
                     {std::string(kTensorNames[which]) + ": tensor pointer is NULL"}, cases);
  }
  CHECK(cases == 4 * (static_cast<int>(bads.size()) + 1));
  return cases;
}

int c_param_cases() {
  int cases = 0;
  auto with = [&](const std::function<void(sage2_attention_params&)>& mutate, const std::string& mention) {
    CArgs a;
    mutate(a.p);
    CAPTURE(mention);
    expect_c_invalid(a.call(), {mention}, cases);
  };
  // Flags the conversion layer checks (0 or 1 only).
  for (int bad : {-1, 2, 7, INT32_MIN, INT32_MAX}) {
    with([bad](sage2_attention_params& p) { p.smooth_k = bad; }, "params.smooth_k=" + std::to_string(bad));
    with([bad](sage2_attention_params& p) { p.smooth_v = bad; }, "params.smooth_v=" + std::to_string(bad));
  }
  // Enum codes passed through to the C++ validation.
  for (int bad : {-1, 3, 100, INT32_MIN})
    with([bad](sage2_attention_params& p) { p.causal = bad; }, "params.causal=" + std::to_string(bad));
  for (int bad : {-8, -1, 1, 6, 16, INT32_MAX})
    with([bad](sage2_attention_params& p) { p.qk_bits = bad; }, "params.qk_bits=" + std::to_string(bad));
  for (int bad : {-1, 3, INT32_MIN})
    with([bad](sage2_attention_params& p) { p.smooth_q = bad; }, "params.smooth_q=" + std::to_string(bad));
  for (int bad : {-1, 3, INT32_MAX})
    with([bad](sage2_attention_params& p) { p.small_q_path = bad; }, "params.small_q_path=" + std::to_string(bad));
  // sm_scale: 0 means "default", anything else must be finite and positive.
  for (float bad : {-1.0f, -1e-30f, NAN, INFINITY, -INFINITY})
    with([bad](sage2_attention_params& p) { p.sm_scale = bad; }, "params.sm_scale");
  with([](sage2_attention_params& p) { p.lse = reinterpret_cast<float*>(0x50000001); }, "params.lse");
  with([](sage2_attention_params& p) { p.lse = reinterpret_cast<float*>(0x40000000); }, "params.lse overlaps");
  with([](sage2_attention_params& p) { p.workspace = reinterpret_cast<void*>(0x60000080); }, "params.workspace");
  with([](sage2_attention_params& p) { p.workspace_bytes = 4096; }, "params.workspace_bytes=4096");
  return cases;
}

void write_summary_if_asked(const std::string& text) {
  const char* path = std::getenv("SAGE2_VALIDATION_CASES_FILE");
  if (!path || !*path) return;
  std::ofstream f(path, std::ios::trunc);
  f << text;
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("validation: a well-formed call is accepted and defaulted") {
  Args a;
  const auto p = validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm90a);
  CHECK(p.qk_bits == 8);  // Auto on Hopper
  CHECK_FALSE(p.smooth_q);
  CHECK(p.kv_heads == 2);
  CHECK(p.sm_scale == doctest::Approx(0.125));
  CHECK_FALSE(p.pv_fp16);  // Auto: FP8 P̃V where the arch has it
  const auto ada = validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm89);
  CHECK(ada.qk_bits == 8);  // Auto: 8-bit on every arch (4-bit only when asked)
  CHECK_FALSE(ada.smooth_q);
  CHECK_FALSE(ada.pv_fp16);
  const auto ampere = validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm80);
  CHECK(ampere.qk_bits == 8);
  CHECK(ampere.pv_fp16);  // Auto: FP16 P̃V where there is no FP8
  {
    Args b;
    b.p.qk_bits = QkBits::Int4;
    const auto ada4 = validate_attention(b.q, b.k, b.v, b.out, b.p, kernels::Arch::Sm89);
    CHECK(ada4.qk_bits == 4);
    CHECK(ada4.smooth_q);  // Auto: on with 4-bit
    CHECK(validate_attention(b.q, b.k, b.v, b.out, b.p, kernels::Arch::Sm86).qk_bits == 4);
    // Blackwell has no INT4 mma, Ampere no FP8: valid requests the arch cannot serve
    for (kernels::Arch arch : {kernels::Arch::Sm100, kernels::Arch::Sm103, kernels::Arch::Sm120, kernels::Arch::Sm121}) {
      try {
        validate_attention(b.q, b.k, b.v, b.out, b.p, arch);
        FAIL("INT4 accepted on " << kernels::arch_name(arch));
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::Unsupported);
        CHECK(std::string(e.what()).find("qk_bits=4") != std::string::npos);
      }
    }
    b.p.qk_bits = QkBits::Auto;
    b.p.pv_precision = PvPrecision::Fp8;
    try {
      validate_attention(b.q, b.k, b.v, b.out, b.p, kernels::Arch::Sm86);
      FAIL("FP8 P̃V accepted on sm_86");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(std::string(e.what()).find("pv_precision=fp8") != std::string::npos);
    }
    CHECK_FALSE(validate_attention(b.q, b.k, b.v, b.out, b.p, kernels::Arch::Sm120).pv_fp16);
    b.p.pv_precision = PvPrecision::Fp16;
    for (const auto& ai : kernels::arch_table()) CHECK(validate_attention(b.q, b.k, b.v, b.out, b.p, ai.arch).pv_fp16);
    b.p.pv_precision = static_cast<PvPrecision>(3);
    CHECK_THROWS_WITH_AS(validate_attention(b.q, b.k, b.v, b.out, b.p, kernels::Arch::Sm90a),
                         doctest::Contains("params.pv_precision=3"), Error);
  }
  a.q = TensorRef::nhd(addr(0x10000000), DType::BF16, 2, 8, 100, 64);
  a.k.dtype = a.v.dtype = a.out.dtype = DType::BF16;
  CHECK_NOTHROW(validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm90a));
}

TEST_CASE("validation: every tensor argument × every kind of bad value") {
  MESSAGE("C++ tensor × bad-value cases: " << cpp_tensor_matrix());
}

TEST_CASE("validation: mismatches between arguments name both sides") {
  MESSAGE("C++ mismatch cases: " << cpp_mismatch_matrix());
}

TEST_CASE("validation: head dim above 512 is rejected; 512 is accepted") { CHECK(cpp_head_dim_cases() == 1); }

TEST_CASE("validation: out or lse overlapping an input is rejected") {
  MESSAGE("C++ overlap cases: " << cpp_overlap_cases());
}

TEST_CASE("validation: parameter values out of range") { MESSAGE("C++ parameter cases: " << cpp_param_cases()); }

TEST_CASE("validation (C API): well-formed calls are accepted; params may be NULL") {
  CArgs a;
  CHECK(a.call() == SAGE2_OK);
  CHECK(std::string(sage2_last_error()).empty());
  CHECK(a.call(kernels::Arch::Sm89) == SAGE2_OK);
  CHECK(a.call(kernels::Arch::Sm90a, /*null_params=*/true) == SAGE2_OK);
  a.p.sm_scale = -0.0f;  // equal to 0: the default
  CHECK(a.call() == SAGE2_OK);
  a.p.sm_scale = 0.5f;
  a.p.causal = SAGE2_CAUSAL_BOTTOM_RIGHT;
  a.p.qk_bits = 4;
  a.p.smooth_q = 2;
  a.p.smooth_k = 0;
  a.p.smooth_v = 1;
  a.p.lse = reinterpret_cast<float*>(0x50000000);
  a.p.workspace = reinterpret_cast<void*>(0x60000000);
  a.p.workspace_bytes = 1 << 20;
  CHECK(a.call() == SAGE2_OK);
  CArgs b;
  b.q = sage2_tensor_nhd(addr(0x10000000), SAGE2_DTYPE_BF16, 2, 8, 100, 64);
  b.k.dtype = b.v.dtype = b.out.dtype = SAGE2_DTYPE_BF16;
  CHECK(b.call() == SAGE2_OK);
  // The first bad argument in q, k, v, out, params order is the one named.
  b.k.dtype = 9;
  b.p.smooth_k = 5;
  CHECK(b.call() == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("k: dtype 9") != std::string::npos);
}

TEST_CASE("validation (C API): every tensor argument × every kind of bad value, NULL tensors, bad dtype codes") {
  MESSAGE("C API tensor × bad-value cases: " << c_tensor_matrix());
}

TEST_CASE("validation (C API): params flags and codes out of range") {
  MESSAGE("C API parameter cases: " << c_param_cases());
}

TEST_CASE("validation: total (argument × bad value) cases tried, C++ and C API") {
  const int cpp_tensor = cpp_tensor_matrix(), cpp_mismatch = cpp_mismatch_matrix(), cpp_dim = cpp_head_dim_cases(),
            cpp_overlap = cpp_overlap_cases(), cpp_param = cpp_param_cases();
  const int c_tensor = c_tensor_matrix(), c_param = c_param_cases();
  const int cpp_total = cpp_tensor + cpp_mismatch + cpp_dim + cpp_overlap + cpp_param;
  const int c_total = c_tensor + c_param;
  std::ostringstream s;
  s << "attention argument validation: (argument x bad value) cases tried by tests/cpu/plan/test_attention_validate.cpp\n"
    << "each case must be refused with InvalidArgument and a message naming the argument (and the value)\n"
    << "written by: SAGE2_VALIDATION_CASES_FILE=bench/results/validation_cases.txt build/tests/sage2_cpu_tests -tc='validation*'\n"
    << "C++ API (plan::validate_attention):\n"
    << "  tensor arguments x bad values  " << cpp_tensor << "  (4 tensors x " << bad_tensors().size() << ")\n"
    << "  mismatches between arguments   " << cpp_mismatch << "\n"
    << "  head dim above 512             " << cpp_dim << "\n"
    << "  overlapping out / lse          " << cpp_overlap << "\n"
    << "  parameter values               " << cpp_param << "\n"
    << "  total                          " << cpp_total << "\n"
    << "C API (sage2_validate_attention_args: the conversion layer of sage2_attention, then the same validation):\n"
    << "  tensor arguments x bad values  " << c_tensor << "  (incl. NULL tensors and dtype codes out of range)\n"
    << "  parameter flags and codes      " << c_param << "  (smooth_k/smooth_v, causal, qk_bits, smooth_q, small_q_path, sm_scale, lse, workspace)\n"
    << "  total                          " << c_total << "\n"
    << "all                              " << cpp_total + c_total << "\n";
  MESSAGE(s.str());
  write_summary_if_asked(s.str());
  CHECK(cpp_total + c_total > 0);
}

TEST_CASE("validation: an output whose elements overlap each other is rejected; inputs may alias") {
  int cases = 0;
  { Args a; a.out.stride_seq = 32; expect_invalid(a, "out: its elements overlap", cases); }  // rows overlap
  { Args a; a.out.stride_head = 64; expect_invalid(a, "out: its elements overlap", cases); }  // heads alias rows
  { Args a; a.out.stride_batch = a.out.stride_head; expect_invalid(a, "out: its elements overlap", cases); }
  // A padded, non-overlapping output (row pitch 80 > 64) is fine; so is a k that aliases itself.
  Args ok;
  ok.out.stride_seq = 80;
  ok.out.stride_head = 100 * 80;
  ok.out.stride_batch = 8 * 100 * 80;
  CHECK_NOTHROW(validate_attention(ok.q, ok.k, ok.v, ok.out, ok.p, kernels::Arch::Sm90a));
  Args alias;
  alias.v.stride_seq = 32;  // overlapping rows of an input: only read
  CHECK_NOTHROW(validate_attention(alias.q, alias.k, alias.v, alias.out, alias.p, kernels::Arch::Sm90a));
  CHECK(cases == 3);
}

TEST_CASE("validation: an lse whose size overflows 64 bits is rejected, not wrapped") {
  int cases = 0;
  Args a;
  a.q.batch = std::int64_t(1) << 31;
  a.q.heads = std::int64_t(1) << 31;
  a.q.seq = 4;
  a.q.dim = 1;
  a.q.stride_dim = 1;
  a.q.stride_seq = 1;
  a.q.stride_head = 1;
  a.q.stride_batch = 1;
  a.p.lse = reinterpret_cast<float*>(0x70000000);
  // The q views alias themselves (allowed for inputs); what must fail is the lse extent (or an
  // earlier shape check) — never a silent wrap-around.
  try {
    validate_attention(a.q, a.k, a.v, a.out, a.p, kernels::Arch::Sm90a);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
  }
  (void)cases;
}
