// CUDA attention ops against the CPU reference: RoPE + KV write (pages byte
// for byte), decode and prefill attention, on odd sizes, every GQA ratio, both head
// dims, KV4 / KV8 / FP16 pages scattered over the pool, outputs poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attention_scenario.h"
#include "backend/cpu/fused_ops.h"
#include "backend/cuda/attention/decode_attention.h"
#include "backend/cuda/launch_pdl.h"
#include "backend/cuda/attention/prefill_attention.h"
#include "backend/cuda/attention/rope_kv_write.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "cuda_test_util.h"
#include "pdl_late_kernel.h"

namespace qserve::test {
namespace {

const char* dtype_name(KvDtype d) { return d == KvDtype::kInt4 ? "kv4" : d == KvDtype::kInt8 ? "kv8" : "fp16"; }

std::string describe(const AttentionShape& s, KvDtype dtype, int page_size, const std::vector<int32_t>& ctx) {
  std::string r = std::to_string(s.num_q_heads) + "/" + std::to_string(s.num_kv_heads) + " heads, d=" +
                  std::to_string(s.head_dim) + ", " + dtype_name(dtype) + ", page " + std::to_string(page_size) + ", ctx";
  for (size_t i = 0; i < ctx.size() && i < 6; ++i) r += " " + std::to_string(ctx[i]);
  if (ctx.size() > 6) r += " ... (" + std::to_string(ctx.size()) + " seqs)";
  return r;
}

int num_sms() {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  return n;
}

// ---- RoPE + KV write --------------------------------------------------------

void check_rope_kv_write(AttentionShape shape, KvDtype dtype, int page_size, RopeStyle style, bool bias,
                         std::vector<int32_t> ctx, uint32_t seed) {
  SCOPED_TRACE(describe(shape, dtype, page_size, ctx) + (style == RopeStyle::kInterleaved ? ", interleaved" : ", rotate-half") +
               (bias ? ", bias" : ""));
  std::mt19937 rng(seed);
  AttentionScenario s = make_scenario(shape, dtype, page_size, style, ctx, rng);
  const int T = s.seq_start.back();
  // fresh random pools, written once by the CPU and once by the GPU
  std::vector<uint8_t> k0(s.k_pool.size()), v0(s.v_pool.size());
  for (auto& x : k0) x = static_cast<uint8_t>(rng());
  for (auto& x : v0) x = static_cast<uint8_t>(rng());
  std::vector<uint16_t> bias_h = random_half(rng, s.row_elems(), 0.5f);
  QkvInput in = s.qkv_input(s.qkv.data());
  const int64_t d = shape.head_dim;
  if (bias) {
    in.q_bias = bias_h.data();
    in.k_bias = bias_h.data() + shape.num_q_heads * d;
    in.v_bias = bias_h.data() + (shape.num_q_heads + shape.num_kv_heads) * d;
  }
  // every third token not written (slot -1), like padding
  std::vector<int32_t> slots = s.slots;
  for (size_t i = 2; i < slots.size(); i += 3) slots[i] = -1;
  std::vector<uint8_t> k_cpu = k0, v_cpu = v0;
  std::vector<uint16_t> q_cpu(static_cast<size_t>(T) * shape.num_q_heads * d);
  PagedKvCache cpu_cache{k_cpu.data(), v_cpu.data(), s.num_pages, s.layout};
  rope_kv_write_cpu(in, {T, s.positions.data(), slots.data()}, shape, style, s.rope_table.data(), q_cpu.data(), cpu_cache);

  DeviceBuffer<uint8_t> dk(k0), dv(v0);
  DeviceBuffer<uint16_t> dqkv(s.qkv), dbias(bias_h), dq(q_cpu.size());
  DeviceBuffer<int32_t> dpos(s.positions), dslots(slots);
  DeviceBuffer<float> dtable(s.rope_table);
  QkvInput din = s.qkv_input(dqkv.get());
  if (bias) {
    din.q_bias = dbias.get();
    din.k_bias = dbias.get() + shape.num_q_heads * d;
    din.v_bias = dbias.get() + (shape.num_q_heads + shape.num_kv_heads) * d;
  }
  PagedKvCache gpu_cache{dk.get(), dv.get(), s.num_pages, s.layout};
  QS_CUDA_OK(cuda::rope_kv_write(din, {T, dpos.get(), dslots.get()}, shape, style, dtable.get(), dq.get(), gpu_cache, nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(dq.download(), q_cpu) << "q after RoPE";
  const auto k_gpu = dk.download(), v_gpu = dv.download();
  size_t k_diff = 0, v_diff = 0, first = SIZE_MAX;
  for (size_t i = 0; i < k_gpu.size(); ++i) {
    if (k_gpu[i] != k_cpu[i] && k_diff++ == 0) first = i;
    if (v_gpu[i] != v_cpu[i]) ++v_diff;
  }
  EXPECT_EQ(k_diff, 0u) << "K pool bytes differ, first at " << first;
  EXPECT_EQ(v_diff, 0u) << "V pool bytes differ";
}

TEST(RopeKvWriteCuda, PagesMatchCpuByteForByte) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 1;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int d : {64, 128})
      for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved})
        for (int page : {1, 16, 64})
          check_rope_kv_write({8, 2, d}, dtype, page, style, (seed % 2) == 1, {1, 65, 17}, seed++);
  check_rope_kv_write({32, 8, 128}, KvDtype::kInt4, 64, RopeStyle::kRotateHalf, true, {300}, 99);
  check_rope_kv_write({12, 12, 64}, KvDtype::kInt8, 16, RopeStyle::kInterleaved, false, {63, 64}, 98);
}

