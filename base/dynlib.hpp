// Entry points of a library opened with dlopen and never linked (libnvrtc, libcrypto): one way to
// look a list of them up and name the ones the library lacks. (The driver's entry points are an
// X-macro over cuda.h's prototypes instead: base/driver.hpp.)
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace sage2::base::dynlib {

// An entry point to look up: its exported name and the function pointer to set.
template <typename F>
struct Symbol {
  const char* name;
  F* fn;
};
template <typename F>
Symbol<F> symbol(const char* name, F& fn) {
  return {name, &fn};
}

// Sets each symbol's function pointer from handle `h` (null where the library lacks it) and
// returns the names it lacks, ", "-separated ("" when it has them all).
template <typename... F>
std::string resolve(void* h, Symbol<F>... symbols) {
  std::string missing;
  auto one = [&](auto s) {
    *s.fn = reinterpret_cast<std::remove_reference_t<decltype(*s.fn)>>(::dlsym(h, s.name));
    if (!*s.fn) missing += (missing.empty() ? "" : ", ") + std::string(s.name);
  };
  (one(symbols), ...);
  return missing;
}

}  // namespace sage2::base::dynlib
