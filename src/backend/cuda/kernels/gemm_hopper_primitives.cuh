// Inline-PTX building blocks of the sm_90a GEMM: mbarriers, TMA (bulk and
// tensor copies completing on an mbarrier), wgmma fences and shared-memory
// descriptors, setmaxnreg, the cluster barrier and distributed shared memory.
// Every function compiles to nothing outside the sm_90a pass (the kernels
// that call them are empty there).
#pragma once

#include <cstdint>

#include <cuda.h>  // CUtensorMap (a plain struct; no driver library needed)

#include "backend/cuda/kernels/mma_primitives.cuh"

namespace qserve::cuda::ptx {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QS_SM90A_ASM(...) asm volatile(__VA_ARGS__)
#else
#define QS_SM90A_ASM(...) \
  do {                    \
  } while (0)
#endif

// ---- mbarrier (64-bit, in shared memory) ----

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  QS_SM90A_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
// Makes the initialised barriers visible to the async proxy (TMA).
__device__ __forceinline__ void fence_mbar_init() { QS_SM90A_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// Arrives once and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  QS_SM90A_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  QS_SM90A_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Blocks until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  QS_SM90A_ASM(
      "{\n.reg .pred done;\n"
      "QS_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra QS_MBAR_WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Arrives once on the mbarrier at shared::cluster address `addr`
// (map_shared_rank: the same barrier in another CTA of the cluster). The
// default semantics (release at CTA scope), as CUTLASS's pipelines release a
// multicast stage: `.release.cluster` compiles to MEMBAR.ALL.GPU before the
// arrive (the stage's reads by this warp are complete either way: shared
// loads consumed, wgmmas waited for).
__device__ __forceinline__ void mbar_arrive_remote(uint32_t addr) {
  QS_SM90A_ASM("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(addr) : "memory");
}

// ---- TMA ----

// Contiguous global -> shared copy of `bytes` (multiple of 16, both ends 16-B aligned).
__device__ __forceinline__ void tma_load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  QS_SM90A_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// One box of a 2-D tensor map at element coordinates (c0 innermost, c1);
// out-of-range elements are written as zeros (and still counted as bytes).
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  QS_SM90A_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
// One box of a 3-D tensor map at element coordinates (c0 innermost, c1, c2);
// out-of-range elements are written as zeros (and still counted as bytes).
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  QS_SM90A_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}
// As tma_load_2d, the box written to the same shared-memory offset in every
// CTA of the cluster named in `cta_mask` (bit r: rank r), each of which
// counts the bytes on its mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar,
                                                      uint16_t cta_mask) {
  QS_SM90A_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}
// Shared -> global: one box of a 2-D tensor map at element coordinates
// (c0 innermost, c1), elements past the tensor's bounds not written; in
// this thread's current bulk group (bulk_commit). The source must have been
// written before, with fence_proxy_async_shared() by the writing threads.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  QS_SM90A_ASM("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { QS_SM90A_ASM("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's bulk groups have read their shared-memory
// sources (the buffers may be written again) / have completed.
__device__ __forceinline__ void bulk_wait_read_all() { QS_SM90A_ASM("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { QS_SM90A_ASM("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  QS_SM90A_ASM("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later
// async-proxy reads of them (wgmma operands written by threads, not TMA).
__device__ __forceinline__ void fence_proxy_async_shared() {
  QS_SM90A_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- wgmma ----

// Orders register / shared-memory writes before the next wgmma of this warpgroup.
__device__ __forceinline__ void wgmma_fence() { QS_SM90A_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { QS_SM90A_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  QS_SM90A_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The registers of d final here, in the PTX: nothing that reads or writes
// them moves across this point. Accumulators: across a wgmma wait. Register-A
// operands: every instruction computing them stays before the group's
// wgmma.fence (else ptxas splits the group: load_stage in
// gemm_w4a8_wgmma_stage.cuh).
template <typename T, int R>
__device__ __forceinline__ void reg_fence(T (&d)[R]) {
  static_assert(sizeof(T) == 4, "32-bit registers");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Shared-memory matrix descriptor of a K-major operand in the 128-byte
// swizzle (rows of 128 B, 8-row atoms of 1024 B, the atom 1024-B aligned):
// start address >> 4 (bits 0-13), leading byte offset (unused here: 1),
// stride byte offset 1024 >> 4 between 8-row groups (bits 32-45), layout
// type 1 = 128B swizzle (bits 62-63). Stepping K by 32 bytes inside the
// 128-byte row adds 2 to the start address field.
__device__ __forceinline__ uint64_t smem_desc_sw128(const void* p) {
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3ffff) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// The descriptor of the tile `bytes` past desc's (bytes >= 0, a multiple of
// 16): the start address field is the shared address / 16 in 14 bits, so
// adding to it is the descriptor of the moved address while that stays below
// 256 KB (any CTA's shared memory), without recomputing the address.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, int bytes) {
  return desc + static_cast<uint32_t>(bytes >> 4);
}

// ---- thread block clusters: barrier and distributed shared memory ----

// This CTA's rank in its cluster (0 when launched without clusters).
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r = 0;
  QS_SM90A_ASM("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster arrives (release: its shared
// memory writes become visible cluster-wide), then waits for all (acquire).
__device__ __forceinline__ void cluster_sync() {
  QS_SM90A_ASM("barrier.cluster.arrive.release;\n" ::: "memory");
  QS_SM90A_ASM("barrier.cluster.wait.acquire;\n" ::: "memory");
}
// The same barrier split for a cluster's last phase, where no shared-memory
// write has to be published (the CTAs only wait until every other one is done
// reading theirs): relaxed arrival, no fence, so an arriving thread does not
// wait for its global stores to complete (arrive.release compiles to
// MEMBAR.ALL.GPU, which does). A distributed shared-memory load whose value
// the thread has already used has completed, so arriving after the last use
// keeps the partner's memory alive long enough.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  QS_SM90A_ASM("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { QS_SM90A_ASM("barrier.cluster.wait;\n" ::: "memory"); }
// The shared::cluster address of the same shared-memory location (a
// shared::cta address) in the CTA of rank `rank`.
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t addr, uint32_t rank) {
  uint32_t r = 0;
  QS_SM90A_ASM("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// 16-B load from a shared::cluster address (any CTA of the cluster).
__device__ __forceinline__ int4 ld_shared_cluster_v4(uint32_t addr) {
  int4 v{0, 0, 0, 0};
  QS_SM90A_ASM("ld.shared::cluster.v4.s32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// 16-B store to a shared::cluster address (any CTA of the cluster); it is
// visible there after a cluster barrier with release / acquire (cluster_sync).
__device__ __forceinline__ void st_shared_cluster_v4(uint32_t addr, int32_t x, int32_t y, int32_t z, int32_t w) {
  QS_SM90A_ASM("st.shared::cluster.v4.s32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}

// 16-B store to a shared::cluster address (addr) that completes as 16 bytes
// of transactions on the mbarrier at shared::cluster address `bar` (both in
// the same CTA of the cluster, map_shared_rank): the receiving CTA waits on
// that barrier (mbar_arrive_expect_tx, mbar_wait) and then reads the data, as
// after a TMA copy. No fence and no cluster barrier: cluster_sync's release
// compiles to MEMBAR.ALL.GPU, which waits for every outstanding memory
// access of the thread.
__device__ __forceinline__ void st_async_v4(uint32_t addr, int32_t x, int32_t y, int32_t z, int32_t w, uint32_t bar) {
  QS_SM90A_ASM("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
               "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar)
               : "memory");
}

// ---- register reallocation between warpgroups ----

template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  QS_SM90A_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  QS_SM90A_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// stmatrix.m8n8.x4.trans: four 8 x 8 b16 matrices from the mma accumulator
// layout (this lane's r[m] = row lane / 4, columns 2 (lane % 4) + {0, 1} of
// matrix m, the lower column in the low half) stored transposed: row c of
// matrix m (its column c in registers) at the 16-B aligned address that lane
// 8 m + c passes.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  QS_SM90A_ASM("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// stmatrix.m8n8.x2.trans: two matrices as x4's first two; lanes 0-15 pass
// the row addresses (lane 8 m + c: row c of matrix m).
__device__ __forceinline__ void stmatrix_x2_trans(uint32_t addr, uint32_t r0, uint32_t r1) {
  QS_SM90A_ASM("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
               : "memory");
}

// Named barrier among `threads` threads (id 1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace qserve::cuda::ptx
