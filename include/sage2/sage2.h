/* sage2 — C ABI. Every function returns a sage2_status; on failure the calling thread's
 * sage2_last_error() describes it (offending argument and value, kernel key, NVRTC log).
 * Status values equal sage2::ErrorCode and never change. */
#ifndef SAGE2_SAGE2_H
#define SAGE2_SAGE2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sage2_status {
  SAGE2_OK = 0,
  SAGE2_ERROR_INVALID_ARGUMENT = 1,
  SAGE2_ERROR_UNSUPPORTED = 2,
  SAGE2_ERROR_NO_DRIVER = 3,
  SAGE2_ERROR_DRIVER = 4,
  SAGE2_ERROR_COMPILE = 5,
  SAGE2_ERROR_NVRTC_MISSING = 6,
  SAGE2_ERROR_CACHE = 7,
  SAGE2_ERROR_OUT_OF_MEMORY = 8,
  SAGE2_ERROR_INTERNAL = 9
} sage2_status;

typedef struct sage2_context sage2_context;

/* Message of the last failed call on this thread ("" after a success). Valid until the next
 * sage2 call on this thread. */
const char* sage2_last_error(void);
/* Stable name of a status, e.g. "invalid_argument". */
const char* sage2_status_name(sage2_status s);

/* Library version string, e.g. "0.1.0". */
const char* sage2_version(void);
/* Number of visible CUDA devices (0 without a driver). */
int sage2_device_count(void);

/* cache_dir may be NULL (environment default); disk_cache 0 disables the disk cache. */
sage2_status sage2_context_create(int device, const char* cache_dir, int disk_cache, sage2_context** out);
sage2_status sage2_context_destroy(sage2_context* ctx);
/* Writes the device name and code target ("sm_90a") into caller buffers (NUL-terminated,
 * truncated to the given sizes). */
sage2_status sage2_context_device(const sage2_context* ctx, char* name, size_t name_size, char* arch,
                                  size_t arch_size);

#ifdef __cplusplus
}
#endif
#endif /* SAGE2_SAGE2_H */
