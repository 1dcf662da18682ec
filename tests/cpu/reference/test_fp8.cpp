// Specification: FP8 E4M3 / E5M2 as the OCP 8-bit float spec defines them, encoded like PTX
// cvt.rn.satfinite (round to nearest even, saturate to the largest finite value, NaN → 0x7F).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "sage2/reference.hpp"

using namespace sage2::reference;

namespace {

// The OCP definitions, written from the spec's field description:
//  E4M3: bias 7, subnormal (E=0) = M/8 · 2^-6, normal = (1 + M/8) · 2^(E-7); S.1111.111 is NaN,
//        there is no Inf.
//  E5M2: bias 15, subnormal = M/4 · 2^-14, normal = (1 + M/4) · 2^(E-15); E = 31: M = 0 Inf,
//        else NaN.
double defined_value(int code, Fp8Format f) {
  const double s = (code & 0x80) ? -1.0 : 1.0;
  if (f == Fp8Format::E4M3) {
    const int E = (code >> 3) & 0xF, M = code & 0x7;
    if (E == 15 && M == 7) return std::numeric_limits<double>::quiet_NaN();
    if (E == 0) return s * (M / 8.0) * std::pow(2.0, -6);
    return s * (1.0 + M / 8.0) * std::pow(2.0, E - 7);
  }
  const int E = (code >> 2) & 0x1F, M = code & 0x3;
  if (E == 31) return M == 0 ? s * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (E == 0) return s * (M / 4.0) * std::pow(2.0, -14);
  return s * (1.0 + M / 4.0) * std::pow(2.0, E - 15);
}

bool is_nan_code(int code, Fp8Format f) {
  const int c = code & 0x7F;
  return f == Fp8Format::E4M3 ? c == 0x7F : (c >= 0x7D);
}

bool is_inf_code(int code, Fp8Format f) { return f == Fp8Format::E5M2 && (code & 0x7F) == 0x7C; }

}  // namespace

TEST_CASE("fp8: all 256 codes decode to their defined values") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CAPTURE(fp8_format_name(f));
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      CAPTURE(c);
      const float got = fp8_to_float(static_cast<std::uint8_t>(c), f);
      const double want = defined_value(c, f);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
        ++nans;
      } else {
        CHECK(static_cast<double>(got) == want);
        CHECK(std::signbit(got) == ((c & 0x80) != 0));   // -0 included
      }
    }
    CHECK(nans == (f == Fp8Format::E4M3 ? 2 : 6));
  }
  // anchors from the spec tables
  CHECK(fp8_to_float(0x7E, Fp8Format::E4M3) == 448.f);
  CHECK(fp8_to_float(0xFE, Fp8Format::E4M3) == -448.f);
  CHECK(fp8_to_float(0x38, Fp8Format::E4M3) == 1.f);
  CHECK(fp8_to_float(0x01, Fp8Format::E4M3) == 0.001953125f);     // 2^-9
  CHECK(fp8_to_float(0x08, Fp8Format::E4M3) == 0.015625f);        // 2^-6
  CHECK(fp8_to_float(0x7B, Fp8Format::E5M2) == 57344.f);
  CHECK(fp8_to_float(0x3C, Fp8Format::E5M2) == 1.f);
  CHECK(fp8_to_float(0x01, Fp8Format::E5M2) == 1.52587890625e-05f); // 2^-16
  CHECK(std::isinf(fp8_to_float(0x7C, Fp8Format::E5M2)));
  CHECK(fp8_to_float(0xFC, Fp8Format::E5M2) < 0);
  CHECK(fp8_max(Fp8Format::E4M3) == 448.f);
  CHECK(fp8_max(Fp8Format::E5M2) == 57344.f);
}

TEST_CASE("fp8: positive finite codes are strictly increasing (so neighbours are code ± 1)") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const int top = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
    for (int c = 0; c < top; ++c) CHECK(fp8_to_float(static_cast<std::uint8_t>(c), f) < fp8_to_float(static_cast<std::uint8_t>(c + 1), f));
  }
}

