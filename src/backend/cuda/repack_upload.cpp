#include "backend/cuda/repack_upload.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda {
namespace {

// Two pinned buffers of kPieceBytes, allocated on first use and kept for the
// process (a model load makes hundreds of uploads); never freed, so that no
// destructor runs after the CUDA runtime's own teardown at exit.
constexpr size_t kPieceBytes = size_t{32} << 20;

struct Staging {
  std::mutex mutex;
  uint8_t* host[2] = {nullptr, nullptr};
};

Staging& staging() {
  static Staging* s = [] {
    auto* st = new Staging;
    for (uint8_t*& h : st->host)
      QS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h), kPieceBytes, cudaHostAllocPortable));
    return st;
  }();
  return *s;
}

}  // namespace

DeviceBuffer upload_repacked_w4(const uint8_t* qweight, int64_t n, int64_t k) {
  const int64_t blocks = quant::repacked_blocks(n), block_bytes = quant::repacked_block_bytes(k);
  DeviceBuffer d(static_cast<size_t>(blocks * block_bytes));
  // Whole blocks per piece (a block of k = 28672 is 1.8 MB).
  const int64_t per_piece = std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes) / block_bytes);
  Staging& s = staging();
  std::lock_guard<std::mutex> lock(s.mutex);
  cudaStream_t stream = nullptr;
  cudaEvent_t copied[2] = {nullptr, nullptr};
  QS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (cudaEvent_t& e : copied) QS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  int slot = 0;
  for (int64_t b0 = 0; b0 < blocks; b0 += per_piece, slot ^= 1) {
    const int64_t b1 = std::min(blocks, b0 + per_piece);
    if (b1 - b0 > static_cast<int64_t>(kPieceBytes) / block_bytes) {
      // One block larger than a piece (k > 2^17 / 4): through a vector instead.
      std::vector<uint8_t> one(static_cast<size_t>((b1 - b0) * block_bytes));
      quant::repack_w4_mma_blocks(qweight, n, k, b0, b1, one.data());
      QS_CUDA_CHECK(cudaMemcpyAsync(d.as<uint8_t>() + b0 * block_bytes, one.data(), one.size(), cudaMemcpyHostToDevice,
                                    stream));
      QS_CUDA_CHECK(cudaStreamSynchronize(stream));  // before `one` goes
      continue;
    }
    // The copy that last read this buffer must be done (an event never
    // recorded counts as done).
    QS_CUDA_CHECK(cudaEventSynchronize(copied[slot]));
    quant::repack_w4_mma_blocks(qweight, n, k, b0, b1, s.host[slot]);
    QS_CUDA_CHECK(cudaMemcpyAsync(d.as<uint8_t>() + b0 * block_bytes, s.host[slot],
                                  static_cast<size_t>((b1 - b0) * block_bytes), cudaMemcpyHostToDevice, stream));
    QS_CUDA_CHECK(cudaEventRecord(copied[slot], stream));
  }
  QS_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (cudaEvent_t e : copied) QS_CUDA_CHECK(cudaEventDestroy(e));
  QS_CUDA_CHECK(cudaStreamDestroy(stream));
  return d;
}

}  // namespace qserve::cuda
