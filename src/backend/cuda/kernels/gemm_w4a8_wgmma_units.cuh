// The persistent W4A8 wgmma CTA's work, unit by unit
// (kernels/gemm_w4a8_wgmma_kernel.cuh): a unit is one output tile (m block,
// n block) and a range [kb, ke) of its 128-wide k stages; the CTA computes
// slot `slot` of the `parts` pieces the tile's k range is cut into. A tile of
// several parts is finished by the last part to arrive (a counter per tile):
// it adds the others' INT32 partials to its accumulators and runs the epilogue.
//
// Two schedules:
//   split-K (p.stream_k == 0): units u = blockIdx.x, + gridDim.x, ... of
//     grid_m * grid_n * splits; unit u -> (m block, n block, split), m
//     fastest (the CTAs running together share weight blocks in L2); the
//     cluster tiles (kCL): split fastest, so that the CTAs of one cluster are
//     the splits of one tile. Partials [splits][m][n].
//     Multicast pairs (kMC): the units are pairs of n blocks (p.units =
//     ceil(grid_n / 2) * grid_m * splits), walked by clusters (blockIdx.x / 2,
//     + gridDim.x / 2, ...); rank r of a cluster takes n block 2 j + r of
//     pair j, so both CTAs walk the same token blocks and k ranges in step.
//     With an odd grid_n the last pair's rank 1 has n block grid_n (no
//     weights, no outputs): it still loads its half of the activations.
//   stream-K (p.stream_k == 1, the kernels instantiated with kSK): the k
//     stages of all tiles form one sequence [0, tiles * kt_total) (tile
//     t = n block * grid_m + m block, m fastest; k fastest within a tile),
//     cut into gridDim.x ranges of equal length (+-1 stage);
//     CTA c walks its range, a unit per tile it touches. Every CTA does the
//     same number of stages (+-1), whatever the number of tiles: no partial
//     last wave. A tile cut by a range boundary has pieces in several CTAs;
//     a CTA has at most two cut tiles (its range's first and last), so the
//     partials are pieces [gridDim.x][2][BN * BM] in the accumulators' own
//     register order (stream_k_piece), read back by threads of the same role.
#pragma once

#include <cstdint>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

namespace qserve::cuda::w4a8::wgmma {

struct Unit {
  int m_blk, n_blk;
  int kb, ke;       // the unit's 128-wide k stages
  int slot, parts;  // this CTA's piece of the tile, of `parts` (1: the whole tile)
  // Stream-K: which of its two piece buffers the tile's first contributor
  // (slot 0) used: 1 when its range began before this tile (the tile is its
  // range's last), else 0. Every later contributor's range begins inside
  // the tile: buffer 0.
  int lead_buf;
};

// kSK: the stream-K walk (a template parameter, not a branch on the
// parameters: with both walks in one kernel, ptxas serializes every wgmma,
// C7520).
template <bool kCL, bool kSK, bool kMC = false>
struct UnitWalk {
  int u;    // split-K: the next unit; stream-K: the next stage of the sequence
  int end;  // stream-K: the end of this CTA's range

  // Stream-K: where CTA c's range begins, and the CTA whose range holds
  // stage i. With total = q G + r stages on G = gridDim.x CTAs, the first r
  // ranges hold q + 1 stages, the others q (32-bit arithmetic: a 64-bit
  // division is a branching subroutine, after which ptxas serializes the
  // wgmmas).
  __device__ __forceinline__ static int range_begin(int total, int c) {
    const int q = total / static_cast<int>(gridDim.x), r = total - q * static_cast<int>(gridDim.x);
    return c * q + min(c, r);
  }
  __device__ __forceinline__ static int owner(int total, int i) {
    const int q = total / static_cast<int>(gridDim.x), r = total - q * static_cast<int>(gridDim.x);
    const int long_part = r * (q + 1);
    return i < long_part ? i / (q + 1) : r + (i - long_part) / q;
  }

  __device__ __forceinline__ UnitWalk(const Params& p, int kt_total) {
    if constexpr (kSK) {
      const int total = p.grid_m * p.grid_n * kt_total;
      u = range_begin(total, blockIdx.x);
      end = range_begin(total, blockIdx.x + 1);
    } else {
      u = kMC ? blockIdx.x >> 1 : blockIdx.x;
      end = 0;
    }
  }

  // The next unit of this CTA into `un`; false when none is left.
  __device__ __forceinline__ bool next(const Params& p, int kt_total, Unit& un) {
    if constexpr (kSK) {
      if (u >= end) return false;
      const int total = p.grid_m * p.grid_n * kt_total;
      const int tile = u / kt_total, t0 = tile * kt_total;
      un.m_blk = tile % p.grid_m;
      un.n_blk = tile / p.grid_m;
      un.kb = u - t0;
      un.ke = min(kt_total, un.kb + (end - u));
      const int first = owner(total, t0);
      un.slot = blockIdx.x - first;
      un.parts = owner(total, t0 + kt_total - 1) - first + 1;
      un.lead_buf = range_begin(total, first) < t0 ? 1 : 0;
      u = t0 + un.ke;
      return true;
    }
    if (u >= p.units) return false;
    int split;
    if constexpr (kMC) {
      const int rest = u / p.grid_m, pairs = (p.grid_n + 1) >> 1;
      un.m_blk = u % p.grid_m, un.n_blk = 2 * (rest % pairs) + static_cast<int>(blockIdx.x & 1),
      split = rest / pairs;
    } else if constexpr (kCL) {
      const int rest = u / p.splits;
      un.m_blk = rest % p.grid_m, un.n_blk = rest / p.grid_m, split = u % p.splits;
    } else {
      const int rest = u / p.grid_m;
      un.m_blk = u % p.grid_m, un.n_blk = rest % p.grid_n, split = rest / p.grid_n;
    }
    un.kb = split * p.kt_per_split;
    un.ke = min(kt_total, un.kb + p.kt_per_split);
    un.slot = split;
    un.parts = p.splits;
    un.lead_buf = 0;
    u += kMC ? gridDim.x >> 1 : gridDim.x;
    return true;
  }
};

// Stream-K: CTA c's piece buffer b (0: its range's first tile, 1: its last),
// tile_ints = BN * BM INT32 in the consumers' register order.
__device__ __forceinline__ int32_t* stream_k_piece(const Params& p, int c, int b, int tile_ints) {
  return p.partials + (static_cast<size_t>(c) * 2 + b) * tile_ints;
}
// The buffer that slot z of a tile's contributors wrote.
__device__ __forceinline__ int stream_k_buf(const Unit& un, int z) { return z == 0 ? un.lead_buf : 0; }

}  // namespace qserve::cuda::w4a8::wgmma