TEST_CASE("fp8: encoding every decoded finite value gives the code back") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CAPTURE(fp8_format_name(f));
    for (int c = 0; c < 256; ++c) {
      if (is_nan_code(c, f) || is_inf_code(c, f)) continue;
      CAPTURE(c);
      CHECK(float_to_fp8(fp8_to_float(static_cast<std::uint8_t>(c), f), f) == c);
    }
  }
}

TEST_CASE("fp8: ties round to even, everything else to nearest") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CAPTURE(fp8_format_name(f));
    const int top = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
    int ties = 0;
    for (int c = 0; c < top; ++c) {
      for (int sign : {0, 0x80}) {
        const float a = fp8_to_float(static_cast<std::uint8_t>(c | sign), f);
        const float b = fp8_to_float(static_cast<std::uint8_t>((c + 1) | sign), f);
        const float mid = 0.5f * (a + b);   // exact: fp8 values have few mantissa bits
        REQUIRE(static_cast<double>(mid) == 0.5 * (static_cast<double>(a) + static_cast<double>(b)));
        const int even = (c % 2 == 0) ? c : c + 1;   // the even code of the pair (mantissa LSB 0)
        CAPTURE(c);
        CHECK(float_to_fp8(mid, f) == (even | sign));
        CHECK(fp8_margin(mid, f) == 0.0f);
        ++ties;
        const float nudge = std::fabs(b - a) * 1e-3f;
        const float toward_a = sign ? mid + nudge : mid - nudge;
        const float toward_b = sign ? mid - nudge : mid + nudge;
        CHECK(float_to_fp8(toward_a, f) == (c | sign));
        CHECK(float_to_fp8(toward_b, f) == ((c + 1) | sign));
      }
    }
    CHECK(ties == 2 * top);
  }
  // below half the smallest subnormal → zero; exactly half → tie to even (zero); above → 0x01
  const float sub = fp8_to_float(0x01, Fp8Format::E4M3);
  CHECK(float_to_fp8(0.5f * sub, Fp8Format::E4M3) == 0x00);
  CHECK(float_to_fp8(0.51f * sub, Fp8Format::E4M3) == 0x01);
  CHECK(float_to_fp8(-0.4f * sub, Fp8Format::E4M3) == 0x80);   // sign kept on underflow
  CHECK(float_to_fp8(1.5f * sub, Fp8Format::E4M3) == 0x02);    // tie between 1 and 2 → 2 (even)
}

TEST_CASE("fp8: overflow saturates to the largest finite value") {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.0001f, 464.f, 479.f, 480.f, 1000.f, 1e30f, inf}) {
    CAPTURE(x);
    CHECK(float_to_fp8(x, Fp8Format::E4M3) == 0x7E);
    CHECK(float_to_fp8(-x, Fp8Format::E4M3) == 0xFE);
    CHECK(fp8_round(x, Fp8Format::E4M3) == 448.f);
  }
  for (float x : {57344.5f, 61440.f, 65536.f, 1e30f, inf}) {
    CAPTURE(x);
    CHECK(float_to_fp8(x, Fp8Format::E5M2) == 0x7B);
    CHECK(float_to_fp8(-x, Fp8Format::E5M2) == 0xFB);
    CHECK(fp8_round(-x, Fp8Format::E5M2) == -57344.f);
  }
  // just below the top: nearest of {416, 448} for E4M3
  CHECK(float_to_fp8(431.f, Fp8Format::E4M3) == 0x7D);
  CHECK(float_to_fp8(433.f, Fp8Format::E4M3) == 0x7E);
  CHECK(fp8_margin(500.f, Fp8Format::E4M3) > 0.5f);
}

