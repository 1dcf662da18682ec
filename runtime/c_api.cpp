// The C ABI: catches every exception at the boundary and turns it into a status + message.
#include "sage2/sage2.h"

#include <cstring>
#include <new>
#include <string>

#include "sage2/sage2.hpp"

struct sage2_context {
  sage2::Context cpp;
};

namespace {
thread_local std::string g_last_error;

template <class F>
sage2_status guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return SAGE2_OK;
  } catch (const sage2::Error& e) {
    g_last_error = e.what();
    return static_cast<sage2_status>(e.code());
  } catch (const std::bad_alloc&) {
    g_last_error = "sage2 out_of_memory: host allocation failed";
    return SAGE2_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    g_last_error = std::string("sage2 internal: ") + e.what();
    return SAGE2_ERROR_INTERNAL;
  } catch (...) {
    g_last_error = "sage2 internal: unknown exception";
    return SAGE2_ERROR_INTERNAL;
  }
}

void require(bool ok, const char* what) {
  if (!ok) throw sage2::Error(sage2::ErrorCode::InvalidArgument, what);
}

void copy_out(const std::string& s, char* dst, size_t n) {
  if (!dst || n == 0) return;
  const size_t k = s.size() < n - 1 ? s.size() : n - 1;
  std::memcpy(dst, s.data(), k);
  dst[k] = '\0';
}
}  // namespace

extern "C" {

const char* sage2_last_error(void) { return g_last_error.c_str(); }

const char* sage2_status_name(sage2_status s) {
  return sage2::error_code_name(static_cast<sage2::ErrorCode>(s));
}

const char* sage2_version(void) { return SAGE2_VERSION; }

int sage2_device_count(void) { return sage2::device_count(); }

sage2_status sage2_context_create(int device, const char* cache_dir, int disk_cache, sage2_context** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    sage2::ContextOptions o;
    o.disk_cache = disk_cache != 0;
    if (cache_dir) o.cache_dir = cache_dir;
    *out = new sage2_context{sage2::Context(device, o)};
  });
}

sage2_status sage2_context_destroy(sage2_context* ctx) {
  return guarded([&] { delete ctx; });
}

sage2_status sage2_context_device(const sage2_context* ctx, char* name, size_t name_size, char* arch,
                                  size_t arch_size) {
  return guarded([&] {
    require(ctx != nullptr, "ctx is NULL");
    copy_out(ctx->cpp.device().name, name, name_size);
    copy_out(ctx->cpp.device().arch, arch, arch_size);
  });
}

}  // extern "C"