// ---- decode attention -------------------------------------------------------

// Plan variants of the keys-in-M kernel: a persistent grid (with num_sms
// overridden, so that small problems get several units per block), the first
// stages after the programmatic-launch wait.
struct DecodeVariant {
  bool persistent = false;
  int num_sms = 0;  // > 0: instead of the device's
  bool stage_before_wait = true;
  bool subnormal_values = true;
  int tma = -1;  // DecodePlan::tma: -1 the plan's choice, 0 cp.async, 1 TMA
  int unit_warps = 0;  // > 0: DecodePlan::unit_warps forced (2, 1: units side by side)
  int misalign = 0;  // q and out passed this many elements past an aligned address
};

// One decode step over a scenario: each sequence's query (its last
// position's q, [B, q_heads * head_dim] fp16) and the CPU reference output
// over its whole context, softmax scale 1 / sqrt(head_dim).
struct DecodeStep {
  std::vector<uint16_t> q, want;
  float scale = 0.f;
};
DecodeStep decode_step(AttentionScenario& s, const AttentionShape& shape, const std::vector<int32_t>& ctx) {
  const int B = static_cast<int>(ctx.size()), cols = shape.num_q_heads * shape.head_dim;
  DecodeStep d;
  d.q.resize(static_cast<size_t>(B) * cols);
  for (int b = 0; b < B; ++b)
    std::copy_n(s.q_all.begin() + static_cast<int64_t>(s.seq_start[b + 1] - 1) * cols, cols, d.q.begin() + b * cols);
  std::vector<int32_t> starts(B + 1);
  std::iota(starts.begin(), starts.end(), 0);
  d.scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
  d.want.resize(d.q.size());
  paged_attention_cpu(d.q.data(), shape, s.host_cache(), {B, starts.data(), ctx.data(), s.page_table.data(), s.stride},
                      d.scale, d.want.data());
  return d;
}

void check_decode(AttentionShape shape, KvDtype dtype, int page_size, std::vector<int32_t> ctx, uint32_t seed,
                  int force_splits = 0, cuda::DecodeKernel kernel = cuda::DecodeKernel::kAuto, DecodeVariant var = {}) {
  SCOPED_TRACE(describe(shape, dtype, page_size, ctx) + ", splits " + std::to_string(force_splits) + ", kernel " +
               cuda::decode_kernel_name(kernel) + (var.persistent ? ", persistent on " + std::to_string(var.num_sms) + " SMs" : "") +
               (var.stage_before_wait ? "" : ", late staging") + (var.subnormal_values ? "" : ", biased values") +
               (var.tma == 1 ? ", TMA staging" : var.tma == 0 ? ", cp.async staging" : "") +
               (var.unit_warps > 0 ? ", " + std::to_string(var.unit_warps) + " warps per unit" : "") +
               (var.misalign > 0 ? ", misaligned q / out" : ""));
  std::mt19937 rng(seed);
  const RopeStyle style = seed % 2 ? RopeStyle::kInterleaved : RopeStyle::kRotateHalf;
  AttentionScenario s = make_scenario(shape, dtype, page_size, style, ctx, rng);
  const int B = static_cast<int>(ctx.size());
  const DecodeStep step = decode_step(s, shape, ctx);
  const std::vector<uint16_t>& q = step.q;
  const std::vector<uint16_t>& want = step.want;
  const float scale = step.scale;

  DeviceBuffer<uint8_t> dk(s.k_pool), dv(s.v_pool);
  std::vector<uint16_t> q_host(var.misalign, 0);
  q_host.insert(q_host.end(), q.begin(), q.end());
  DeviceBuffer<uint16_t> dq(q_host), dout(q_host.size());  // poisoned: 0xFFFF is a NaN
  DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table);
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtype, B, max_ctx, num_sms(), force_splits);
  plan.kernel = kernel;
  plan.persistent = var.persistent;
  plan.stage_before_wait = var.stage_before_wait;
  plan.subnormal_values = var.subnormal_values;
  if (var.tma >= 0) plan.tma = var.tma == 1;
  if (var.unit_warps > 0) plan.unit_warps = var.unit_warps;
  if (var.num_sms > 0) plan.num_sms = var.num_sms;
  DeviceBuffer<uint8_t> ws(plan.workspace_bytes);
  const PagedKvCache cache{dk.get(), dv.get(), s.num_pages, s.layout};
  const cuda::DecodeArgs args{dq.get() + var.misalign, dout.get() + var.misalign, dctx.get(), dpt.get(), s.stride, B,
                              scale};
  QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got = dout.download();
  got.erase(got.begin(), got.begin() + var.misalign);
  const Fp16Diff diff = compare_half(got, want, 2e-2, 2e-2);
  EXPECT_EQ(diff.nan, 0) << "unwritten or NaN outputs";
  EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs << ", first bad element " << diff.first_bad;
  EXPECT_LT(diff.rel_l2, 5e-3) << "relative L2 error";
}

