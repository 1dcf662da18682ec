// Internal pieces of the C ABI (not installed): the context handle and the exception boundary,
// shared by runtime/c_api.cpp and the entry points of higher layers (autotune/api.cpp: sage2_tune),
// and the conversion layer's entry point for tests: sage2_attention() and sage2_workspace_size()
// refuse a NULL context before they convert anything, so without a GPU the conversion of C
// arguments (tensor pointers, dtype codes, smooth flags, enum codes) could not be exercised.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "kernels/arch.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

struct sage2_context {
  sage2::Context cpp;
};

namespace sage2::runtime::c_abi {

// The calling thread's message for sage2_last_error().
std::string& last_error();

// Runs f at the C boundary: every exception becomes a status and the thread's last error.
template <class F>
sage2_status guarded(F&& f) {
  try {
    f();
    last_error().clear();
    return SAGE2_OK;
  } catch (const sage2::Error& e) {
    last_error() = e.what();
    return static_cast<sage2_status>(e.code());
  } catch (const std::bad_alloc&) {
    last_error() = "sage2 out_of_memory: host allocation failed";
    return SAGE2_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error() = std::string("sage2 internal: ") + e.what();
    return SAGE2_ERROR_INTERNAL;
  } catch (...) {
    last_error() = "sage2 internal: unknown exception";
    return SAGE2_ERROR_INTERNAL;
  }
}

inline void require(bool ok, const char* what) {
  if (!ok) throw sage2::Error(sage2::ErrorCode::InvalidArgument, what);
}

// Copies s into dst[0, n) NUL-terminated, truncating (nothing when dst is NULL or n is 0).
void copy_out(const std::string& s, char* dst, size_t n);

}  // namespace sage2::runtime::c_abi

// What sage2_attention() does with its arguments once it has a context on a device of `arch`,
// short of touching the device: converts each C argument (NULL tensor, dtype code, smooth_k /
// smooth_v flags checked here) then runs the attention argument validation. Returns its status
// (SAGE2_OK when the call would be accepted) and sets sage2_last_error() like any C entry point.
// Arguments are converted in order q, k, v, out, params, so with several bad ones the first is named.
sage2_status sage2_validate_attention_args(const sage2_tensor* q, const sage2_tensor* k, const sage2_tensor* v,
                                           const sage2_tensor* out, const sage2_attention_params* params,
                                           sage2::kernels::Arch arch);
