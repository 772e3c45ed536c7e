// Attention and fused-op benchmarks on the GPU (one executable, sections
// chosen by flags):
//   --decode   decode attention us and effective GB/s (KV bytes read / time),
//              Llama-3-8B (32 q / 8 KV heads) and Llama-2-7B (32 / 32), d = 128,
//              batch x context grid, KV4 vs KV8 vs FP16-KV in the same run
//   --prefill  prefill attention TFLOP/s
//   --fused    fused memory-bound kernels' GB/s against a copy kernel
//   --chain    rope_kv_write + decode attention back to back (a layer's
//              decode step), rope_kv_write launched plain or with PDL
//   --quick    a small subset of each section
//   --kernel   the decode kernel (auto, mma, simt, mma-rows; see DecodeKernel)
//   --batches, --contexts LIST, --model NAME: restrict the decode grid
//              (comma-separated; NAME a model's name below)
//   --no-pdl   plain launches instead of programmatic dependent launch
//              (cuda::set_programmatic_launch; the copy reference is always plain)
//   --persistent, --late-staging, --biased-values, --splits N: decode plan variants
//              (DecodePlan::persistent, stage_before_wait = false,
//              subnormal_values = false, forced splits)
//   --unit-warps N  DecodePlan::unit_warps forced (4: one unit per block;
//              2 / 1: units side by side); --units-ab: also time one unit per
//              block against units side by side (the plan's choice, else the
//              fewest waves), alternated, where they differ
//   --settle-ms N  run each decode cell about N ms untimed before timing it
//              (the board's sustained state; default 0: timed at once)
//   --cool-ms N  leave the GPU idle N ms before each decode cell (every cell
//              from a rested board, not from the previous cell's state)
//   --host-paced  time as every round before 2026-12-02 did: the start event
//              on an idle GPU, so each batch of 10 launches also holds the
//              host's latency to its first launch (bench::queued_timing;
//              the default queues the batch behind a held GPU first)
// Inputs are random (never zeros); small problems rotate over disjoint pages
// so that repeated launches do not measure the L2 cache.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/attention/decode_attention.h"
#include "backend/cuda/attention/decode_mma_fragments.cuh"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/attention/prefill_attention.h"
#include "backend/cuda/attention/rope_kv_write.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "../bench_args.h"
#include "bench_common.h"

using namespace qserve;

namespace {

// Random pages: codes and fp16 values random, (scale, zero) pairs sane.
__global__ void fill_pages_kernel(uint8_t* pool, int64_t bytes, KvPageLayout layout, uint64_t seed) {
  const int64_t hb = layout.head_block_bytes(), vr = layout.values_region_bytes();
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 4; i < bytes;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * 4) {
    uint64_t h = (i + seed) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    uint32_t w = static_cast<uint32_t>(h);
    const int64_t in_block = (i % layout.page_bytes()) % hb;
    if (layout.dtype == KvDtype::kFp16) {
      // two halves in +-[0.125, 2): sign, exponent 12..15, random mantissa
      auto mk = [](uint32_t r) { return static_cast<uint32_t>(((r & 1) << 15) | ((12 + ((r >> 1) & 3)) << 10) | ((r >> 3) & 0x3ff)); };
      w = mk(w) | (mk(w >> 13) << 16);
    } else if (in_block >= vr) {
      // {scale, zero}: scale in [0.03, 0.06), zero in [0, 16)
      const half s = __float2half(0.03f + (w & 0xff) * (0.03f / 256.f));
      const half z = __float2half(((w >> 8) & 0xff) * (15.f / 255.f));
      w = static_cast<uint32_t>(__half_as_ushort(s)) | (static_cast<uint32_t>(__half_as_ushort(z)) << 16);
    }
    *reinterpret_cast<uint32_t*>(pool + i) = w;
  }
}

struct Model {
  const char* name;
  int hq, hkv, d;
};

struct DecodeGrid {
  std::vector<int> batches, contexts;  // empty: the default grid
  std::string model;                   // empty: every model
  bool persistent = false, late_staging = false, biased_values = false;
  int tma = -1;         // KV4 staging: -1 the plan's choice, 0 cp.async, 1 TMA
  bool tma_ab = false;  // KV4: also time cp.async and TMA staging in alternation (3 each)
  int splits = 0;       // > 0: forced
  int unit_warps = 0;   // > 0: DecodePlan::unit_warps forced (4: one unit per block)
  // where the plan serves units side by side: also time it against one unit
  // per block, alternated (3 each)
  bool units_ab = false;
  int settle_ms = 0;  // > 0: each cell runs about this long untimed before its timings
  int cool_ms = 0;    // > 0: the GPU idles this long before each cell (and before its settling)
};

