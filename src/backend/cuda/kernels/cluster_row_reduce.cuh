// Reductions of one row spread over the C blocks of a thread block cluster
// (sm_90): the cluster kernels that quantize a row on several SMs (the split
// merge quantizing o_proj's input, SiLU x up + quantization at few rows).
// Each is called by every thread of every block of the cluster.
//
// The row's maximum reaches every block: warp shuffles, the block's warps
// through shared memory, then every block pushes its maximum into each
// block's of[rank] (distributed shared memory) and one cluster barrier
// publishes them. `started` is the token of cluster.barrier_arrive() taken
// when the block started; it is waited on before the first remote store (a
// block may write into another's shared memory only once that one runs).
// The code sum: the blocks push their sums to rank 0's of[rank], a second
// cluster barrier; the total is returned to rank 0's thread 0 (0 elsewhere).
#pragma once

#include <cooperative_groups.h>

#include <utility>

namespace qserve::cuda {

// v: this thread's part (>= identity); mx: the maximum of two values.
template <class T, class Max, class Token>
__device__ __forceinline__ T cluster_row_max(cooperative_groups::cluster_group& cluster, Token&& started, T v,
                                             T (&warp_part)[32], T* of, T identity, Max mx) {
  const int t = threadIdx.x, lane = t % 32, warps = blockDim.x / 32;
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v = mx(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) warp_part[t / 32] = v;
  __syncthreads();
  cluster.barrier_wait(std::forward<Token>(started));
  if (t < C) {
    T bm = identity;
    for (int w = 0; w < warps; ++w) bm = mx(bm, warp_part[w]);
    cluster.map_shared_rank(of, t)[rank] = bm;
  }
  cluster.sync();
  T m = identity;
  for (int j = 0; j < C; ++j) m = mx(m, of[j]);
  return m;
}

__device__ __forceinline__ int cluster_row_sum(cooperative_groups::cluster_group& cluster, int v, int (&warp_part)[32],
                                               int* of) {
  const int t = threadIdx.x, lane = t % 32, warps = blockDim.x / 32;
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) warp_part[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    int bs = 0;
    for (int w = 0; w < warps; ++w) bs += warp_part[w];
    cluster.map_shared_rank(of, 0)[rank] = bs;
  }
  cluster.sync();
  int total = 0;
  if (rank == 0 && t == 0)
    for (int j = 0; j < C; ++j) total += of[j];
  return total;
}

}  // namespace qserve::cuda
