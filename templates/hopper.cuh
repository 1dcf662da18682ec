// Inline-PTX wrappers of the Hopper (sm_90 / sm_90a) instructions the wgmma attention family
// uses: mbarriers, bulk and bulk-tensor (TMA) copies, proxy fences, warpgroup MMA bookkeeping
// (fence / commit / wait), shared-memory matrix descriptors, setmaxnreg, named barriers.
// Self-contained (no toolkit header); everything lives in namespace `ptx` beside ptx.cuh.
// The wgmma.mma_async instructions themselves are in wgmma_ops.cuh (generated).
//
// Conventions: shared-memory operands are 32-bit shared-window addresses (ptx::smem_addr);
// mbarriers are 8-byte aligned 64-bit words in shared memory.
#pragma once

#include "types.cuh"

#ifndef SAGE2_DEVICE_INLINE
#define SAGE2_DEVICE_INLINE __device__ __forceinline__
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------
// mbarrier (CTA scope)
SAGE2_DEVICE_INLINE void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised mbarriers visible to the other threads and to the async proxy (TMA unit).
SAGE2_DEVICE_INLINE void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Orders this thread's generic-proxy shared-memory accesses with later async-proxy accesses
// (TMA, wgmma operand reads) of the same memory.
SAGE2_DEVICE_INLINE void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// One arrival that also announces `bytes` of transaction data (the copies that complete on it).
SAGE2_DEVICE_INLINE void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
SAGE2_DEVICE_INLINE void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// True once the phase with the given parity (0/1) has completed.
SAGE2_DEVICE_INLINE bool mbar_try_wait(u32 bar, u32 parity) {
  u32 ok;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
SAGE2_DEVICE_INLINE void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------------------------------------
// Bulk copies global → shared completing on an mbarrier (complete_tx). `tmap` is the generic
// address of a CUtensorMap (a __grid_constant__ kernel parameter); coordinates are elements,
// innermost first. Destinations of swizzled maps must be aligned to the swizzle atom.
SAGE2_DEVICE_INLINE void tma_load_2d(u32 dst, const void* tmap, u32 bar, i32 x, i32 y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(tmap), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// Plain bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned).
SAGE2_DEVICE_INLINE void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
SAGE2_DEVICE_INLINE void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Warpgroup MMA bookkeeping. wgmma_fence() before the first wgmma of a batch whose accumulator
// or A registers were written by ordinary instructions; commit closes a batch; wait<N> blocks
// until at most N batches are pending. fence_operand() pins a register so that the compiler
// cannot move its ordinary reads/writes across the asynchronous region.
SAGE2_DEVICE_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
SAGE2_DEVICE_INLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
SAGE2_DEVICE_INLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
SAGE2_DEVICE_INLINE void fence_operand(i32& r) { asm volatile("" : "+r"(r)::"memory"); }
SAGE2_DEVICE_INLINE void fence_operand(u32& r) { asm volatile("" : "+r"(r)::"memory"); }
SAGE2_DEVICE_INLINE void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Shared-memory matrix descriptor of a K-major 8-bit operand tile (PTX ISA "Matrix Descriptor
// Format"): bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4 (unused by
// swizzled K-major layouts: 1), 32-45 stride-dimension byte offset >> 4 (distance between
// consecutive groups of 8 rows), 49-51 base offset (0: tiles are aligned to the swizzle atom),
// 62-63 swizzle (1: 128 B, 2: 64 B, 3: 32 B).
// Swizzle code of a row pitch of `bytes` (128 / 64 / 32).
SAGE2_DEVICE_INLINE constexpr u32 desc_swizzle_code(int bytes) { return bytes == 128 ? 1u : bytes == 64 ? 2u : 3u; }
SAGE2_DEVICE_INLINE u64 smem_desc(u32 addr, u32 sbo_bytes, u32 swizzle_code) {
  return static_cast<u64>((addr & 0x3FFFFu) >> 4) | (static_cast<u64>(1) << 16) |
         (static_cast<u64>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (static_cast<u64>(swizzle_code) << 62);
}

// ---------------------------------------------------------------------------------------------
// Register reallocation between warpgroups (sm_90a; needs a register cap at entry, i.e.
// __launch_bounds__(threads, 1)).
template <int R>
SAGE2_DEVICE_INLINE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
SAGE2_DEVICE_INLINE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

// Named barrier over `threads` threads (a multiple of 32): sync waits for the others, arrive
// only counts this warp in.
SAGE2_DEVICE_INLINE void named_barrier_sync(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
SAGE2_DEVICE_INLINE void named_barrier_arrive(u32 id, u32 threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Thread-block clusters (sm_90): the CTA's rank and the cluster's size and index (1-D grids),
// distributed shared memory (a CTA's shared address mapped into another rank's window), and the
// cluster-wide barrier (release on arrive, acquire on wait: the shared and global writes made
// before the arrive are visible to every thread of the cluster after its wait).
SAGE2_DEVICE_INLINE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
SAGE2_DEVICE_INLINE u32 cluster_nctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
SAGE2_DEVICE_INLINE u32 clusterid_x() {
  u32 r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
SAGE2_DEVICE_INLINE u32 mapa_shared(u32 addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
SAGE2_DEVICE_INLINE float ld_cluster_f32(u32 addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
SAGE2_DEVICE_INLINE void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
SAGE2_DEVICE_INLINE void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

SAGE2_DEVICE_INLINE u32 ld_shared_u32(u32 addr) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
SAGE2_DEVICE_INLINE void st_shared_u32(u32 addr, u32 v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
SAGE2_DEVICE_INLINE float ld_shared_f32(u32 addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
SAGE2_DEVICE_INLINE void ld_shared_f32x2(u32 addr, float& x, float& y) {
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "r"(addr));
}
SAGE2_DEVICE_INLINE u32 ld_nc_u32(const void* p) {
  u32 r;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}

}  // namespace ptx