// The board's state lingers from cell to cell: after a cell of 16,384-key
// FP16 launches the next cell timed up to 10% slower than in an alternated
// A/B of itself; after ~100 ms of its own launches the KV4 cells of long
// contexts run up to 19% slower than timed at once (the board at its 700 W
// limit, SM clocks 1.4-1.9 GHz instead of 1.98), FP16-KV within 1%
// (bench/results/2026-12-02-attention-h200-r11.md).
// --settle-ms N runs each cell about N ms untimed before its timings (the
// sustained state); the default, 0, times it at once after 3 launches (the
// burst state, as every round before 11).
// --cool-ms N leaves the GPU idle for N ms before each cell, so that every
// cell starts from the same rested board instead of the state the previous
// cell left (the grid's order).
void cool(int ms) {
  bench::check(cudaDeviceSynchronize(), "cool");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void settle(const std::function<void()>& fn, int ms) {
  const double us = bench::time_us(fn, 5, 1);
  const int n = static_cast<int>(std::min(1e6, 1000.0 * ms / std::max(us, 1.0)));
  for (int i = 0; i < n; ++i) fn();
  bench::check(cudaDeviceSynchronize(), "settle");
}

void bench_decode(bool quick, cuda::DecodeKernel kernel, const DecodeGrid& grid, bench::Report& report) {
  const Model models[] = {{"Llama-3-8B", 32, 8, 128}, {"Llama-2-7B", 32, 32, 128}};
  std::vector<int> batches{1, 16, 64, 128, 256}, contexts{512, 1024, 1536, 4096, 16384};
  if (quick) batches = {1, 64, 256}, contexts = {1536, 4096};
  if (!grid.batches.empty()) batches = grid.batches;
  if (!grid.contexts.empty()) contexts = grid.contexts;
  const KvDtype dtypes[] = {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16};
  const int page_size = 64;
  const int sms = bench::num_sms();
  const size_t pool_cap = size_t{40} << 30;   // per pool (K or V)
  const size_t min_span = size_t{512} << 20;  // rotate over at least this many bytes
  std::string variant = cuda::decode_kernel_name(kernel);
  if (grid.persistent) variant += "+persistent";
  if (grid.late_staging) variant += "+late-staging";
  if (grid.biased_values) variant += "+biased-values";
  if (grid.tma == 1) variant += "+tma";
  if (grid.tma == 0) variant += "+cp.async";
  if (grid.splits > 0) variant += "+splits" + std::to_string(grid.splits);
  if (grid.unit_warps > 0) variant += "+unit-warps" + std::to_string(grid.unit_warps);
  std::printf("\n## Decode attention (page size %d, fp16 out, kernel %s, PDL %s)\n\n", page_size, variant.c_str(),
              cuda::programmatic_launch() ? "on" : "off");
  std::printf("resident blocks per SM (keys-in-M kernel, d = 128): KV4 %d, KV8 %d, FP16 %d\n\n",
              cuda::decode_blocks_per_sm(KvDtype::kInt4, 128), cuda::decode_blocks_per_sm(KvDtype::kInt8, 128),
              cuda::decode_blocks_per_sm(KvDtype::kFp16, 128));
  struct AbRow {
    const char* model;
    int batch, ctx;
    bool planned_tma;
    std::vector<double> cp, tma;
  };
  std::vector<AbRow> ab_rows;
  struct UnitsAbRow {
    const char* model;
    int batch, ctx;
    const char* kv;
    int planned, plan_uw;  // the side-by-side warps per unit timed; the plan's choice
    std::vector<double> one, sides;
  };
  std::vector<UnitsAbRow> units_rows;
  const char* kv_names[] = {"KV4", "KV8", "FP16"};
  std::printf("| model | batch | context | KV4 us | KV4 TB/s | KV8 us | KV8 TB/s | FP16 us | FP16 TB/s | FP16/KV4 | FP16/KV8 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Model& m : models) {
    if (!grid.model.empty() && grid.model != m.name) continue;
    const AttentionShape shape{m.hq, m.hkv, m.d};
    for (int batch : batches)
      for (int ctx : contexts) {
        double us[3] = {0, 0, 0}, tbs[3] = {0, 0, 0};
        for (int di = 0; di < 3; ++di) {
          const KvPageLayout layout{page_size, m.hkv, m.d, dtypes[di]};
          const int pages_per_seq = (ctx + page_size - 1) / page_size;
          const int64_t pages_needed = static_cast<int64_t>(batch) * pages_per_seq;
          const size_t need = pages_needed * layout.page_bytes();
          if (need > pool_cap) continue;
          const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(pool_cap / need, (min_span + need - 1) / need)));
          const int64_t num_pages = pages_needed * sets;
          bench::DeviceMem k(num_pages * layout.page_bytes()), v(num_pages * layout.page_bytes());
          fill_pages_kernel<<<4096, 256>>>(k.as<uint8_t>(), k.bytes, layout, 1);
          fill_pages_kernel<<<4096, 256>>>(v.as<uint8_t>(), v.bytes, layout, 2);
          std::vector<int32_t> pt(static_cast<size_t>(sets) * batch * pages_per_seq);
          for (size_t i = 0; i < pt.size(); ++i) pt[i] = static_cast<int32_t>(i);  // set s uses its own pages
          bench::DeviceMem dpt(pt.size() * 4), dctx(batch * 4), dq(static_cast<size_t>(batch) * m.hq * m.d * 2),
              dout(static_cast<size_t>(batch) * m.hq * m.d * 2);
          cudaMemcpy(dpt.ptr, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice);
          std::vector<int32_t> ctxs(batch, ctx);
          cudaMemcpy(dctx.ptr, ctxs.data(), batch * 4, cudaMemcpyHostToDevice);
          bench::fill_random_half(dq.as<uint16_t>(), static_cast<size_t>(batch) * m.hq * m.d, 3);
          cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtypes[di], batch, ctx, sms, grid.splits);
          plan.kernel = kernel;
          plan.persistent = grid.persistent;
          plan.stage_before_wait = !grid.late_staging;
          plan.subnormal_values = !grid.biased_values;
          if (grid.tma >= 0) plan.tma = grid.tma == 1;
          if (grid.unit_warps > 0) plan.unit_warps = grid.unit_warps;
          bench::DeviceMem ws(plan.workspace_bytes);
          const PagedKvCache cache{k.as<uint8_t>(), v.as<uint8_t>(), static_cast<int32_t>(num_pages), layout};
          int iter = 0;
          auto run = [&] {
            const int set = iter++ % sets;
            const cuda::DecodeArgs args{dq.as<uint16_t>(), dout.as<uint16_t>(), dctx.as<int32_t>(),
                                        dpt.as<int32_t>() + static_cast<size_t>(set) * batch * pages_per_seq,
                                        pages_per_seq, batch, 1.f / std::sqrt(static_cast<float>(m.d))};
            bench::check(cuda::decode_attention(args, shape, cache, plan, ws.ptr, nullptr), "decode_attention");
          };
          const double kv_bytes = 2.0 * batch * ctx * m.hkv * (layout.token_value_bytes() + (kv_has_params(dtypes[di]) ? 4 : 0));
          if (grid.cool_ms > 0) cool(grid.cool_ms);
          if (grid.settle_ms > 0) settle(run, grid.settle_ms);
          us[di] = bench::time_us(run);
          // The same cell under two plan settings, alternated A B A B A B
          // (set(true): B), the plan restored; us sorted, both medians reported.
          auto alternate = [&](const std::function<void(bool)>& set, const char* label_a, const std::string& label_b) {
            const cuda::DecodePlan kept = plan;
            std::pair<std::vector<double>, std::vector<double>> t;
            for (int r = 0; r < 3; ++r) {
              set(false);
              t.first.push_back(bench::time_us(run));
              set(true);
              t.second.push_back(bench::time_us(run));
            }
            plan = kept;
            std::sort(t.first.begin(), t.first.end());
            std::sort(t.second.begin(), t.second.end());
            report.add_decode(m.name, batch, ctx, dtypes[di], plan.num_splits, t.first[1], kv_bytes / (t.first[1] * 1e-6) / 1e12, label_a);
            report.add_decode(m.name, batch, ctx, dtypes[di], plan.num_splits, t.second[1], kv_bytes / (t.second[1] * 1e-6) / 1e12,
                              label_b.c_str());
            return t;
          };
          if (grid.tma_ab && dtypes[di] == KvDtype::kInt4 && m.d == 128) {
            auto t = alternate([&](bool tma) { plan.tma = tma; }, "ab-cp.async", "ab-tma");
            ab_rows.push_back({m.name, batch, ctx, plan.tma, t.first, t.second});
          }
          if (grid.units_ab && !plan.tma) {
            // one unit per block against units side by side: the plan's
            // choice, else its rule without the cap on keys per warp
            const int64_t units = static_cast<int64_t>(batch) * m.hkv * plan.num_splits;
            const int64_t slots = static_cast<int64_t>(sms) * cuda::decode_blocks_per_sm(dtypes[di], m.d);
            const int sides = plan.unit_warps != 4 ? plan.unit_warps
                                                   : cuda::decode_unit_warps(units, slots, plan.split_tokens, plan.split_tokens);
            if (sides != 4) {
              auto t = alternate([&](bool side_by_side) { plan.unit_warps = side_by_side ? sides : 4; }, "ab-unit-warps4",
                                 "ab-unit-warps" + std::to_string(sides));
              units_rows.push_back({m.name, batch, ctx, kv_names[di], sides, plan.unit_warps, t.first, t.second});
            }
          }
          tbs[di] = kv_bytes / (us[di] * 1e-6) / 1e12;
          const std::string label =
              variant + (grid.unit_warps > 0 || plan.unit_warps == 4 ? "" : "+unit-warps" + std::to_string(plan.unit_warps));
          report.add_decode(m.name, batch, ctx, dtypes[di], plan.num_splits, us[di], tbs[di], label.c_str());
        }
        auto cell = [](double v, const char* fmt) {
          static char buf[8][32];
          static int k = 0;
          char* b = buf[k++ % 8];
          if (v > 0) std::snprintf(b, 32, fmt, v); else std::snprintf(b, 32, "-");
          return b;
        };
        std::printf("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.name, batch, ctx, cell(us[0], "%.1f"),
                    cell(tbs[0], "%.2f"), cell(us[1], "%.1f"), cell(tbs[1], "%.2f"), cell(us[2], "%.1f"), cell(tbs[2], "%.2f"),
                    cell(us[0] > 0 && us[2] > 0 ? us[2] / us[0] : 0, "%.2fx"),
                    cell(us[1] > 0 && us[2] > 0 ? us[2] / us[1] : 0, "%.2fx"));
        std::fflush(stdout);
      }
  }
  if (!units_rows.empty()) {
    std::printf("\n### Units side by side vs one unit per block, same cell, alternated (3 each; us sorted, median in the ratio)\n\n");
    std::printf("| model | batch | context | KV | warps per unit | plan's | one per block us | side by side us | one / side by side |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (const UnitsAbRow& r : units_rows)
      std::printf("| %s | %d | %d | %s | %d | %d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.3f |\n", r.model, r.batch,
                  r.ctx, r.kv, r.planned, r.plan_uw, r.one[0], r.one[1], r.one[2], r.sides[0], r.sides[1], r.sides[2],
                  r.one[1] / r.sides[1]);
    std::fflush(stdout);
  }
  if (!ab_rows.empty()) {
    std::printf("\n### KV4 staging, cp.async vs TMA, same cell, alternated (3 each; us sorted, median in the ratio)\n\n");
    std::printf("| model | batch | context | plan | cp.async us | TMA us | cp.async / TMA |\n|---|---|---|---|---|---|---|\n");
    for (const AbRow& r : ab_rows)
      std::printf("| %s | %d | %d | %s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.3f |\n", r.model, r.batch, r.ctx,
                  r.planned_tma ? "TMA" : "cp.async", r.cp[0], r.cp[1], r.cp[2], r.tma[0], r.tma[1], r.tma[2],
                  r.cp[1] / r.tma[1]);
    std::fflush(stdout);
  }
}