TEST(DecodeAttentionCuda, OddBatchesAndContexts) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 100;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int d : {64, 128}) {
      check_decode({8, 2, d}, dtype, 64, {1}, seed++);
      check_decode({8, 2, d}, dtype, 16, {63, 64, 65}, seed++);
      check_decode({8, 2, d}, dtype, 1, {1000, 1, 64}, seed++);
      std::vector<int32_t> ctx17;
      for (int i = 0; i < 17; ++i) ctx17.push_back(1 + (i * 97) % 300);
      check_decode({4, 4, d}, dtype, 16, ctx17, seed++);
    }
}

// Page sizes that are not powers of two (the decode kernel shifts for powers
// of two and divides otherwise): 96 (a multiple of its warp-chunks: contiguous
// staging), 24 and 40 (per-key staging), with splits and the last page partial.
TEST(DecodeAttentionCuda, NonPowerOfTwoPages) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 150;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int page : {96, 24, 40}) {
      check_decode({32, 8, 128}, dtype, page, {1, 95, 96, 97, 1000, 2050}, seed++);
      check_decode({8, 8, 64}, dtype, page, {300, 7}, seed++, 3);
    }
}

TEST(DecodeAttentionCuda, EveryGqaRatio) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 200;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int group = 1; group <= 8; ++group) {
      check_decode({2 * group, 2, group % 2 ? 64 : 128}, dtype, 16, {65, 200, 3}, seed++);
      // the other kernel of the group (CUDA cores for 1-2, heads-in-M tensor cores for 3-8)
      check_decode({2 * group, 2, group % 2 ? 64 : 128}, dtype, 16, {65, 200, 3}, seed++, 0,
                   group <= 2 ? cuda::DecodeKernel::kSimt : cuda::DecodeKernel::kMmaRows);
    }
}

// Every decode kernel on the groups it serves (the others fall back to kMma),
// odd contexts, page sizes 1 and 16, splits on and off.
TEST(DecodeAttentionCuda, EveryKernel) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 250;
  for (cuda::DecodeKernel kernel : {cuda::DecodeKernel::kMma, cuda::DecodeKernel::kSimt, cuda::DecodeKernel::kMmaRows})
    for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
      for (int group : {1, 2, 3, 4, 8}) {
        const int d = group % 2 ? 128 : 64;
        check_decode({3 * group, 3, d}, dtype, group == 3 ? 1 : 16, {1, 63, 64, 65, 1000}, seed++, 0, kernel);
        check_decode({group, 1, 192 - d}, dtype, 64, {33, 2049, 100}, seed++, 3, kernel);
      }
}

// The value codes as 1024 + t with 1024 subtracted (DecodePlan::subnormal_values
// false): still right, both head dims, KV4 and KV8, long contexts (the biased
// sum's rounding was the reason for the subtraction), splits on and off.
TEST(DecodeAttentionCuda, BiasedValueCodes) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 350;
  DecodeVariant biased;
  biased.subnormal_values = false;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8})
    for (int d : {64, 128}) {
      check_decode({16, 4, d}, dtype, 64, {1000, 130, 1, 4100}, seed++, 0, cuda::DecodeKernel::kAuto, biased);
      check_decode({8, 2, d}, dtype, 16, {63, 64, 65, 3000}, seed++, 3, cuda::DecodeKernel::kAuto, biased);
    }
}

// KV4 at head_dim 128 on pages of a multiple of 32 tokens stages by TMA
// (DecodePlan::tma, on sm_90); the same cases by cp.async from every lane, and
// by TMA again with contexts that end inside a warp-chunk, so that its keys
// past the end (the pools' random bytes: NaN and infinite scales among them)
// are masked, in the plain and the persistent grid and with staging after
// the wait.
TEST(DecodeAttentionCuda, TmaAndCpAsyncStaging) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 360;
  for (int tma : {1, 0}) {
    DecodeVariant var;
    var.tma = tma;
    for (int page : {32, 64, 96}) {
      check_decode({32, 8, 128}, KvDtype::kInt4, page, {1, 31, 33, 95, 1000, 2050}, seed++, 0, cuda::DecodeKernel::kAuto, var);
      check_decode({12, 12, 128}, KvDtype::kInt4, page, {300, 7, 64}, seed++, 3, cuda::DecodeKernel::kAuto, var);
    }
    var.persistent = true;
    var.num_sms = 2;
    check_decode({32, 8, 128}, KvDtype::kInt4, 64, {129, 1000, 5, 64, 77}, seed++, 0, cuda::DecodeKernel::kAuto, var);
    var.persistent = false;
    var.num_sms = 0;
    var.stage_before_wait = false;
    check_decode({16, 4, 128}, KvDtype::kInt4, 64, {4100, 63}, seed++, 1, cuda::DecodeKernel::kAuto, var);
  }
}

// The plan stages by TMA where the units hold many keys and fit in one wave
// of resident blocks (KV4, head_dim 128 only).
TEST(DecodeAttentionCuda, PlanStagesLongUnitsByTma) {
  const int sms = 132;
  const AttentionShape llama3{32, 8, 128}, llama2{32, 32, 128}, d64{32, 8, 64};
  EXPECT_TRUE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 64, 16384, sms).tma);  // 512 units
  EXPECT_TRUE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 64, 3072, sms).tma);
  EXPECT_TRUE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 16, 16384, sms).tma);  // 4 splits of 4096
  EXPECT_TRUE(cuda::plan_decode_attention(llama2, KvDtype::kInt4, 16, 8192, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 256, 16384, sms).tma);  // 2048 units
  EXPECT_FALSE(cuda::plan_decode_attention(llama2, KvDtype::kInt4, 64, 16384, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 64, 2048, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 64, 1024, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 1, 16384, sms).tma);  // split in short units
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kInt8, 64, 16384, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(llama3, KvDtype::kFp16, 64, 16384, sms).tma);
  EXPECT_FALSE(cuda::plan_decode_attention(d64, KvDtype::kInt4, 64, 16384, sms).tma);
}

