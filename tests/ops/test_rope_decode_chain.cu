// The decode step of a layer as the model issues it, on one stream with no
// synchronization: the QKV projection's output (written late, below), then
// rope_kv_write (RoPE of q, the new token's K/V quantized into its page),
// then decode attention over the whole context. Under programmatic dependent
// launch rope_kv_write waits for the projection and lets decode start early;
// decode stages old keys before its own wait but must read the new token's
// K/V and q only after it (decode_attention.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attention_scenario.h"
#include "backend/cuda/attention/decode_attention.h"
#include "backend/cuda/attention/rope_kv_write.h"
#include "backend/cuda/launch_pdl.h"
#include "cuda_test_util.h"
#include "pdl_late_kernel.h"

namespace qserve::test {
namespace {

// The projection is replaced by a kernel that lets dependents launch at once,
// sleeps, then writes the new tokens' q/k/v rows (random bytes until then). The
// pools hold random bytes at each sequence's new position, so a decode that
// read them (or q) before rope_kv_write finished would differ from the CPU.
// Checked: the pages byte for byte against the CPU writer, q after RoPE, the
// decode output against the CPU reference, and programmatic and plain
// launches identical.
TEST(RopeKvWriteCuda, DecodeChainUnderProgrammaticLaunch) {
  QS_SKIP_WITHOUT_CUDA();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const AttentionShape shape{8, 2, 128};
  uint32_t seed = 900;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int page : {16, 64}) {
      SCOPED_TRACE(std::string(dtype == KvDtype::kInt4 ? "kv4" : dtype == KvDtype::kInt8 ? "kv8" : "fp16") + ", page " +
                   std::to_string(page));
      std::mt19937 rng(seed++);
      const std::vector<int32_t> ctx{1, 2, 33, 65, 300, 129, 1000};
      const RopeStyle style = page == 16 ? RopeStyle::kInterleaved : RopeStyle::kRotateHalf;
      AttentionScenario s = make_scenario(shape, dtype, page, style, ctx, rng);  // every position written by the CPU
      const int B = static_cast<int>(ctx.size()), hq = shape.num_q_heads, d = shape.head_dim;
      const int64_t row = s.row_elems(), qcols = static_cast<int64_t>(hq) * d;
      // the new token of each sequence: its q/k/v row, position and slot; the
      // CPU's q after RoPE and attention output
      std::vector<uint16_t> qkv_new, q_rope;
      std::vector<int32_t> pos, slots;
      for (int b = 0; b < B; ++b) {
        const int64_t r = s.seq_start[b + 1] - 1;
        qkv_new.insert(qkv_new.end(), s.qkv.begin() + r * row, s.qkv.begin() + (r + 1) * row);
        q_rope.insert(q_rope.end(), s.q_all.begin() + r * qcols, s.q_all.begin() + (r + 1) * qcols);
        pos.push_back(ctx[b] - 1);
        slots.push_back(s.slot_of(b, ctx[b] - 1));
      }
      std::vector<int32_t> starts(B + 1);
      std::iota(starts.begin(), starts.end(), 0);
      const float scale = 1.f / std::sqrt(static_cast<float>(d));
      std::vector<uint16_t> want(q_rope.size());
      paged_attention_cpu(q_rope.data(), shape, s.host_cache(),
                          {B, starts.data(), ctx.data(), s.page_table.data(), s.stride}, scale, want.data());
      // the pools before the step: the new positions hold random bytes
      std::vector<uint8_t> k_old = s.k_pool, v_old = s.v_pool;
      const KvPageLayout& L = s.layout;
      for (int b = 0; b < B; ++b) {
        const int p = ctx[b] - 1;
        const int64_t page0 = static_cast<int64_t>(s.page_table[b * s.stride + p / page]) * L.page_bytes();
        for (auto* pool : {&k_old, &v_old})
          for (int h = 0; h < shape.num_kv_heads; ++h) {
            for (int64_t i = 0; i < L.token_value_bytes(); ++i)
              (*pool)[page0 + L.value_offset(h, p % page) + i] = static_cast<uint8_t>(rng());
            if (kv_has_params(dtype))
              for (int64_t i = 0; i < 4; ++i) (*pool)[page0 + L.scale_offset(h, p % page) + i] = static_cast<uint8_t>(rng());
          }
      }
      ASSERT_NE(k_old, s.k_pool);
      const std::vector<uint16_t> qkv_stale = random_half(rng, qkv_new.size());
      DeviceBuffer<uint16_t> dqkv_new(qkv_new);
      DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table), dpos(pos), dslots(slots);
      DeviceBuffer<float> dtable(s.rope_table);
      cudaStream_t stream;
      QS_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      std::vector<uint16_t> out_first;
      for (bool pdl : {true, false}) {
        SCOPED_TRACE(pdl ? "programmatic launches" : "plain launches");
        cuda::set_programmatic_launch(pdl);
        DeviceBuffer<uint8_t> dk(k_old), dv(v_old);
        DeviceBuffer<uint16_t> dqkv(qkv_stale), dq(q_rope.size()), dout(q_rope.size());  // q, out poisoned
        const PagedKvCache cache{dk.get(), dv.get(), s.num_pages, s.layout};
        const cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtype, B, 1000, sms);
        DeviceBuffer<uint8_t> ws(plan.workspace_bytes);
        QS_CUDA_OK(cudaDeviceSynchronize());  // uploads and poison ran on the legacy stream
        launch_late_copies(dqkv_new.get(), dqkv.get(), qkv_new.size() * 2, nullptr, nullptr, 0, 200, stream);
        QS_CUDA_OK(cuda::rope_kv_write(s.qkv_input(dqkv.get()), {B, dpos.get(), dslots.get()}, shape, style,
                                       dtable.get(), dq.get(), cache, stream));
        const cuda::DecodeArgs args{dq.get(), dout.get(), dctx.get(), dpt.get(), s.stride, B, scale};
        QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), stream));
        QS_CUDA_OK(cudaStreamSynchronize(stream));
        EXPECT_EQ(dq.download(), q_rope) << "q after RoPE";
        EXPECT_TRUE(dk.download() == s.k_pool) << "K pool differs from the CPU writer's";
        EXPECT_TRUE(dv.download() == s.v_pool) << "V pool differs from the CPU writer's";
        const auto out = dout.download();
        const Fp16Diff diff = compare_half(out, want, 2e-2, 2e-2);
        EXPECT_EQ(diff.nan, 0) << "unwritten or NaN outputs";
        EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs << ", first bad element " << diff.first_bad;
        EXPECT_LT(diff.rel_l2, 5e-3) << "relative L2 error";
        if (pdl) out_first = out;
        else EXPECT_EQ(out, out_first) << "plain and programmatic launches differ";
      }
      cuda::set_programmatic_launch(true);
      cudaStreamDestroy(stream);
    }
}

}  // namespace
}  // namespace qserve::test
