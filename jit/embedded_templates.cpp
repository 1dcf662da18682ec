#include "jit/embedded_templates.hpp"

#include "base/hash.hpp"
#include "sage2/sage2.hpp"

namespace sage2::jit {

std::string_view embedded_template(std::string_view name) {
  for (const auto& t : embedded_templates())
    if (t.name == name) return t.text;
  throw Error(ErrorCode::Internal, "no embedded template named '" + std::string(name) + "'");
}

std::uint64_t templates_hash() {
  static const std::uint64_t h = [] {
    std::uint64_t x = base::fnv1a64("sage2-templates", 15);
    for (const auto& t : embedded_templates()) {
      x = base::fnv1a64(t.name.data(), t.name.size(), x);
      x = base::fnv1a64(t.text.data(), t.text.size(), x);
    }
    return x;
  }();
  return h;
}

}  // namespace sage2::jit
