// The W4 weights' streamed upload (backend/cuda/repack_upload.h): the device
// holds exactly repack_w4_mma's bytes, for layers of one piece, of several
// (the last one partial) and with padded channels. Random weights: a piece
// not copied, or copied to the wrong place, cannot match by chance.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/repack_upload.h"
#include "cuda_test_util.h"
#include "quant/w4a8_repack.h"
#endif

namespace qserve {
namespace {

#ifndef QSERVE_HAVE_CUDA
TEST(RepackUpload, Skipped) { GTEST_SKIP() << "skipped: no CUDA device (built without CUDA)"; }
#else

TEST(RepackUpload, DeviceHoldsTheRepackedBytes) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(std::random_device{}());
  // 200 x 448: one block, mostly padding; 28672 x 4096: 224 blocks of 256 KB
  // in 32-MB pieces (128 + 96); 4100 x 14336: 33 blocks of 896 KB, the last
  // one 4 channels and padding, pieces of 36 blocks; 100 x 524352: one block
  // larger than a piece (the unstaged path).
  for (auto [n, k] : {std::pair<int64_t, int64_t>{200, 448}, {28672, 4096}, {4100, 14336}, {100, 524352}}) {
    SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k));
    std::vector<uint8_t> canonical(static_cast<size_t>(n * k / 2));
    for (auto& b : canonical) b = static_cast<uint8_t>(rng());
    const std::vector<uint8_t> want = quant::repack_w4_mma(canonical.data(), n, k);
    cuda::DeviceBuffer d = cuda::upload_repacked_w4(canonical.data(), n, k);
    ASSERT_EQ(d.size(), want.size());
    std::vector<uint8_t> got(want.size());
    d.download(got.data(), got.size());
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && bad++ == 0) first = static_cast<int64_t>(i);
    EXPECT_EQ(bad, 0) << "first at byte " << first;
  }
}

#endif

}  // namespace
}  // namespace qserve