void bench_fused(bool quick, bench::Report& report) {
  // copy ceiling: bytes read + written
  const size_t copy_bytes = size_t{1} << 30;
  bench::DeviceMem a(copy_bytes), b(copy_bytes);
  bench::fill_random_half(a.as<uint16_t>(), copy_bytes / 2, 5);
  const double copy_us = bench::time_us([&] { bench::check(cuda::copy_bytes(b.ptr, a.ptr, copy_bytes, nullptr), "copy"); });
  const double copy_tbs = 2.0 * copy_bytes / (copy_us * 1e-6) / 1e12;
  std::printf("\n## Fused memory-bound kernels vs a copy kernel (PDL %s; copy, plain: 1 GiB in %.0f us, %.2f TB/s read + write)\n\n",
              cuda::programmatic_launch() ? "on" : "off", copy_us, copy_tbs);
  std::printf("| kernel | rows x cols | us | TB/s | vs copy |\n|---|---|---|---|---|\n");
  report.add("{\"op\":\"copy\",\"bytes\":" + std::to_string(copy_bytes) + ",\"us\":" + std::to_string(copy_us) +
             ",\"tb_s\":" + std::to_string(copy_tbs) + "}");
  std::vector<int> row_counts{256, 8192, 32768};
  if (quick) row_counts = {8192};
  for (int rows : row_counts) {
    struct Case {
      const char* name;
      int cols;
      double bytes_per_row;  // read + written
    };
    const int h = 4096, inter = 14336;
    const Case cases[] = {
        {"rmsnorm+residual+quant+sum", h, h * 2.0 * 3 + h + 4},  // x, residual in/out, int8, scale+sum
        {"silu*mul+quant+sum", inter, inter * 2.0 * 2 + inter + 4},
        {"quant+sum (o_proj input)", h, h * 2.0 + h + 4},
        {"embedding gather", h, h * 2.0 * 2},
    };
    for (int ci = 0; ci < 4; ++ci) {
      const Case& c = cases[ci];
      const size_t n = static_cast<size_t>(rows) * c.cols;
      bench::DeviceMem x(n * 2 * (ci == 1 ? 2 : 1)), res(n * 2), q(n), sc(rows * 2), sm(rows * 2), gamma(c.cols * 2),
          ids(rows * 4), out(n * 2);
      bench::fill_random_half(x.as<uint16_t>(), x.bytes / 2, 7);
      bench::fill_random_half(res.as<uint16_t>(), n, 8);
      bench::fill_random_half(gamma.as<uint16_t>(), c.cols, 9);
      std::vector<int32_t> hid(rows);
      for (int r = 0; r < rows; ++r) hid[r] = (r * 7919) % rows;
      cudaMemcpy(ids.ptr, hid.data(), rows * 4, cudaMemcpyHostToDevice);
      const Int8Rows o{q.as<int8_t>(), sc.as<uint16_t>(), sm.as<uint16_t>()};
      std::function<void()> fn;
      if (ci == 0)
        fn = [&] { bench::check(cuda::rmsnorm_quant(x.as<uint16_t>(), res.as<uint16_t>(), gamma.as<uint16_t>(), rows, c.cols, 1e-5f, o, nullptr), "rmsnorm_quant"); };
      else if (ci == 1)
        fn = [&] { bench::check(cuda::silu_mul_quant(x.as<uint16_t>(), x.as<uint16_t>() + c.cols, 2 * c.cols, rows, c.cols, o, nullptr), "silu"); };
      else if (ci == 2)
        fn = [&] { bench::check(cuda::quantize_int8(x.as<uint16_t>(), rows, c.cols, o, nullptr), "quantize"); };
      else
        fn = [&] { bench::check(cuda::embedding_gather(x.as<uint16_t>(), rows, ids.as<int32_t>(), rows, c.cols, out.as<uint16_t>(), nullptr), "gather"); };
      const double us = bench::time_us(fn);
      const double tbs = rows * c.bytes_per_row / (us * 1e-6) / 1e12;
      std::printf("| %s | %d x %d | %.1f | %.2f | %.0f%% |\n", c.name, rows, c.cols, us, tbs, 100.0 * tbs / copy_tbs);
      std::fflush(stdout);
      report.add(std::string("{\"op\":\"") + c.name + "\",\"rows\":" + std::to_string(rows) + ",\"cols\":" +
                 std::to_string(c.cols) + ",\"us\":" + std::to_string(us) + ",\"tb_s\":" + std::to_string(tbs) +
                 ",\"vs_copy\":" + std::to_string(tbs / copy_tbs) + "}");
    }
  }
}

