#include "backend/cuda/repack_upload.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda {
namespace {

// Two pinned buffers of kPieceBytes, with the stream that copies from them and
// one event per buffer (its last copy), made on first use and kept for the
// process (a model load makes hundreds of uploads); never freed, so that no
// destructor runs after the CUDA runtime's own teardown at exit.
constexpr size_t kPieceBytes = size_t{32} << 20;

struct Staging {
  std::mutex mutex;
  uint8_t* host[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;
  cudaEvent_t copied[2] = {nullptr, nullptr};
};

Staging& staging() {
  static Staging* s = [] {
    auto* st = new Staging;
    for (uint8_t*& h : st->host)
      QS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h), kPieceBytes, cudaHostAllocPortable));
    QS_CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : st->copied) QS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return st;
  }();
  return *s;
}

}  // namespace

DeviceBuffer upload_repacked_w4(const uint8_t* qweight, int64_t n, int64_t k) {
  const int64_t blocks = quant::repacked_blocks(n), block_bytes = quant::repacked_block_bytes(k);
  DeviceBuffer d(static_cast<size_t>(blocks * block_bytes));
  if (block_bytes > static_cast<int64_t>(kPieceBytes)) {  // one block larger than a piece (k > 2^19): in one go
    d.upload(quant::repack_w4_mma(qweight, n, k));
    return d;
  }
  const int64_t per_piece = static_cast<int64_t>(kPieceBytes) / block_bytes;  // whole blocks per piece
  Staging& s = staging();
  std::lock_guard<std::mutex> lock(s.mutex);
  int slot = 0;
  for (int64_t b0 = 0; b0 < blocks; b0 += per_piece, slot ^= 1) {
    const int64_t b1 = std::min(blocks, b0 + per_piece);
    // The copy that last read this buffer must be done (an event never
    // recorded, or recorded by an earlier upload that has finished, counts
    // as done).
    QS_CUDA_CHECK(cudaEventSynchronize(s.copied[slot]));
    quant::repack_w4_mma_blocks(qweight, n, k, b0, b1, s.host[slot]);
    QS_CUDA_CHECK(cudaMemcpyAsync(d.as<uint8_t>() + b0 * block_bytes, s.host[slot],
                                  static_cast<size_t>((b1 - b0) * block_bytes), cudaMemcpyHostToDevice, s.stream));
    QS_CUDA_CHECK(cudaEventRecord(s.copied[slot], s.stream));
  }
  QS_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return d;
}

}  // namespace qserve::cuda
