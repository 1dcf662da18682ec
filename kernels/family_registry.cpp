// The registry: the list of attention families (declared in kernels/attention_family.hpp). Its
// own unit, above the descriptors it lists, so that the descriptor interface and the families
// that implement it do not include each other.
#include "kernels/attention_family.hpp"
#include "kernels/family_mma.hpp"
#include "kernels/family_wgmma.hpp"

namespace sage2::kernels {

// The descriptors are constant-initialised objects (kernels/family_*.cpp): the registry is usable
// from any static initialiser.
std::span<const AttentionFamilyDesc* const> attention_families() noexcept {
  static const AttentionFamilyDesc* const families[] = {&mma_family(), &wgmma_family()};
  return families;
}

}  // namespace sage2::kernels
