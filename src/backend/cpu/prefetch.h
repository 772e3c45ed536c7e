// How far ahead the CPU GEMMs prefetch their weight rows (matmul_kernel.inc,
// gemm_w4a8.cpp). Decode streams every weight once, and rows of a few KB (a
// 576-wide layer: 1,152 B at F16, 576 B at INT8) leave the hardware prefetcher
// behind a 4-row tile; ~12 KB ahead kept one core at its streaming rate
// (bench/results/2026-12-05-cpu-decode.md). Prefetches are hints: they change
// no result.
#pragma once

#include <algorithm>
#include <cstdint>

namespace qserve::cpu {

// Rows of `row_bytes` to prefetch past the current tile's: ~12 KB, 4 to 16 rows.
inline int64_t prefetch_rows_ahead(int64_t row_bytes) {
  return std::clamp<int64_t>((12 * 1024 + row_bytes - 1) / row_bytes, 4, 16);
}

}  // namespace qserve::cpu
