// Scalar number formats of the CPU reference: half, bfloat16, FP8 (E4M3 / E5M2), mantissa
// truncation, and the integer quantization rule of the quantize stage.
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/internal.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Fp8Params {
  int mbits;        // mantissa bits
  int bias;         // exponent bias
  float maxv;       // largest finite magnitude
  std::uint8_t max_code;  // its code (sign clear)
};

Fp8Params params(Fp8Format f) {
  if (f == Fp8Format::E4M3) return {3, 7, 448.f, 0x7E};
  return {2, 15, 57344.f, 0x7B};
}

// Step (quantum) of the format around magnitude a (a finite, >= 0, < max).
double fp8_step(double a, const Fp8Params& p) {
  const int emin = 1 - p.bias;
  int e = 0;
  std::frexp(a, &e);          // a = fr * 2^e, fr in [0.5, 1)  → floor(log2 a) = e - 1
  int E = (a == 0.0) ? emin : e - 1;
  if (E < emin) E = emin;
  return std::ldexp(1.0, E - p.mbits);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return float_of(sign | 0x7F800000u | (man << 13));   // Inf / NaN (payload kept)
  if (exp == 0) {
    // zero or subnormal: man * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = bits_of(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {
    if (x > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  }
  if (x >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: RNE → Inf
  if (x >= 0x38800000u) {                                                   // normal half range
    const std::uint32_t odd = (x >> 13) & 1u;
    x += 0xFFFu + odd;                       // round to nearest, ties to even (carry is correct)
    x -= 112u << 23;                         // rebias 127 → 15
    return static_cast<std::uint16_t>(sign | (x >> 13));
  }
  // half subnormal (or zero): value / 2^-24 rounded to an integer, ties to even. Exact scaling.
  const float scaled = std::ldexp(float_of(x), 24);
  const auto m = static_cast<std::uint32_t>(std::nearbyint(scaled));   // 0..1024 (1024 = min normal)
  return static_cast<std::uint16_t>(sign | m);
}

float bf16_to_float(std::uint16_t b) noexcept { return float_of(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t x = bits_of(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float round_to_dtype(float x, DType t) noexcept {
  switch (t) {
    case DType::F16: return half_to_float(float_to_half(x));
    case DType::BF16: return bf16_to_float(float_to_bf16(x));
    case DType::F32: return x;
  }
  return x;
}

// ---------------------------------------------------------------------------------------------
const char* fp8_format_name(Fp8Format f) noexcept { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

float fp8_max(Fp8Format f) noexcept { return params(f).maxv; }

float fp8_to_float(std::uint8_t c, Fp8Format f) noexcept {
  const Fp8Params p = params(f);
  const bool neg = (c & 0x80u) != 0;
  const int e = (c & 0x7F) >> p.mbits;
  const int m = c & ((1 << p.mbits) - 1);
  const int emax_field = (1 << (7 - p.mbits)) - 1;
  float v;
  if (f == Fp8Format::E4M3 && e == emax_field && m == (1 << p.mbits) - 1) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (f == Fp8Format::E5M2 && e == emax_field) {
    v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), 1 - p.bias - p.mbits);
  } else {
    v = std::ldexp(static_cast<float>((1 << p.mbits) + m), e - p.bias - p.mbits);
  }
  return neg ? -v : v;
}

std::uint8_t float_to_fp8(float x, Fp8Format f) noexcept {
  if (std::isnan(x)) return 0x7F;
  const Fp8Params p = params(f);
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= p.maxv) return static_cast<std::uint8_t>(sign | p.max_code);   // satfinite (Inf too)
  const double q = fp8_step(a, p);
  const double n = std::nearbyint(a / q);      // exact division by a power of two; RNE
  const int emin = 1 - p.bias;
  int E;
  {
    int e = 0;
    std::frexp(a, &e);
    E = (a == 0.0) ? emin : e - 1;
    if (E < emin) E = emin;
  }
  const int lead = 1 << p.mbits;
  auto ni = static_cast<int>(n);
  int field;
  int man;
  if (ni < lead) {          // subnormal result (only when E == emin)
    field = 0;
    man = ni;
  } else {
    if (ni == 2 * lead) {   // rounding carried into the next binade
      ni = lead;
      ++E;
    }
    field = E + p.bias;
    man = ni - lead;
  }
  return static_cast<std::uint8_t>(sign | (field << p.mbits) | man);
}

// Same result as fp8_to_float(float_to_fp8(x, f), f) (a test checks it on a dense sweep), but
// with float bit operations: the emulation rounds every P̃ through it.
float fp8_round(float x, Fp8Format f) noexcept {
  if (std::isnan(x)) return x;
  const int mbits = f == Fp8Format::E4M3 ? 3 : 2;
  const float maxv = f == Fp8Format::E4M3 ? 448.f : 57344.f;
  const float min_normal = f == Fp8Format::E4M3 ? 0.015625f : 6.103515625e-05f;   // 2^-6, 2^-14
  const float a = std::fabs(x);
  float r;
  if (a >= maxv) {
    r = maxv;
  } else if (a < min_normal) {
    // subnormal grid: multiples of 2^(emin - mbits); exact scaling, RNE
    const int sub_exp = (f == Fp8Format::E4M3 ? -6 : -14) - mbits;
    r = std::ldexp(std::nearbyint(std::ldexp(a, -sub_exp)), sub_exp);
  } else {
    const int drop = 23 - mbits;
    std::uint32_t u = bits_of(a);
    u += ((1u << (drop - 1)) - 1u) + ((u >> drop) & 1u);   // round to nearest even at bit `drop`
    u &= ~((1u << drop) - 1u);
    r = float_of(u);
    if (r > maxv) r = maxv;   // satfinite
  }
  return std::signbit(x) ? -r : r;
}

float fp8_margin(float x, Fp8Format f) noexcept {
  if (std::isnan(x)) return std::numeric_limits<float>::infinity();
  const Fp8Params p = params(f);
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return std::numeric_limits<float>::infinity();
  if (a >= p.maxv) {   // saturates: distance past the boundary between max and its predecessor
    const double gap = p.maxv - fp8_to_float(static_cast<std::uint8_t>(p.max_code - 1), f);
    return static_cast<float>(0.5 + (a - p.maxv) / gap);
  }
  // Boundaries are the midpoints between consecutive codes; measure the distance to the nearer
  // one around the code a rounds to, in units of that pair's gap.
  const int code = float_to_fp8(static_cast<float>(a), f) & 0x7F;
  const double r = fp8_to_float(static_cast<std::uint8_t>(code), f);
  double best = std::numeric_limits<double>::infinity();
  if (code < p.max_code) {
    const double up = fp8_to_float(static_cast<std::uint8_t>(code + 1), f);
    best = std::min(best, std::fabs(a - 0.5 * (r + up)) / (up - r));
  }
  if (code > 0) {
    const double dn = fp8_to_float(static_cast<std::uint8_t>(code - 1), f);
    best = std::min(best, std::fabs(a - 0.5 * (r + dn)) / (r - dn));
  }
  return static_cast<float>(best);
}

float half_margin(float x) noexcept {
  if (std::isnan(x)) return std::numeric_limits<float>::infinity();
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return std::numeric_limits<float>::infinity();
  // codes of a non-negative half are ordered like their bits; the boundaries are the midpoints
  const std::uint16_t code = float_to_half(static_cast<float>(a));
  const double r = half_to_float(code);
  double best = std::numeric_limits<double>::infinity();
  if (code < 0x7C00) {  // below Inf: the next code up (0x7C00 itself: the midpoint to Inf is 65520)
    const double up = code + 1 < 0x7C00 ? half_to_float(static_cast<std::uint16_t>(code + 1)) : 65536.0;
    best = std::min(best, std::fabs(a - 0.5 * (r + up)) / (up - r));
  }
  if (code > 0 && code <= 0x7C00) {
    const double dn = half_to_float(static_cast<std::uint16_t>(code - 1));
    const double rr = code == 0x7C00 ? 65536.0 : r;
    best = std::min(best, std::fabs(a - 0.5 * (rr + dn)) / (rr - dn));
  }
  return static_cast<float>(best);
}

float int_margin(float t, int R) noexcept {
  if (std::isnan(t)) return std::numeric_limits<float>::infinity();
  const double a = std::fabs(static_cast<double>(t));
  if (a >= R) return static_cast<float>(0.5 + (a - R));
  const double r = std::nearbyint(a);
  return static_cast<float>(0.5 - std::fabs(a - r));
}

int quantize_int(float x, float inv, int R) noexcept {
  float t = x * inv;
  if (std::isnan(t)) t = 0.f;
  const float fr = static_cast<float>(R);
  if (t > fr) t = fr;
  if (t < -fr) t = -fr;
  return static_cast<int>(std::nearbyint(t));
}

float truncate_mantissa(float x, int bits) noexcept {
  if (bits >= 23 || !std::isfinite(x)) return x;
  if (bits < 0) bits = 0;
  const std::uint32_t mask = ~((1u << (23 - bits)) - 1u);
  return float_of(bits_of(x) & mask);
}

}  // namespace sage2::reference
