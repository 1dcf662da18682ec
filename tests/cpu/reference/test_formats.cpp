// Specification: half <-> float and bfloat16 <-> float conversions are exact in the widening
// direction and round to nearest even in the narrowing one (GPU tests make their inputs with them).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// binary16 value from its fields (IEEE 754): bias 15, 10 mantissa bits.
double half_defined(int h) {
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  const int E = (h >> 10) & 0x1F, M = h & 0x3FF;
  if (E == 31) return M ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  if (E == 0) return s * M * std::pow(2.0, -24);
  return s * (1.0 + M / 1024.0) * std::pow(2.0, E - 15);
}
}  // namespace

TEST_CASE("formats: every half decodes to its IEEE value and re-encodes to itself") {
  int nan_count = 0;
  for (int h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    const double want = half_defined(h);
    if (std::isnan(want)) {
      ++nan_count;
      REQUIRE(std::isnan(f));
      REQUIRE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    REQUIRE(static_cast<double>(f) == want);
    REQUIRE(std::signbit(f) == ((h & 0x8000) != 0));
    REQUIRE(float_to_half(f) == h);
  }
  CHECK(nan_count == 2 * 1023);
}

TEST_CASE("formats: float → half rounds to nearest even and overflows to Inf") {
  int ties = 0;
  for (int h = 0; h < 0x7BFF; ++h) {   // consecutive positive finite pairs (h, h+1)
    const double a = half_to_float(static_cast<std::uint16_t>(h)), b = half_to_float(static_cast<std::uint16_t>(h + 1));
    const auto mid = static_cast<float>(0.5 * (a + b));   // exact in float
    REQUIRE(static_cast<double>(mid) == 0.5 * (a + b));
    const int even = (h % 2 == 0) ? h : h + 1;
    REQUIRE(float_to_half(mid) == even);
    REQUIRE(float_to_half(-mid) == (even | 0x8000));
    REQUIRE(float_to_half(std::nextafter(mid, 0.f)) == h);
    REQUIRE(float_to_half(std::nextafter(mid, 1e9f)) == h + 1);
    ++ties;
  }
  CHECK(ties == 0x7BFF);
  CHECK(float_to_half(65504.f) == 0x7BFF);
  CHECK(float_to_half(65519.99f) == 0x7BFF);
  CHECK(float_to_half(65520.f) == 0x7C00);   // tie between max and (virtual) 65536 → even → Inf
  CHECK(float_to_half(-1e10f) == 0xFC00);
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(float_to_half(1e-9f) == 0x0000);      // below half the smallest subnormal
  CHECK(float_to_half(-1e-9f) == 0x8000);
  CHECK(float_to_half(std::ldexp(1.f, -25)) == 0x0000);                 // tie to even (0)
  CHECK(float_to_half(std::ldexp(1.f, -25) * 1.0001f) == 0x0001);
  CHECK((float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7C00) == 0x7C00);
  CHECK((float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x03FF) != 0);
}

TEST_CASE("formats: bfloat16 is the top half of float, rounded to nearest even") {
  for (int b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(b));
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    REQUIRE(u == static_cast<std::uint32_t>(b) << 16);
    if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == b);
    else REQUIRE(std::isnan(bf16_to_float(float_to_bf16(f))));
  }
  // ties: exactly halfway between two bf16 values
  CHECK(float_to_bf16(from_bits(0x3F808000u)) == 0x3F80);   // 1 + 2^-8: between 0x3F80 and 0x3F81 → even
  CHECK(float_to_bf16(from_bits(0x3F818000u)) == 0x3F82);   // between 0x3F81 and 0x3F82 → even
  CHECK(float_to_bf16(from_bits(0x3F808001u)) == 0x3F81);
  CHECK(float_to_bf16(from_bits(0x7F7FFFFFu)) == 0x7F80);   // float max rounds to Inf in bf16
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
}

TEST_CASE("formats: round_to_dtype and HostTensor store with the same rounding") {
  const float x = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20);
  CHECK(round_to_dtype(x, DType::F16) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(round_to_dtype(x, DType::BF16) == 1.0f);
  CHECK(round_to_dtype(x, DType::F32) == x);
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (bool nhd : {false, true}) {
      HostTensor h(t, 2, 3, 5, 7, nhd);
      h.set(1, 2, 4, 6, x);
      h.set(0, 1, 3, 0, -x);
      CHECK(h.get(1, 2, 4, 6) == round_to_dtype(x, t));
      const TensorRef r = h.ref();
      CHECK(load(r, 1, 2, 4, 6) == round_to_dtype(x, t));
      CHECK(load(r, 0, 1, 3, 0) == -round_to_dtype(x, t));
      CHECK(load(r, 0, 0, 0, 0) == 0.f);
    }
}
