// Specification of argument validation for attention(): every argument crossed with each kind
// of bad value gives InvalidArgument whose message names the argument — before anything is
// launched (validation is pure host logic and runs first).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "runtime/attention_validate.hpp"

using namespace sage2;
using runtime::validate_attention;

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

void expect_invalid(const Args& a, const std::string& must_mention, int& counter) {
  ++counter;
  try {
    validate_attention(a.q, a.k, a.v, a.out, a.p, jit::Arch::Sm90a);
    FAIL("accepted bad input; expected a message mentioning '" << must_mention << "'");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find(must_mention) != std::string::npos, msg);
  }
}

}  // namespace

TEST_CASE("validation: a well-formed call is accepted and defaulted") {
  Args a;
  const auto p = validate_attention(a.q, a.k, a.v, a.out, a.p, jit::Arch::Sm90a);
  CHECK(p.qk_bits == 8);  // Auto on Hopper
  CHECK_FALSE(p.smooth_q);
  CHECK(p.kv_heads == 2);
  CHECK(p.sm_scale == doctest::Approx(0.125));
  const auto ada = validate_attention(a.q, a.k, a.v, a.out, a.p, jit::Arch::Sm89);
  CHECK(ada.qk_bits == 4);
  CHECK(ada.smooth_q);  // Auto: on with 4-bit
  a.q = TensorRef::nhd(addr(0x10000000), DType::BF16, 2, 8, 100, 64);
  a.k.dtype = a.v.dtype = a.out.dtype = DType::BF16;
  CHECK_NOTHROW(validate_attention(a.q, a.k, a.v, a.out, a.p, jit::Arch::Sm90a));
}

TEST_CASE("validation: every tensor argument × every kind of bad value") {
  int cases = 0;
  using Mut = std::function<void(TensorRef&)>;
  struct Bad {
    const char* kind;
    Mut mutate;
    const char* mention;  // besides the argument name
  };
  const std::vector<Bad> bads = {
      {"null", [](TensorRef& t) { t.data = nullptr; }, "null"},
      {"wrong dtype", [](TensorRef& t) { t.dtype = DType::F32; }, "dtype"},
      {"zero batch", [](TensorRef& t) { t.batch = 0; }, "positive"},
      {"zero heads", [](TensorRef& t) { t.heads = 0; }, "positive"},
      {"zero seq", [](TensorRef& t) { t.seq = 0; }, "positive"},
      {"zero dim", [](TensorRef& t) { t.dim = 0; }, "positive"},
      {"negative seq", [](TensorRef& t) { t.seq = -5; }, "positive"},
      {"strided last dim", [](TensorRef& t) { t.stride_dim = 2; }, "contiguous"},
      {"negative stride", [](TensorRef& t) { t.stride_seq = -64; }, "negative"},
      {"zero stride", [](TensorRef& t) { t.stride_head = 0; }, "stride_head=0"},
      {"huge size", [](TensorRef& t) { t.seq = std::int64_t(1) << 61; t.stride_head = std::int64_t(1) << 62; }, "overflow"},
      {"misaligned", [](TensorRef& t) { t.data = static_cast<const char*>(t.data) + 1; }, "aligned"},
  };
  const char* names[] = {"q", "k", "v", "out"};
  for (int which = 0; which < 4; ++which) {
    for (const Bad& b : bads) {
      Args a;
      TensorRef* t[] = {&a.q, &a.k, &a.v, &a.out};
      b.mutate(*t[which]);
      CAPTURE(names[which]);
      CAPTURE(b.kind);
      expect_invalid(a, std::string(names[which]) + ":", cases);
      Args a2;
      TensorRef* t2[] = {&a2.q, &a2.k, &a2.v, &a2.out};
      b.mutate(*t2[which]);
      expect_invalid(a2, b.mention, cases);
    }
  }
  MESSAGE("tensor × bad-value cases: " << cases);
  CHECK(cases == 4 * 12 * 2);
}

TEST_CASE("validation: mismatches between arguments name both sides") {
  int cases = 0;
  { Args a; a.k.dtype = DType::BF16; expect_invalid(a, "dtype", cases); }
  { Args a; a.out.dtype = DType::BF16; expect_invalid(a, "out: dtype", cases); }
  { Args a; a.k.batch = 3; expect_invalid(a, "batch", cases); }
  { Args a; a.v.heads = 1; expect_invalid(a, "v: heads=1", cases); }
  { Args a; a.k = TensorRef::hnd(addr(0x20000000), DType::F16, 2, 3, 120, 64); a.v = TensorRef::hnd(addr(0x30000000), DType::F16, 2, 3, 120, 64);
    expect_invalid(a, "not a multiple of kv heads=3", cases); }
  { Args a; a.v.seq = 119; expect_invalid(a, "v: seq=119", cases); }
  { Args a; a.k.dim = 32; a.k.stride_seq = 32; expect_invalid(a, "k: head dim 32", cases); }
  { Args a; a.out.seq = 99; expect_invalid(a, "out: shape", cases); }
  MESSAGE("mismatch cases: " << cases);
}

TEST_CASE("validation: head dim above 512 is rejected; 512 is accepted") {
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
  CHECK_NOTHROW(validate_attention(a.q, a.k, a.v, a.out, a.p, jit::Arch::Sm90a));
}

TEST_CASE("validation: out overlapping an input is rejected") {
  int cases = 0;
  for (const char* victim : {"q", "k", "v"}) {
    Args a;
    const TensorRef& in = std::string(victim) == "q" ? a.q : std::string(victim) == "k" ? a.k : a.v;
    a.out.data = static_cast<const char*>(in.data) + 64;  // inside the input
    expect_invalid(a, std::string("out overlaps ") + victim, cases);
  }
  Args a;
  a.p.lse = reinterpret_cast<float*>(const_cast<void*>(a.out.data));
  expect_invalid(a, "lse overlaps", cases);
}

TEST_CASE("validation: parameter values out of range") {
  int cases = 0;
  { Args a; a.p.sm_scale = -1.f; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = NAN; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.sm_scale = INFINITY; expect_invalid(a, "sm_scale", cases); }
  { Args a; a.p.qk_bits = static_cast<QkBits>(6); expect_invalid(a, "qk_bits=6", cases); }
  { Args a; a.p.causal = static_cast<CausalMode>(7); expect_invalid(a, "causal=7", cases); }
  { Args a; a.p.smooth_q = static_cast<Toggle>(9); expect_invalid(a, "smooth_q=9", cases); }
  { Args a; a.p.lse = reinterpret_cast<float*>(0x50000002); expect_invalid(a, "lse", cases); }
  { Args a; a.p.workspace = reinterpret_cast<void*>(0x60000010); expect_invalid(a, "workspace", cases); }
  { Args a; a.p.workspace_bytes = 1024; expect_invalid(a, "workspace_bytes=1024", cases); }
  MESSAGE("parameter cases: " << cases);
}