// Units side by side (DecodePlan::unit_warps 2 and 1: a block's 4 warps serve
// 2 or 4 units at once, each side on its own barrier and ring space): unit
// counts that leave sides of the last block empty, every group, both head
// dims, every format, splits with empty splits, page sizes 1 / 16 / 24 / 64
// (per-key and contiguous staging), staging after the wait, misaligned q and
// out (the unvectorized q load and output stores), long contexts.
TEST(DecodeAttentionCuda, UnitsSideBySide) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 380;
  for (int unit_warps : {2, 1}) {
    DecodeVariant var;
    var.unit_warps = unit_warps;
    for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16}) {
      for (int group : {1, 2, 3, 4, 8}) {
        const int d = group % 2 ? 64 : 128;
        check_decode({3 * group, 3, d}, dtype, 16, {1, 63, 64, 65, 1000}, seed++, 0, cuda::DecodeKernel::kAuto, var);
      }
      check_decode({32, 8, 128}, dtype, 64, {1, 95, 1000, 2050, 7}, seed++, 0, cuda::DecodeKernel::kAuto, var);
      check_decode({8, 2, 64}, dtype, 1, {300, 7, 33}, seed++, 3, cuda::DecodeKernel::kAuto, var);
      check_decode({12, 12, 128}, dtype, 24, {300, 7, 64}, seed++, 0, cuda::DecodeKernel::kAuto, var);
      check_decode({8, 2, 128}, dtype, 64, {16384, 5000, 3}, seed++, 1, cuda::DecodeKernel::kAuto, var);
    }
    var.stage_before_wait = false;
    check_decode({16, 4, 128}, KvDtype::kInt4, 64, {4100, 63, 1}, seed++, 1, cuda::DecodeKernel::kAuto, var);
    var.stage_before_wait = true;
    var.misalign = 1;
    check_decode({32, 8, 128}, KvDtype::kInt4, 64, {100, 200, 3}, seed++, 0, cuda::DecodeKernel::kAuto, var);
    check_decode({8, 1, 64}, KvDtype::kFp16, 16, {100, 2}, seed++, 0, cuda::DecodeKernel::kAuto, var);
  }
}

// The plan serves units side by side where that makes fewer waves of resident
// blocks (132 SMs: 528 KV4 blocks, 264 KV8 / FP16) and each warp streams at
// most 512 keys of its unit (FP16 pages 256); never with TMA staging.
TEST(DecodeAttentionCuda, PlanServesUnitsSideBySide) {
  const int sms = 132;
  const AttentionShape llama3{32, 8, 128}, llama2{32, 32, 128};
  auto uw = [&](const AttentionShape& s, KvDtype dt, int batch, int ctx) {
    return cuda::plan_decode_attention(s, dt, batch, ctx, sms).unit_warps;
  };
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 64, 1024), 4);    // 512 units: one wave
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 128, 1024), 2);   // 1,024 units: 512 blocks
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 256, 1024), 2);   // 2,048 units: 2 waves (1 at 1 warp: 1,024 keys a warp)
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 256, 512), 1);    // 2,048 units: 512 blocks
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 512, 256), 1);
  EXPECT_EQ(uw(llama2, KvDtype::kInt4, 16, 1024), 4);    // 512 units
  EXPECT_EQ(uw(llama2, KvDtype::kInt4, 64, 1024), 2);    // 2,048 units
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 128, 1536), 4);   // long units: waves balance the SMs
  EXPECT_EQ(uw(llama2, KvDtype::kInt4, 256, 4096), 4);
  EXPECT_EQ(uw(llama3, KvDtype::kFp16, 64, 1024), 4);    // FP16 pages: at most 256 keys a warp
  EXPECT_EQ(uw(llama3, KvDtype::kFp16, 64, 512), 2);
  EXPECT_EQ(uw(llama3, KvDtype::kFp16, 128, 256), 1);
  EXPECT_EQ(uw(llama3, KvDtype::kInt8, 64, 1024), 2);    // 512 units on 264 slots
  EXPECT_EQ(uw(llama3, KvDtype::kInt8, 128, 1024), 2);   // 1,024 units: 2 waves
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 1, 16384), 4);    // splits fill one wave
  EXPECT_EQ(uw(llama3, KvDtype::kInt4, 64, 16384), 4);   // TMA staging
  EXPECT_TRUE(cuda::plan_decode_attention(llama3, KvDtype::kInt4, 64, 16384, sms).tma);
}

// Long contexts with the default (subnormal) value codes: f32 sums over
// thousands of keys, in one split (forced) and in the automatic plan.
TEST(DecodeAttentionCuda, LongContexts) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 370;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16}) {
    check_decode({8, 2, 128}, dtype, 64, {16384, 5000}, seed++, 1);
    check_decode({4, 4, 64}, dtype, 64, {8191}, seed++);
  }
}

