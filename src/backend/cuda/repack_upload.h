// The W4 weights' way onto the GPU at load time: repacked into compute order
// (quant/w4a8_repack.h) piece by piece, each piece into one of two pinned
// host buffers and copied from it asynchronously while the next piece is
// repacked. Against a repack into a new vector and a copy from pageable
// memory: no new host pages to touch (half of the repack's time on its own),
// and the copy runs at the pinned rate, hidden behind the repack.
#pragma once

#include <cstdint>

#include "backend/cuda/device_memory.h"

namespace qserve::cuda {

// qweight [n, k/2] canonical -> a device buffer holding repack_w4_mma's bytes
// ([n/128][k/64][8][32][16]); k % 64 == 0. Synchronous: the bytes are on the
// device when it returns. One upload at a time per process (a mutex).
DeviceBuffer upload_repacked_w4(const uint8_t* qweight, int64_t n, int64_t k);

}  // namespace qserve::cuda