TEST_CASE("fp8: NaN handling is defined") {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CHECK(float_to_fp8(qnan, f) == 0x7F);
    CHECK(float_to_fp8(-qnan, f) == 0x7F);
    CHECK(std::isnan(fp8_to_float(0x7F, f)));
    CHECK(std::isnan(fp8_round(qnan, f)));
    CHECK(std::isinf(fp8_margin(qnan, f)));
  }
  CHECK(std::isnan(fp8_to_float(0xFF, Fp8Format::E4M3)));
  for (int c : {0x7D, 0x7E, 0xFD, 0xFE, 0xFF}) CHECK(std::isnan(fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E5M2)));
}

TEST_CASE("fp8: margin is the distance to the nearest rounding boundary in code steps") {
  CHECK(fp8_margin(1.0f, Fp8Format::E4M3) == doctest::Approx(0.5));
  CHECK(fp8_margin(1.0f + 0.125f * 0.25f, Fp8Format::E4M3) == doctest::Approx(0.25));   // quarter step
  CHECK(fp8_margin(1.0f + 0.125f * 0.5f, Fp8Format::E4M3) == doctest::Approx(0.0));     // tie
  CHECK(fp8_margin(3.0f, Fp8Format::E5M2) == doctest::Approx(0.5));
  CHECK(int_margin(2.5f, 7) == doctest::Approx(0.0));
  CHECK(int_margin(2.0f, 7) == doctest::Approx(0.5));
  CHECK(int_margin(-2.2f, 7) == doctest::Approx(0.3));
  CHECK(int_margin(7.25f, 7) == doctest::Approx(0.75));
}

TEST_CASE("fp8: the integer quantization rule (rint, ties to even, clamp, NaN → 0)") {
  CHECK(quantize_int(2.5f, 1.f, 7) == 2);
  CHECK(quantize_int(3.5f, 1.f, 7) == 4);
  CHECK(quantize_int(-2.5f, 1.f, 7) == -2);
  CHECK(quantize_int(7.4f, 1.f, 7) == 7);
  CHECK(quantize_int(100.f, 1.f, 7) == 7);
  CHECK(quantize_int(-1000.f, 1.f, 127) == -127);
  CHECK(quantize_int(std::numeric_limits<float>::quiet_NaN(), 1.f, 127) == 0);
  CHECK(quantize_int(std::numeric_limits<float>::infinity(), 0.f, 127) == 0);   // inf·0 = NaN → 0
}

TEST_CASE("fp8: mantissa truncation models the FP22 accumulator") {
  const float x = 1.0f + std::ldexp(1.0f, -13) + std::ldexp(1.0f, -20);   // bits below the 13th
  CHECK(truncate_mantissa(x, 23) == x);
  CHECK(truncate_mantissa(x, 13) == 1.0f + std::ldexp(1.0f, -13));
  CHECK(truncate_mantissa(-x, 13) == -(1.0f + std::ldexp(1.0f, -13)));     // toward zero
  CHECK(truncate_mantissa(1.0f + std::ldexp(1.0f, -13), 13) == 1.0f + std::ldexp(1.0f, -13));   // exact stays
  CHECK(truncate_mantissa(1.0f + std::ldexp(1.0f, -14), 13) == 1.0f);
  CHECK(std::isinf(truncate_mantissa(std::numeric_limits<float>::infinity(), 13)));
}

TEST_CASE("fp8: fp8_round equals decode(encode(x)) on a dense sweep of floats") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CAPTURE(fp8_format_name(f));
    std::int64_t checked = 0;
    // every 601st float bit pattern from 0 up to beyond the saturation point, both signs
    for (std::uint32_t u = 0; u < 0x48000000u; u += 601) {
      float x;
      std::memcpy(&x, &u, 4);
      for (float y : {x, -x}) {
        const float slow = fp8_to_float(float_to_fp8(y, f), f);
        const float fast = fp8_round(y, f);
        if (!(slow == fast && std::signbit(slow) == std::signbit(fast))) {
          CAPTURE(y);
          REQUIRE(fast == slow);
        }
        ++checked;
      }
    }
    CHECK(checked > 4000000);
  }
}