TEST(DecodeAttentionCuda, SplitsMergeExactly) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 300;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int splits : {1, 2, 7, 40}) check_decode({32, 8, 128}, dtype, 64, {1000, 130, 1}, seed++, splits);
  check_decode({32, 8, 128}, KvDtype::kInt4, 64, {4097}, seed++);  // automatic split at batch 1
}

// DecodeArgs::quant: the output rows quantized per token as o_proj's input,
// with splits by the merge kernel that quantizes (a cluster of blocks per
// token; head counts that split into 8, 7, 5, 3 and 1 blocks), without by
// quantize_int8 after the kernel. The fp16 output must be the bytes of the
// plain launch, the codes, scales and sums those of quantize_int8 on it and
// of the CPU's quantization (all exact), every output poisoned first.
void check_decode_quantized(AttentionShape shape, KvDtype dtype, std::vector<int32_t> ctx, int force_splits,
                            bool with_sum, uint32_t seed) {
  SCOPED_TRACE(describe(shape, dtype, 16, ctx) + ", splits " + std::to_string(force_splits) +
               (with_sum ? ", with sums" : ", no sums"));
  std::mt19937 rng(seed);
  AttentionScenario s = make_scenario(shape, dtype, 16, RopeStyle::kRotateHalf, ctx, rng);
  const int B = static_cast<int>(ctx.size()), cols = shape.num_q_heads * shape.head_dim;
  const DecodeStep step = decode_step(s, shape, ctx);
  DeviceBuffer<uint8_t> dk(s.k_pool), dv(s.v_pool);
  DeviceBuffer<uint16_t> dq(step.q), plain_out(step.q.size()), fused_out(step.q.size());
  DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table);
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  const cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtype, B, max_ctx, num_sms(), force_splits);
  if (force_splits > 1) EXPECT_GT(plan.num_splits, 1);
  DeviceBuffer<uint8_t> ws(plan.workspace_bytes);
  const PagedKvCache cache{dk.get(), dv.get(), s.num_pages, s.layout};
  cuda::DecodeArgs args{dq.get(), plain_out.get(), dctx.get(), dpt.get(), s.stride, B, step.scale};
  QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), nullptr));
  // the reference: quantize_int8 on the plain output
  DeviceBuffer<int8_t> ref_q(static_cast<size_t>(B) * cols), got_q(static_cast<size_t>(B) * cols);
  DeviceBuffer<uint16_t> ref_scale(B), ref_sum(B), got_scale(B), got_sum(B);
  const Int8Rows ref{ref_q.get(), ref_scale.get(), with_sum ? ref_sum.get() : nullptr};
  QS_CUDA_OK(cuda::quantize_int8(plain_out.get(), B, cols, ref, nullptr));
  args.out = fused_out.get();
  args.quant = {got_q.get(), got_scale.get(), with_sum ? got_sum.get() : nullptr};
  QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> plain = plain_out.download(), fused = fused_out.download();
  EXPECT_EQ(plain, fused) << "the fp16 output differs from the plain launch's";
  const Fp16Diff diff = compare_half(plain, step.want, 2e-2, 2e-2);
  EXPECT_EQ(diff.nan, 0);
  EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs;
  EXPECT_EQ(got_q.download(), ref_q.download()) << "codes";
  EXPECT_EQ(got_scale.download(), ref_scale.download()) << "scales";
  if (with_sum) EXPECT_EQ(got_sum.download(), ref_sum.download()) << "sums";
  else EXPECT_EQ(got_sum.download(), std::vector<uint16_t>(B, 0xFFFF)) << "sums written though not asked for";
  // and the CPU's quantization of the same fp16 rows
  std::vector<int8_t> cpu_q(static_cast<size_t>(B) * cols);
  std::vector<uint16_t> cpu_scale(B), cpu_sum(B);
  quantize_int8_cpu(plain.data(), B, cols, {cpu_q.data(), cpu_scale.data(), cpu_sum.data()});
  EXPECT_EQ(got_q.download(), cpu_q) << "codes against the CPU";
  EXPECT_EQ(got_scale.download(), cpu_scale) << "scales against the CPU";
  if (with_sum) EXPECT_EQ(got_sum.download(), cpu_sum) << "sums against the CPU";
}

TEST(DecodeAttentionCuda, QuantizedOutputMatchesQuantizeInt8) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 700;
  // (Hq, Hkv, D): clusters of 8 (4 heads a block), 7 (4 and 2 heads), 8 (5),
  // 8 (8 heads, 70B), 3 (1 head), 1 (11 heads, group 1)
  const AttentionShape shapes[] = {{32, 8, 128}, {28, 4, 128}, {14, 2, 64}, {40, 8, 128}, {64, 8, 128}, {3, 1, 64}, {11, 11, 128}};
  for (const AttentionShape& shape : shapes)
    for (int splits : {0, 1, 3, 40}) {
      check_decode_quantized(shape, KvDtype::kInt4, {1 + static_cast<int>(seed % 500), 1000, 37}, splits, seed % 2 == 0,
                             seed);
      ++seed;
    }
  for (KvDtype dtype : {KvDtype::kInt8, KvDtype::kFp16}) {
    check_decode_quantized({32, 8, 128}, dtype, {300}, 0, true, seed++);
    check_decode_quantized({16, 4, 64}, dtype, {65, 1, 64}, 5, false, seed++);
  }
  std::vector<int32_t> ctx17;
  for (int i = 0; i < 17; ++i) ctx17.push_back(1 + (i * 131) % 700);
  check_decode_quantized({32, 8, 128}, KvDtype::kInt4, ctx17, 0, true, seed++);
  check_decode_quantized({32, 8, 128}, KvDtype::kInt4, ctx17, 6, true, seed++);
}