void bench_prefill(bool quick, bench::Report& report);
void bench_chain(const DecodeGrid& grid, bench::Report& report);
void bench_floor(bench::Report& report);

}  // namespace

int main(int argc, char** argv) {
  bool decode = false, prefill = false, fused = false, quick = false, chain = false, floor = false;
  cuda::DecodeKernel kernel = cuda::DecodeKernel::kAuto;
  DecodeGrid grid;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--decode") decode = true;
    else if (a == "--prefill") prefill = true;
    else if (a == "--fused") fused = true;
    else if (a == "--chain") chain = true;
    else if (a == "--floor") floor = true;
    else if (a == "--quick") quick = true;
    else if (a == "--no-pdl") cuda::set_programmatic_launch(false);
    else if (a == "--persistent") grid.persistent = true;
    else if (a == "--late-staging") grid.late_staging = true;
    else if (a == "--biased-values") grid.biased_values = true;
    else if (a == "--tma") grid.tma = 1;
    else if (a == "--no-tma") grid.tma = 0;
    else if (a == "--tma-ab") grid.tma_ab = true;
    else if (a == "--units-ab") grid.units_ab = true;
    else if (a == "--host-paced") bench::queued_timing = false;
    else if (a == "--cool-ms" && i + 1 < argc) grid.cool_ms = std::atoi(argv[++i]);
    else if (a == "--settle-ms" && i + 1 < argc) grid.settle_ms = std::atoi(argv[++i]);
    else if (a == "--unit-warps" && i + 1 < argc) grid.unit_warps = std::atoi(argv[++i]);
    else if (a == "--splits" && i + 1 < argc) grid.splits = std::atoi(argv[++i]);
    else if (a == "--batches" && i + 1 < argc) grid.batches = bench::parse_list<int>(argv[++i]);
    else if (a == "--contexts" && i + 1 < argc) grid.contexts = bench::parse_list<int>(argv[++i]);
    else if (a == "--model" && i + 1 < argc) grid.model = argv[++i];
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--kernel" && i + 1 < argc) {
      const std::string k = argv[++i];
      kernel = k == "mma" ? cuda::DecodeKernel::kMma : k == "simt" ? cuda::DecodeKernel::kSimt
             : k == "mma-rows" ? cuda::DecodeKernel::kMmaRows : cuda::DecodeKernel::kAuto;
    }
    else {
      std::fprintf(stderr, "usage: %s [--decode] [--prefill] [--fused] [--chain] [--floor] [--quick] [--kernel auto|mma|simt|mma-rows] [--no-pdl] [--persistent] [--late-staging] [--biased-values] [--tma | --no-tma] [--tma-ab] [--unit-warps 4|2|1] [--units-ab] [--settle-ms N] [--cool-ms N] [--host-paced] [--splits N] [--batches L] [--contexts L] [--model NAME] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  if (!decode && !prefill && !fused && !chain && !floor) decode = prefill = fused = true;
  bench::Report report;
  bench::print_device();
  std::printf("programmatic dependent launch: %s\n", cuda::programmatic_launch() ? "on" : "off");
  std::printf("timing: %s\n", bench::queued_timing ? "queued (batches of launches queued behind a held GPU)"
                                                     : "host-paced (start event on an idle GPU)");
  report.add(std::string("{\"op\":\"timing\",\"method\":\"") + (bench::queued_timing ? "queued" : "host-paced") + "\"}");
  if (fused) bench_fused(quick, report);
  if (decode) bench_decode(quick, kernel, grid, report);
  if (prefill) bench_prefill(quick, report);
  if (chain) bench_chain(grid, report);
  if (floor) bench_floor(report);
  if (!json_path.empty()) report.write(json_path);
  return 0;
}

namespace {
// Causal prefill of whole prompts over pages already holding them; FLOPs
// counted as in anchors.md: 2 x 2 x b x h x s^2 x d / 2. Each case runs the
// flash kernel (the default) and the earlier paged kernel in the same run.
void bench_prefill(bool quick, bench::Report& report) {
  struct Case {
    int batch, seq, hq, hkv, d;
  };
  std::vector<Case> cases{{8, 1024, 32, 8, 128}, {32, 1024, 32, 8, 128}, {1, 4096, 32, 8, 128},
                          {8, 1024, 32, 32, 128}, {4, 2048, 32, 8, 128}, {8, 1024, 32, 8, 64}};
  if (quick) cases = {{8, 1024, 32, 8, 128}, {1, 4096, 32, 8, 128}};
  const int page_size = 64;
  const KvDtype dtypes[] = {KvDtype::kInt4, KvDtype::kInt8, KvDtype::kFp16};
  const char* dnames[] = {"kv4", "kv8", "fp16"};
  const cuda::PrefillKernel kernels[] = {cuda::PrefillKernel::kFlash, cuda::PrefillKernel::kPaged,
                                         cuda::PrefillKernel::kFlashSyncPv};
  const char* knames[] = {"flash", "paged", "flash_sync_pv"};
  std::printf("\n## Prefill attention (causal, whole prompts from the paged cache, page size %d)\n\n", page_size);
  std::printf("us and TFLOP/s of the flash kernel (the default), then TFLOP/s of the earlier paged kernel and of\n"
              "the flash kernel with P V on mma.sync (\"sync\"), in the same run\n\n");
  std::printf("| batch x seq | q/kv heads | d | KV4 us | KV4 TFLOP/s | paged | sync | KV8 us | KV8 TFLOP/s | paged | sync | FP16 us | FP16 TFLOP/s | paged | sync |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    const AttentionShape shape{c.hq, c.hkv, c.d};
    const double flops = 2.0 * 2.0 * c.batch * c.hq * static_cast<double>(c.seq) * c.seq * c.d / 2.0;
    double us[3][3] = {};
    for (int di = 0; di < 3; ++di) {
      const KvPageLayout layout{page_size, c.hkv, c.d, dtypes[di]};
      const int pps = (c.seq + page_size - 1) / page_size;
      const int64_t num_pages = static_cast<int64_t>(c.batch) * pps;
      bench::DeviceMem k(num_pages * layout.page_bytes()), v(num_pages * layout.page_bytes());
      fill_pages_kernel<<<4096, 256>>>(k.as<uint8_t>(), k.bytes, layout, 11);
      fill_pages_kernel<<<4096, 256>>>(v.as<uint8_t>(), v.bytes, layout, 12);
      std::vector<int32_t> pt(num_pages), ctx(c.batch, c.seq), starts(c.batch + 1);
      for (int64_t i = 0; i < num_pages; ++i) pt[i] = static_cast<int32_t>(i);
      for (int b = 0; b <= c.batch; ++b) starts[b] = b * c.seq;
      const size_t qn = static_cast<size_t>(c.batch) * c.seq * c.hq * c.d;
      bench::DeviceMem dpt(pt.size() * 4), dctx(c.batch * 4), dst((c.batch + 1) * 4), dq(qn * 2), dout(qn * 2);
      cudaMemcpy(dpt.ptr, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dctx.ptr, ctx.data(), ctx.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dst.ptr, starts.data(), starts.size() * 4, cudaMemcpyHostToDevice);
      bench::fill_random_half(dq.as<uint16_t>(), qn, 13);
      const PagedKvCache cache{k.as<uint8_t>(), v.as<uint8_t>(), static_cast<int32_t>(num_pages), layout};
      for (int ki = 0; ki < 3; ++ki) {
        const cuda::PrefillArgs args{dq.as<uint16_t>(), dout.as<uint16_t>(), dst.as<int32_t>(), dctx.as<int32_t>(),
                                     dpt.as<int32_t>(), pps, c.batch, c.seq, 1.f / std::sqrt(static_cast<float>(c.d)),
                                     kernels[ki]};
        us[di][ki] = bench::time_us([&] { bench::check(cuda::prefill_attention(args, shape, cache, nullptr), "prefill"); }, 5, 3);
        report.add("{\"op\":\"prefill\",\"kernel\":\"" + std::string(knames[ki]) +
                   "\",\"batch\":" + std::to_string(c.batch) + ",\"seq\":" + std::to_string(c.seq) +
                   ",\"hq\":" + std::to_string(c.hq) + ",\"hkv\":" + std::to_string(c.hkv) + ",\"d\":" +
                   std::to_string(c.d) + ",\"kv\":\"" + dnames[di] + "\",\"us\":" + std::to_string(us[di][ki]) +
                   ",\"tflops\":" + std::to_string(flops / (us[di][ki] * 1e-6) / 1e12) + "}");
      }
    }
    auto tf = [&](double t) { return flops / (t * 1e-6) / 1e12; };
    std::printf("| %d x %d | %d/%d | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
                c.batch, c.seq, c.hq, c.hkv, c.d, us[0][0], tf(us[0][0]), tf(us[0][1]), tf(us[0][2]), us[1][0],
                tf(us[1][0]), tf(us[1][1]), tf(us[1][2]), us[2][0], tf(us[2][0]), tf(us[2][1]), tf(us[2][2]));
    std::fflush(stdout);
  }
}
}  // namespace

namespace {
// A layer's decode step as the engine issues it: rope_kv_write of the batch's
// new tokens (q/k/v rows from the projection, position ctx - 1 of each
// sequence written into its page), then decode attention over the context,
// back to back, timed per pair. rope_kv_write is launched plain (as before
// it took programmatic launch: decode's staging before its wait then overlaps
// nothing) or with PDL (decode's blocks start while it runs); decode uses PDL
// in both. Also: rope_kv_write alone.
void bench_chain(const DecodeGrid& grid, bench::Report& report) {
  const Model models[] = {{"Llama-3-8B", 32, 8, 128}, {"Llama-2-7B", 32, 32, 128}};
  std::vector<int> batches{64, 128, 256}, contexts{512, 1536, 4096};
  if (!grid.batches.empty()) batches = grid.batches;
  if (!grid.contexts.empty()) contexts = grid.contexts;
  const KvDtype dtypes[] = {KvDtype::kInt4, KvDtype::kFp16};
  const char* dnames[] = {"kv4", "fp16"};
  const int page_size = 64;
  const int sms = bench::num_sms();
  const bool pdl = cuda::programmatic_launch();
  std::printf("\n## rope_kv_write + decode attention, back to back (page size %d; decode with PDL %s)\n\n", page_size,
              pdl ? "on" : "off");
  std::printf("| model | batch | context | rope alone us | KV4 pair, rope plain | KV4 pair, rope PDL | FP16 pair, rope plain | FP16 pair, rope PDL | FP16/KV4 (PDL) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Model& m : models) {
    if (!grid.model.empty() && grid.model != m.name) continue;
    const AttentionShape shape{m.hq, m.hkv, m.d};
    for (int batch : batches)
      for (int ctx : contexts) {
        double us[2][2] = {}, rope_us = 0;
        for (int di = 0; di < 2; ++di) {
          const KvPageLayout layout{page_size, m.hkv, m.d, dtypes[di]};
          const int pps = (ctx + page_size - 1) / page_size;
          // rotate over sets of pages (>= 512 MB in all), as the decode grid does
          const size_t need = static_cast<size_t>(batch) * pps * layout.page_bytes();
          const int sets = static_cast<int>(std::max<size_t>(1, ((size_t{512} << 20) + need - 1) / need));
          const int64_t num_pages = static_cast<int64_t>(sets) * batch * pps;
          bench::DeviceMem k(num_pages * layout.page_bytes()), v(num_pages * layout.page_bytes());
          fill_pages_kernel<<<4096, 256>>>(k.as<uint8_t>(), k.bytes, layout, 21);
          fill_pages_kernel<<<4096, 256>>>(v.as<uint8_t>(), v.bytes, layout, 22);
          std::vector<int32_t> pt(num_pages), ctxs(batch, ctx), pos(batch, ctx - 1), slots(static_cast<size_t>(sets) * batch);
          for (int64_t i = 0; i < num_pages; ++i) pt[i] = static_cast<int32_t>(i);  // set s: rows s * batch ..
          for (int64_t b = 0; b < static_cast<int64_t>(sets) * batch; ++b)
            slots[b] = pt[b * pps + (ctx - 1) / page_size] * page_size + (ctx - 1) % page_size;
          // rope table [ctx, d / 2, 2]: cos, sin of a plain theta schedule
          std::vector<float> table(static_cast<size_t>(ctx) * m.d);
          for (int p = 0; p < ctx; ++p)
            for (int i = 0; i < m.d / 2; ++i) {
              const double a = p * std::pow(10000.0, -2.0 * i / m.d);
              table[(static_cast<size_t>(p) * m.d / 2 + i) * 2] = static_cast<float>(std::cos(a));
              table[(static_cast<size_t>(p) * m.d / 2 + i) * 2 + 1] = static_cast<float>(std::sin(a));
            }
          const int64_t row = static_cast<int64_t>(m.hq + 2 * m.hkv) * m.d;
          bench::DeviceMem dpt(pt.size() * 4), dctx(batch * 4), dpos(batch * 4), dslots(slots.size() * 4),
              dtable(table.size() * 4), dqkv(static_cast<size_t>(batch) * row * 2),
              dq(static_cast<size_t>(batch) * m.hq * m.d * 2), dout(static_cast<size_t>(batch) * m.hq * m.d * 2);
          cudaMemcpy(dpt.ptr, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice);
          cudaMemcpy(dctx.ptr, ctxs.data(), batch * 4, cudaMemcpyHostToDevice);
          cudaMemcpy(dpos.ptr, pos.data(), batch * 4, cudaMemcpyHostToDevice);
          cudaMemcpy(dslots.ptr, slots.data(), slots.size() * 4, cudaMemcpyHostToDevice);
          cudaMemcpy(dtable.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice);
          bench::fill_random_half(dqkv.as<uint16_t>(), static_cast<size_t>(batch) * row, 23);
          cuda::DecodePlan plan = cuda::plan_decode_attention(shape, dtypes[di], batch, ctx, sms);
          plan.subnormal_values = !grid.biased_values;
          if (grid.tma >= 0) plan.tma = grid.tma == 1;
          if (grid.unit_warps > 0) plan.unit_warps = grid.unit_warps;
          bench::DeviceMem ws(plan.workspace_bytes);
          const PagedKvCache cache{k.as<uint8_t>(), v.as<uint8_t>(), static_cast<int32_t>(num_pages), layout};
          const QkvInput in{dqkv.as<uint16_t>(), dqkv.as<uint16_t>() + m.hq * m.d,
                            dqkv.as<uint16_t>() + (m.hq + m.hkv) * m.d, row, row, row};
          int set = 0;
          auto rope = [&] {
            const KvWriteBatch wb{batch, dpos.as<int32_t>(), dslots.as<int32_t>() + static_cast<size_t>(set) * batch};
            bench::check(cuda::rope_kv_write(in, wb, shape, RopeStyle::kRotateHalf, dtable.as<float>(), dq.as<uint16_t>(),
                                             cache, nullptr),
                         "rope_kv_write");
          };
          auto decode = [&] {
            const cuda::DecodeArgs args{dq.as<uint16_t>(), dout.as<uint16_t>(), dctx.as<int32_t>(),
                                        dpt.as<int32_t>() + static_cast<size_t>(set) * batch * pps, pps, batch,
                                        1.f / std::sqrt(static_cast<float>(m.d))};
            bench::check(cuda::decode_attention(args, shape, cache, plan, ws.ptr, nullptr), "decode_attention");
            set = (set + 1) % sets;
          };
          for (int rp = 0; rp < 2; ++rp) {
            us[di][rp] = bench::time_us([&] {
              cuda::set_programmatic_launch(pdl && rp == 1);
              rope();
              cuda::set_programmatic_launch(pdl);
              decode();
            });
            report.add(std::string("{\"op\":\"rope+decode\",\"model\":\"") + m.name + "\",\"batch\":" +
                       std::to_string(batch) + ",\"context\":" + std::to_string(ctx) + ",\"kv\":\"" + dnames[di] +
                       "\",\"rope_pdl\":" + (rp == 1 && pdl ? "true" : "false") + ",\"us\":" + std::to_string(us[di][rp]) + "}");
          }
          if (di == 0) {
            rope_us = bench::time_us(rope);
            report.add(std::string("{\"op\":\"rope_kv_write\",\"model\":\"") + m.name + "\",\"batch\":" +
                       std::to_string(batch) + ",\"kv\":\"kv4\",\"us\":" + std::to_string(rope_us) + "}");
          }
        }
        std::printf("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx |\n", m.name, batch, ctx, rope_us, us[0][0],
                    us[0][1], us[1][0], us[1][1], us[1][1] / us[0][1]);
        std::fflush(stdout);
      }
  }
}
}  // namespace

namespace {
// The launch floor of the decode grid: kernels with the KV4 decode kernel's
// block (128 threads) and shared memory (4 blocks per SM) that do (a) only
// the programmatic-launch wait and one store per block, (b) the decode
// kernel's chain of dependent loads (a context length, then a page-table
// entry, then 16 bytes of a page per lane, the query after the wait) and one
// store per block; launched back to back as bench_decode times the kernel.
__global__ void floor_empty_kernel(uint32_t* out) {
  cuda::pdl_wait_and_trigger();
  if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x;
}
__global__ void floor_chain_kernel(const int32_t* context_lens, const int32_t* page_table, int stride, int batch,
                                   const uint4* pages, int64_t page_words, const uint4* q, uint32_t* out) {
  const int b = blockIdx.x % batch;
  const int ctx = context_lens[b];
  const int page = page_table[static_cast<int64_t>(b) * stride + (ctx - 1) / 2 % stride];
  const uint4 v = pages[page * page_words + threadIdx.x];
  cuda::pdl_wait_and_trigger();
  const uint4 x = q[static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x];
  const uint32_t r = v.x ^ v.y ^ v.z ^ v.w ^ x.x ^ x.w;
  if (r == 0x12345678u) out[blockIdx.x] = r;  // (practically never: keeps the loads)
}

void bench_floor(bench::Report& report) {
  constexpr int kSmem = cuda::mmat::MmaTraits<KvDtype::kInt4, 128>::kSmemBytes;  // the KV4 d = 128 decode kernel's
  bench::check(cudaFuncSetAttribute(floor_empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "attr");
  bench::check(cudaFuncSetAttribute(floor_chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "attr");
  int per_sm = 0;
  bench::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, floor_chain_kernel, 128, kSmem), "occupancy");
  std::printf("\n## Launch floor of the decode grid (128 threads, %d B shared: %d blocks per SM; PDL %s)\n\n", kSmem,
              per_sm, cuda::programmatic_launch() ? "on" : "off");
  std::printf("| blocks | empty us | dependent-load chain us |\n|---|---|---|\n");
  const int batch = 64, stride = 16;
  const int64_t page_words = KvPageLayout{64, 8, 128, KvDtype::kInt4}.page_bytes() / 16;  // a Llama-3-8B KV4 page
  const int64_t num_pages = int64_t{batch} * stride;
  bench::DeviceMem pages(num_pages * page_words * 16), q(size_t{2048} * 128 * 16), out(2048 * 4), ctx(batch * 4),
      pt(num_pages * 4);
  std::vector<int32_t> hctx(batch, 1024), hpt(num_pages);
  for (int64_t i = 0; i < num_pages; ++i) hpt[i] = static_cast<int32_t>((i * 7919) % num_pages);
  cudaMemcpy(ctx.ptr, hctx.data(), batch * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(pt.ptr, hpt.data(), num_pages * 4, cudaMemcpyHostToDevice);
  cudaMemset(pages.ptr, 1, pages.bytes);
  cudaMemset(q.ptr, 2, q.bytes);
  for (int blocks : {512, 1024, 2048}) {
    const double empty = bench::time_us([&] {
      bench::check(cuda::launch_kernel(floor_empty_kernel, dim3(blocks), dim3(128), kSmem, nullptr, out.as<uint32_t>()),
                   "floor_empty");
    });
    const double chain = bench::time_us([&] {
      bench::check(cuda::launch_kernel(floor_chain_kernel, dim3(blocks), dim3(128), kSmem, nullptr, ctx.as<int32_t>(),
                                       pt.as<int32_t>(), stride, batch, pages.as<uint4>(), page_words, q.as<uint4>(),
                                       out.as<uint32_t>()),
                   "floor_chain");
    });
    std::printf("| %d | %.2f | %.2f |\n", blocks, empty, chain);
    report.add("{\"op\":\"launch_floor\",\"blocks\":" + std::to_string(blocks) + ",\"empty_us\":" +
               std::to_string(empty) + ",\"chain_us\":" + std::to_string(chain) + "}");
  }
  std::fflush(stdout);
}
}  // namespace
