// Names of enum values as tables, so one table serves both directions: the name of a value
// (sage2.hpp's *_name functions, the reference's and the kernels' own) and the value of a name
// (the environment's SAGE2_ATTENTION_FAMILY and SAGE2_QUANT_PATH, the tuning database's dtype),
// and the list of accepted names an error message gives.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "sage2/sage2.hpp"

namespace sage2::base {

template <class E>
struct Named {
  E value;
  const char* name;
};

// The name of `v`, or `unknown` for a value outside the table (a cast from a bad int).
template <class E, std::size_t N>
constexpr const char* name_of(E v, const Named<E> (&table)[N], const char* unknown = "?") noexcept {
  for (const Named<E>& n : table)
    if (n.value == v) return n.name;
  return unknown;
}

template <class E, std::size_t N>
std::optional<E> value_named(std::string_view name, const Named<E> (&table)[N]) {
  for (const Named<E>& n : table)
    if (name == n.name) return n.value;
  return std::nullopt;
}

// "a, b, c": the names in table order.
template <class E, std::size_t N>
std::string names_list(const Named<E> (&table)[N]) {
  std::string s;
  for (const Named<E>& n : table) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

// The public enums' names (include/sage2/sage2.hpp), one line each like the enums themselves.
inline constexpr Named<DType> kDTypeNames[] = {{DType::F16, "f16"}, {DType::BF16, "bf16"}, {DType::F32, "f32"}};
inline constexpr Named<CausalMode> kCausalModeNames[] = {
    {CausalMode::None, "none"}, {CausalMode::TopLeft, "top_left"}, {CausalMode::BottomRight, "bottom_right"}};
inline constexpr Named<MaskType> kMaskTypeNames[] = {{MaskType::None, "none"}, {MaskType::Bool, "bool"},
                                                     {MaskType::F16, "f16"},   {MaskType::BF16, "bf16"},
                                                     {MaskType::F32, "f32"}};
inline constexpr Named<AttentionFamily> kAttentionFamilyNames[] = {
    {AttentionFamily::Auto, "auto"}, {AttentionFamily::Mma, "mma"}, {AttentionFamily::Wgmma, "wgmma"}};
inline constexpr Named<PvPrecision> kPvPrecisionNames[] = {
    {PvPrecision::Auto, "auto"}, {PvPrecision::Fp8, "fp8"}, {PvPrecision::Fp16, "fp16"}};
inline constexpr Named<PvAccum> kPvAccumNames[] = {
    {PvAccum::Auto, "auto"}, {PvAccum::Fp32, "fp32"}, {PvAccum::Fp16, "fp16"}, {PvAccum::PreferFp16, "prefer_fp16"}};
inline constexpr Named<SmallQPath> kSmallQPathNames[] = {
    {SmallQPath::Auto, "auto"}, {SmallQPath::Quantized, "quantized"}, {SmallQPath::Direct, "direct"}};
inline constexpr Named<QuantPath> kQuantPathNames[] = {{QuantPath::Auto, "auto"}, {QuantPath::Split, "split"},
                                                       {QuantPath::Fused, "fused"}, {QuantPath::Cluster, "cluster"},
                                                       {QuantPath::OnePass, "onepass"}};

}  // namespace sage2::base
