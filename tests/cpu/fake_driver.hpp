// A fake CUDA driver for CPU tests of the GPU paths (first written for sage2-autotune's,
// tests/cpu/autotune/test_fake_driver.cpp): a C file compiled at test time into a shared library
// that a child process loads through SAGE2_LIBCUDA (the driver is loaded once per process). It
// reports one sm_90 device, keeps "device" memory in host memory and runs no kernel: a launch
// advances a virtual clock by 0.002 ms + 1 ns per byte of dynamic shared memory, and events read
// that clock. Every driver entry point sage2 resolves (base/driver.hpp's X-macro, read at test
// time) is exported; the ones not defined here fail with CUDA_ERROR_NOT_SUPPORTED.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace sage2::test {

inline const char* kFakeName = "sage2 fake H100 (test driver)";

inline const char* kFakeSource = R"FAKE(
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
static double g_clock_ms = 0;
static int g_ctx;
static __thread void* tl_stack[32];
static __thread int tl_depth = 0;
struct Ev { double t; };
static double env_num(const char* n, double d) { const char* v = getenv(n); return v ? atof(v) : d; }
static void* P(CUdeviceptr p) { return (void*)(uintptr_t)p; }

CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult r, const char** s) { *s = r == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE"; return 0; }
CUresult cuGetErrorString(CUresult r, const char** s) { (void)r; *s = "fake driver"; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice* d, int o) { if (o != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char* s, int len, CUdevice d) {
  (void)d; strncpy(s, "sage2 fake H100 (test driver)", (size_t)len - 1); s[len - 1] = 0; return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
  (void)d;
  switch (attr) {
    case 75: *v = 9; break;           /* compute capability 9.0 */
    case 76: *v = 0; break;
    case 16: *v = 132; break;         /* SMs */
    case 97: *v = 232448; break;      /* opt-in shared memory per block */
    case 81: *v = 233472; break;
    case 38: *v = 1 << 20; break;     /* L2: 1 MiB keeps the rotation copies small */
    default: *v = 0;
  }
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* b, CUdevice d) { (void)d; *b = (size_t)2 << 30; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, CUdevice d) { (void)d; *c = &g_ctx; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return 0; }
CUresult cuCtxGetCurrent(void** c) { *c = tl_depth ? tl_stack[tl_depth - 1] : 0; return 0; }
CUresult cuCtxSetCurrent(void* c) { if (tl_depth) tl_stack[tl_depth - 1] = c; else if (c) tl_stack[tl_depth++] = c; return 0; }
CUresult cuCtxPushCurrent_v2(void* c) { if (tl_depth >= 32) return 1; tl_stack[tl_depth++] = c; return 0; }
CUresult cuCtxPopCurrent_v2(void** c) { if (!tl_depth) return 1; void* x = tl_stack[--tl_depth]; if (c) *c = x; return 0; }
CUresult cuCtxGetDevice(CUdevice* d) { if (!tl_depth || !tl_stack[tl_depth - 1]) return 201; *d = 0; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuModuleLoadData(void** m, const void* img) { (void)img; *m = malloc(16); return 0; }
CUresult cuModuleUnload(void* m) { free(m); return 0; }
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)name; *f = m; return 0; }
CUresult cuFuncSetAttribute(void* f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
CUresult cuFuncGetAttribute(int* v, int a, void* f) { (void)a; (void)f; *v = 0; return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, void* f, int block, size_t smem) {
  (void)f;
  *n = block > 0 && block <= 1024 && smem <= 232448 ? 2 : 0;
  return 0;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void* stream, void** params, void** extra) {
  (void)f; (void)stream; (void)params; (void)extra;
  if (!gx || !gy || !gz || bx * by * bz == 0 || bx * by * bz > 1024) return 1;
  g_clock_ms += 0.002 + smem * 1e-6;
  return 0;
}
typedef struct {  /* the leading fields of CUlaunchConfig */
  unsigned gx, gy, gz, bx, by, bz, smem;
} FakeLaunchConfig;
CUresult cuLaunchKernelEx(const FakeLaunchConfig* c, void* f, void** params, void** extra) {
  return cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, 0, params, extra);
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* x = 0;
  if (posix_memalign(&x, 256, n ? n : 1)) return 2;
  *p = (CUdeviceptr)(uintptr_t)x;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free(P(p)); return 0; }
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = (size_t)1 << 30; *t = (size_t)2 << 30; return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) { memcpy(P(d), s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) { memcpy(d, P(s), n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove(P(d), P(s), n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st) { (void)st; memcpy(P(d), s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* st) { (void)st; memcpy(d, P(s), n); return 0; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char c, size_t n) { memset(P(d), c, n); return 0; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char c, size_t n, void* st) {
  (void)st; memset(P(d), c, n); g_clock_ms += 0.0005; return 0; }
CUresult cuStreamCreate(void** s, unsigned f) { (void)f; *s = malloc(8); return 0; }
CUresult cuStreamDestroy_v2(void* s) { free(s); return 0; }
CUresult cuStreamSynchronize(void* s) { (void)s; return 0; }
CUresult cuStreamIsCapturing(void* s, int* st) { (void)s; *st = 0; return 0; }
CUresult cuStreamGetCtx(void* s, void** c) { (void)s; *c = &g_ctx; return 0; }
CUresult cuEventCreate(void** e, unsigned f) { (void)f; *e = calloc(1, sizeof(struct Ev)); return 0; }
CUresult cuEventRecord(void* e, void* s) { (void)s; ((struct Ev*)e)->t = g_clock_ms; return 0; }
CUresult cuEventSynchronize(void* e) {
  (void)e;
  double ms = env_num("FAKE_CUDA_SYNC_SLEEP_MS", 0);
  if (ms > 0) usleep((useconds_t)(ms * 1000));
  return 0;
}
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  *ms = (float)(((struct Ev*)b)->t - ((struct Ev*)a)->t); return 0; }
CUresult cuEventDestroy_v2(void* e) { free(e); return 0; }
CUresult cuPointerGetAttribute(void* data, int attr, CUdeviceptr p) { (void)attr; (void)p; *(int*)data = 0; return 0; }
CUresult cuPointerGetAttributes(unsigned n, int* attrs, void** data, CUdeviceptr p) {  // device memory of device 0
  (void)p;
  for (unsigned i = 0; i < n; ++i) *(unsigned*)data[i] = attrs[i] == 2 ? 2u : 0u;  // MEMORY_TYPE → DEVICE
  return 0;
}
)FAKE";

// Names the fake defines itself; every other name of the X-macro gets a NOT_SUPPORTED stub.
inline std::set<std::string> defined_in_fake() {
  std::set<std::string> names;
  const std::string src = kFakeSource;
  const std::regex re(R"(CUresult (cu\w+)\()");
  for (auto it = std::sregex_iterator(src.begin(), src.end(), re); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

struct FakeDriver {
  std::string dir, lib, problem;
  FakeDriver() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sage2-fake-cuda-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      problem = "mkdtemp failed";
      return;
    }
    dir = buf.data();
    std::ifstream h(std::string(SAGE2_SOURCE_DIR) + "/base/driver.hpp");
    const std::string header((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
    std::string src = kFakeSource;
    const auto have = defined_in_fake();
    const std::regex re(R"(X\((cu\w+)\))");
    for (auto it = std::sregex_iterator(header.begin(), header.end(), re); it != std::sregex_iterator(); ++it) {
      const std::string n = (*it)[1];
      if (!have.count(n)) src += "CUresult " + n + "() { return 801; }\n";
    }
    std::ofstream(dir + "/fake_cuda.c") << src;
    lib = dir + "/libcuda_fake.so";
    for (const char* cc : {"cc", "gcc", "clang"}) {
      const std::string cmd = std::string(cc) + " -shared -fPIC -O1 -o '" + lib + "' '" + dir + "/fake_cuda.c' >'" + dir +
                              "/cc.log' 2>&1";
      if (std::system(cmd.c_str()) == 0) return;
    }
    std::ifstream log(dir + "/cc.log");
    problem = "no C compiler could build the fake driver: " +
              std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    lib.clear();
  }
  ~FakeDriver() {
    if (!dir.empty()) (void)std::system(("rm -rf '" + dir + "'").c_str());
  }
};

inline const FakeDriver& fake() {
  static FakeDriver f;
  return f;
}

}  // namespace sage2::test