// The persistent grid: blocks serve several (sequence, KV head, split) units
// in turn (num_sms 1-3: up to kMaxUnits units per block), staging the next
// unit's first keys during the current one; empty splits among
// the units, every group it serves (1-4; 8 falls back to one unit per block),
// both head dims, page sizes 1, 16, 24 (per-key staging) and 64.
TEST(DecodeAttentionCuda, PersistentGrid) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 400;
  std::vector<int32_t> ctx17;
  for (int i = 0; i < 17; ++i) ctx17.push_back(1 + (i * 97) % 300);
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int group : {1, 2, 4, 8}) {
      const int d = group == 2 ? 64 : 128;
      const AttentionShape shape{2 * group, 2, d};
      check_decode(shape, dtype, 16, {1, 63, 64, 65, 1000}, seed++, 0, cuda::DecodeKernel::kAuto, {true, 1});
      check_decode(shape, dtype, 64, ctx17, seed++, 0, cuda::DecodeKernel::kAuto, {true, 2});
      check_decode(shape, dtype, 1, {3, 1000, 64}, seed++, 3, cuda::DecodeKernel::kAuto, {true, 1});
      check_decode(shape, dtype, 24, {130, 1, 2049}, seed++, 5, cuda::DecodeKernel::kAuto, {true, 3, false});
    }
  check_decode({32, 8, 128}, KvDtype::kInt4, 64, {1500, 700, 3, 2048, 64, 1, 999}, seed++, 0,
               cuda::DecodeKernel::kAuto, {true, 1});
}

// q and out at addresses that are 2 bytes past 16-byte alignment: the kernel
// falls back from its 16-byte loads of q and stores of the output (every
// format, one split and several).
TEST(DecodeAttentionCuda, UnalignedQueryAndOutput) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 490;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int splits : {1, 3}) {
      DecodeVariant var;
      var.misalign = 1;
      check_decode({32, 8, 128}, dtype, 64, {300, 65, 1}, seed++, splits, cuda::DecodeKernel::kAuto, var);
    }
}

// Two cases of the above, small enough for the sanitizers (memcheck, racecheck).
TEST(DecodeAttentionCuda, PersistentGridSmall) {
  QS_SKIP_WITHOUT_CUDA();
  check_decode({16, 4, 128}, KvDtype::kInt4, 64, {65, 1000, 3}, 480, 0, cuda::DecodeKernel::kAuto, {true, 1});
  check_decode({8, 4, 64}, KvDtype::kFp16, 16, {300, 1, 64}, 481, 3, cuda::DecodeKernel::kAuto, {true, 1});
}

// The staging before the programmatic-launch wait reads only keys and values
// below position ctx - 1: a kernel before it lets dependents launch at once,
// sleeps, then writes what rope_kv_write writes (the new token's K/V at
// position ctx - 1 of each sequence, stale bytes until then, and q). The
// decode launched after it must see only the new bytes.
TEST(DecodeAttentionCuda, StagesOnlyOldKeysBeforeTheWait) {
  QS_SKIP_WITHOUT_CUDA();
  const AttentionShape shape{8, 2, 128};  // few KV heads: the late kernel copies byte by byte
  uint32_t seed = 450;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int page : {16, 64})
      for (bool persistent : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + ", page " + std::to_string(page) +
                     (persistent ? ", persistent on 1 SM" : ""));
        std::mt19937 rng(seed++);
        const std::vector<int32_t> ctx{1, 2, 33, 65, 300, 129};
        AttentionScenario s = make_scenario(shape, dtype, page, RopeStyle::kRotateHalf, ctx, rng);
        const int B = static_cast<int>(ctx.size());
        const DecodeStep step = decode_step(s, shape, ctx);
        const std::vector<uint16_t>& q = step.q;
        const std::vector<uint16_t>& want = step.want;
        const float scale = step.scale;
        // [K pool | V pool], then the same with position ctx - 1 stale
        std::vector<uint8_t> pools(s.k_pool);
        pools.insert(pools.end(), s.v_pool.begin(), s.v_pool.end());
        std::vector<uint8_t> stale = pools;
        const KvPageLayout& L = s.layout;
        for (int b = 0; b < B; ++b) {
          const int pos = ctx[b] - 1;
          const int64_t page0 = static_cast<int64_t>(s.page_table[b * s.stride + pos / page]) * L.page_bytes();
          for (int64_t pool : {int64_t{0}, static_cast<int64_t>(s.k_pool.size())})
            for (int h = 0; h < shape.num_kv_heads; ++h) {
              for (int64_t i = 0; i < L.token_value_bytes(); ++i)
                stale[pool + page0 + L.value_offset(h, pos % page) + i] = static_cast<uint8_t>(rng());
              if (kv_has_params(dtype))
                for (int64_t i = 0; i < 4; ++i)
                  stale[pool + page0 + L.scale_offset(h, pos % page) + i] = static_cast<uint8_t>(rng());
            }
        }
        ASSERT_NE(stale, pools);
        const std::vector<uint16_t> q_stale = random_half(rng, q.size());
        DeviceBuffer<uint8_t> dnew(pools), dlive(stale);
        DeviceBuffer<uint16_t> dq_new(q), dq_live(q_stale), dout(q.size());  // poisoned
        DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table);
        const PagedKvCache cache{dlive.get(), dlive.get() + s.k_pool.size(), s.num_pages, s.layout};
        cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtype, B, 300, num_sms());
        plan.persistent = persistent;
        if (persistent) plan.num_sms = 1;
        DeviceBuffer<uint8_t> ws(plan.workspace_bytes);
        cudaStream_t stream;
        QS_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        QS_CUDA_OK(cudaDeviceSynchronize());  // uploads and poison ran on the legacy stream
        test::launch_late_copies(dnew.get(), dlive.get(), pools.size(), dq_new.get(), dq_live.get(), q.size() * 2, 200,
                                 stream);
        const cuda::DecodeArgs args{dq_live.get(), dout.get(), dctx.get(), dpt.get(), s.stride, B, scale};
        QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), stream));
        QS_CUDA_OK(cudaStreamSynchronize(stream));
        cudaStreamDestroy(stream);
        const Fp16Diff diff = compare_half(dout.download(), want, 2e-2, 2e-2);
        EXPECT_EQ(diff.nan, 0) << "unwritten or NaN outputs";
        EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs << ", first bad element " << diff.first_bad;
        EXPECT_LT(diff.rel_l2, 5e-3) << "relative L2 error";
      }
}

