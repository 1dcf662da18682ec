// Fixed-width types for device code compiled by NVRTC without any CUDA toolkit header.
//
// The typedefs live in namespace sage2::dev so that host C++ (which includes the *_params.cuh
// files, and through them this file) never sees short global names such as `i8` that could
// clash with an application's own. Device code (NVRTC, or nvcc when inspecting SASS) gets them
// unqualified through the using-directive below: the whole translation unit is ours there.
#pragma once

namespace sage2 {
namespace dev {

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

static_assert(sizeof(i8) == 1 && sizeof(i16) == 2 && sizeof(i32) == 4 && sizeof(i64) == 8,
              "sage2 device types have unexpected widths");

}  // namespace dev
}  // namespace sage2

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
using namespace sage2::dev;
#endif