// Programmatic dependent launch (launch_pdl.h): decode (split, so the
// merge kernel runs too) twice over one output buffer, then the o_proj input
// quantization reading that output, back to back on one stream with no
// synchronization: the codes are the CPU quantization of the attention
// output, and every output is identical with plain launches.
TEST(DecodeAttentionCuda, ProgrammaticLaunchChain) {
  QS_SKIP_WITHOUT_CUDA();
  const AttentionShape shape{32, 8, 128};
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kFp16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::mt19937 rng(500);
    const std::vector<int32_t> ctx{1500, 700, 3, 2048, 64};
    AttentionScenario s = make_scenario(shape, dtype, 64, RopeStyle::kRotateHalf, ctx, rng);
    const int B = static_cast<int>(ctx.size()), cols = shape.num_q_heads * shape.head_dim;
    const DecodeStep step = decode_step(s, shape, ctx);
    const std::vector<uint16_t>& q = step.q;
    const std::vector<uint16_t>& want = step.want;
    const float scale = step.scale;
    DeviceBuffer<uint8_t> dk(s.k_pool), dv(s.v_pool);
    DeviceBuffer<uint16_t> dq(q);
    DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table);
    const PagedKvCache cache{dk.get(), dv.get(), s.num_pages, s.layout};
    cudaStream_t stream;
    QS_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<uint16_t> out_first;
    std::vector<int8_t> codes_first;
    for (bool pdl : {true, false}) {
      SCOPED_TRACE(pdl ? "programmatic launches" : "plain launches");
      cuda::set_programmatic_launch(pdl);
      const cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtype, B, 2048, num_sms(), 5);
      ASSERT_GT(plan.num_splits, 1);
      DeviceBuffer<uint8_t> ws(plan.workspace_bytes);
      DeviceBuffer<uint16_t> dout(q.size());  // poisoned
      DeviceBuffer<int8_t> dcodes(q.size());
      DeviceBuffer<uint16_t> dscale(B), dsum(B);
      const cuda::DecodeArgs args{dq.get(), dout.get(), dctx.get(), dpt.get(), s.stride, B, scale};
      QS_CUDA_OK(cudaDeviceSynchronize());  // the buffers' uploads and poison ran on the legacy stream
      QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), stream));
      QS_CUDA_OK(cuda::decode_attention(args, shape, cache, plan, ws.get(), stream));
      QS_CUDA_OK(cuda::quantize_int8(dout.get(), B, cols, {dcodes.get(), dscale.get(), dsum.get()}, stream));
      QS_CUDA_OK(cudaStreamSynchronize(stream));
      const auto out = dout.download();
      const Fp16Diff diff = compare_half(out, want, 2e-2, 2e-2);
      EXPECT_EQ(diff.nan, 0) << "unwritten or NaN outputs";
      EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs;
      std::vector<int8_t> codes(q.size());
      std::vector<uint16_t> sc(B), sm(B);
      quantize_int8_cpu(out.data(), B, cols, {codes.data(), sc.data(), sm.data()});
      const auto got_codes = dcodes.download();
      EXPECT_EQ(got_codes, codes) << "codes of the attention output";
      EXPECT_EQ(dscale.download(), sc);
      EXPECT_EQ(dsum.download(), sm);
      if (pdl) {
        out_first = out;
        codes_first = got_codes;
      } else {
        EXPECT_EQ(out, out_first) << "plain and programmatic launches differ";
        EXPECT_EQ(got_codes, codes_first);
      }
    }
    cuda::set_programmatic_launch(true);
    cudaStreamDestroy(stream);
  }
}

// ---- prefill attention ------------------------------------------------------

// Sequence b has context ctx[b], of which the last num_new[b] positions are
// new (num_new < ctx: chunked prefill / a reused prefix).
void check_prefill(AttentionShape shape, KvDtype dtype, int page_size, std::vector<int32_t> ctx,
                   std::vector<int32_t> num_new, uint32_t seed,
                   cuda::PrefillKernel kernel = cuda::PrefillKernel::kFlash) {
  SCOPED_TRACE(describe(shape, dtype, page_size, ctx) +
               (kernel == cuda::PrefillKernel::kFlash         ? ", prefill (flash)"
                : kernel == cuda::PrefillKernel::kFlashSyncPv ? ", prefill (flash, P V on mma.sync)"
                                                               : ", prefill (paged)"));
  std::mt19937 rng(seed);
  const RopeStyle style = seed % 2 ? RopeStyle::kInterleaved : RopeStyle::kRotateHalf;
  AttentionScenario s = make_scenario(shape, dtype, page_size, style, ctx, rng);
  const int B = static_cast<int>(ctx.size()), hq = shape.num_q_heads, d = shape.head_dim;
  std::vector<int32_t> starts{0};
  std::vector<uint16_t> q;
  int max_new = 0;
  for (int b = 0; b < B; ++b) {
    const int64_t first = s.seq_start[b] + ctx[b] - num_new[b];
    q.insert(q.end(), s.q_all.begin() + first * hq * d, s.q_all.begin() + (first + num_new[b]) * hq * d);
    starts.push_back(starts.back() + num_new[b]);
    max_new = std::max(max_new, num_new[b]);
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<uint16_t> want(q.size());
  paged_attention_cpu(q.data(), shape, s.host_cache(), {B, starts.data(), ctx.data(), s.page_table.data(), s.stride},
                      scale, want.data());
  DeviceBuffer<uint8_t> dk(s.k_pool), dv(s.v_pool);
  DeviceBuffer<uint16_t> dq(q), dout(q.size());
  DeviceBuffer<int32_t> dctx(ctx), dpt(s.page_table), dstarts(starts);
  const PagedKvCache cache{dk.get(), dv.get(), s.num_pages, s.layout};
  const cuda::PrefillArgs args{dq.get(), dout.get(), dstarts.get(), dctx.get(), dpt.get(), s.stride, B, max_new, scale,
                               kernel};
  QS_CUDA_OK(cuda::prefill_attention(args, shape, cache, nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  const Fp16Diff diff = compare_half(dout.download(), want, 2e-2, 2e-2);
  EXPECT_EQ(diff.nan, 0) << "unwritten or NaN outputs";
  EXPECT_EQ(diff.bad, 0) << "max abs error " << diff.max_abs << ", first bad element " << diff.first_bad;
  EXPECT_LT(diff.rel_l2, 5e-3) << "relative L2 error";
}

TEST(PrefillAttentionCuda, FullChunkedAndVariableLengths) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 400;
  for (cuda::PrefillKernel kernel : {cuda::PrefillKernel::kFlash, cuda::PrefillKernel::kFlashSyncPv})
    for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
      for (int d : {64, 128}) {
        check_prefill({8, 2, d}, dtype, 16, {1, 63, 64, 65}, {1, 63, 64, 65}, seed++, kernel);  // full prompts
        check_prefill({8, 2, d}, dtype, 64, {1000, 130}, {200, 3}, seed++, kernel);  // chunks after earlier pages
        check_prefill({4, 4, d}, dtype, 1, {70, 17, 5}, {70, 1, 2}, seed++, kernel);
      }
}

// Batch 1 and 17, contexts 1 / 63 / 64 / 65 / 1000 as whole prompts and as
// chunks, every page size.
TEST(PrefillAttentionCuda, OddBatchesAndPageSizes) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 600;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
    for (int d : {64, 128}) {
      check_prefill({8, 2, d}, dtype, 64, {1000}, {1000}, seed++);
      std::vector<int32_t> ctx17, new17;
      for (int i = 0; i < 17; ++i) {
        ctx17.push_back(1 + (i * 97) % 300);
        new17.push_back(i % 3 == 0 ? ctx17.back() : 1 + (i * 31) % ctx17.back());
      }
      check_prefill({8, 2, d}, dtype, d == 64 ? 1 : 16, ctx17, new17, seed++);
      check_prefill({12, 4, d}, dtype, 16, {65, 1, 64, 63, 1000}, {65, 1, 1, 30, 129}, seed++);
    }
}

// The earlier kernel stays selectable (benchmark comparisons): still right.
TEST(PrefillAttentionCuda, PagedKernelStillRight) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 700;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16}) {
    check_prefill({32, 8, 128}, dtype, 64, {300, 65}, {300, 20}, seed++, cuda::PrefillKernel::kPaged);
    check_prefill({6, 2, 64}, dtype, 16, {90, 1}, {50, 1}, seed++, cuda::PrefillKernel::kPaged);
  }
}

TEST(PrefillAttentionCuda, EveryGqaRatio) {
  QS_SKIP_WITHOUT_CUDA();
  uint32_t seed = 500;
  for (cuda::PrefillKernel kernel : {cuda::PrefillKernel::kFlash, cuda::PrefillKernel::kFlashSyncPv})
    for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16})
      for (int group = 1; group <= 8; ++group)
        check_prefill({2 * group, 2, group % 2 ? 128 : 64}, dtype, 16, {90, 33, 300}, {90, 20, 170}, seed++, kernel);
}

}  // namespace
}  // namespace qserve::test
