// W4A8 GEMM benchmark: the project's kernels (per-channel, g128) against
// cuBLASLt INT8 and cuBLASLt FP16 (each the fastest of its heuristic
// candidates per shape, every candidate timed as below), all timed in this
// process the same way: a CUDA graph of L
// back-to-back launches, each on another copy of the weights (so that the
// weights come from HBM, not from the 60 MB L2, unless --hot), warm-up
// replays first, then the median over replays.
//
//   bench_gemm [--quick] [--sweep] [--sweep-tiles NAME,...] [--sweep-splits 1,2,...] [--hot] [--no-pd]
//              [--g128-s8-only] [--graph-us US]
//              [--json FILE] [--md FILE] [--m 1,16,...] [--shapes NAME,...] [--shape N,K ...]
//              [--neighbor-us US | --neighbor-mb MB | --neighbor-code | --predecessor] [--interleave N]
//              [--soak-ms MS]
//              [--host-paced] [--timeline]
//
// Each replay is queued behind a held GPU (gpu_hold.h), so that the graph's
// launch latency is not in its time; --host-paced times as before
// 2026-12-02 (the start event on an idle GPU: the latency, a few us, spread
// over the graph's launches).
//
// --interleave N: after a row's timings, cuBLASLt INT8 (its chosen candidate)
// and the two shipped plans are timed again in turn, N rounds, the order
// rotated by one each round (since 2026-12-03; before, cuBLASLt first in every
// round), and the median of each is reported beside the row's single timings
// ("interleaved" line, JSON interleaved_*): the row times cuBLASLt first and
// our kernels after the mma.sync family's, and on a board near its power limit
// the place in that order moves a large-m timing by several percent.
//
// --soak-ms MS: after a row's timings, cuBLASLt INT8 and the two shipped
// plans each run alone for MS milliseconds of back-to-back graph replays
// (after 2 s idle each), printing the wall-clock span and the time per launch
// at the start and at the end (JSON soak_*: the end): matched with power and
// clock samples, what each sustains under the board's 700 W limit.
//
// --neighbor-us US: before every timed launch (ours and cuBLASLt's) a kernel
// that holds every SM for US microseconds (neighbor_kernel.h), its own time
// (timed alone for each m of each layer: JSON neighbor_alone_us)
// subtracted: a GEMM after another kernel, as in a model, instead of after
// itself (whose CTAs, under programmatic dependent launch, can start beside
// the previous launch's when both fit on the GPU).
//
// --neighbor-mb MB: the same neighbor, reading MB MiB instead of spinning
// (its own time subtracted likewise). With MB past the L2 (128 on the H200,
// twice its 60 MB), every timed launch starts with its instructions as well
// as its weights out of L2, as in a model, where the other layers' weights
// stream through L2 between two launches of one GEMM; under --neighbor-us
// and back to back, the kernel's code stays in L2 from its previous launch.
//
// --neighbor-code: the same neighbor, running once through ~390 KB of
// straight-line code instead of spinning (its own time subtracted likewise):
// every timed launch starts with the SM's instruction caches holding the
// neighbor's code, not its own, as in a model, where attention, norms and the
// other GEMMs run on the same SMs between two launches of one GEMM. Its code
// stays in L2 (this isolates the SM-side caches). Round 47: a loop unrolled
// into 10-30 KB of straight-line code was faster than main alone, back to back
// and after --neighbor-mb, but cost the engine 1-2.5%; under --neighbor-code
// it lost to the shorter groups (round 48). Its passes are noisier than plain
// ones: compare medians over several rows.
//
// --predecessor: before every timed launch, the engine's own kernel that
// writes this layer's activations (silu_mul_quant for the down layers,
// quantize_int8 for o, rmsnorm_quant for the others (without the residual
// add, whose stream would grow without bound over the replays):
// kernels/fused_ops.h) on [m, k], writing the INT8 rows, scales and sums the
// GEMM then reads, under programmatic dependent launch as in the model (the
// GEMM waits for it, not for a stand-in); its time alone at that m
// subtracted (JSON predecessor_us).
//
// --timeline (a build configured with -DQSERVE_GEMM_TIMELINE=ON): after a
// row's timings, each shipped W4 wgmma plan is timed once more with its
// kernels recording their phases (gemm_w4a8_timeline.h), and the last
// launch's record is printed (cuda::summarize_w4a8_timeline): per point, the
// median and largest time since each CTA's entry, then per phase (PDL wait,
// fill, main loop, cluster wait, parts, epilogue) the median and largest of
// the CTAs' own durations, and the register-A W4 tiles' main loop split into
// barrier waits, wgmma waits and the rest (loads, unpacking, issue).
//
// --shape N,K (repeatable): time these layer shapes ("custom/NxK") instead of
// the built-in list, e.g. the same layer at several k to separate a kernel's
// per-launch cost from its per-k work.
//
// --g128-s8-only: of the INT8-weight tiles time only g128 with the pass (not
// per-channel W4 or W8A8: their columns read 0).
//
// --sweep times every tile x split-K of both families per row (wgmma tiles
// with splits 1, 2, 3, 4, 6, 8, 12, 16; mma.sync tiles 1, 2, 4, 8, 16, not
// above m = 256 on sm_90; cluster tiles up to 8, the cluster size) and prints
// one "sweep" line per row and kind; --sweep-tiles limits it to the tiles
// named (w4a8_tile_name: "wg256x16a2c,wg256x32"), --sweep-splits to the split
// counts given (sk: stream-K, on the persistent W4 wgmma tiles); --graph-us sets the work per graph replay (default 2000 us;
// shorter makes a sweep cheaper).
//
// Reports microseconds, TOPS (2mnk / t), effective GB/s (weights + activations
// + output bytes / t) and the ratios t(cuBLASLt INT8) / t and t(FP16) / t, for
// both W4A8 kernel families: mma.sync (any sm_80+ GPU) and, on sm_90, wgmma,
// each with its own planner, and for the top-level plan ("shipped": what the
// engine runs; on sm_90 it may be an mma.sync plan that the mma.sync planner
// would not pick, then timed on its own).
//
// On sm_90 also the INT8-weight wgmma tiles (s8_*), each with the cost
// model's split-K: g128 and per-channel W4 with the dequantization pass
// included in the time (the pass alone is reported too), and W8A8 (INT8
// weights, fused epilogue) against cuBLASLt INT8 + the separate epilogue
// kernel, what the W8A8 layer ran before. And the producer-dequantizing
// tiles (pd_*: the INT8-weight consumers fed from the W4 weights without the
// pass), g128, each with the cost model's split-K: "g128 pd" columns.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gemm_cublas.h"
#include "backend/cuda/gemm_s8.h"
#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_timeline.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "core/half.h"
#include "quant/weight_format.h"
#include "../bench_args.h"
#include "gpu_hold.h"
#include "gemm_layers.h"
#include "neighbor_kernel.h"

namespace qserve {
namespace {

using Shape = bench::GemmLayer;

// Fast deterministic filler (the values only need to be non-trivial).
struct XorShift {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};
void fill_random(std::vector<uint8_t>& v, uint64_t seed) {
  XorShift r{seed * 0x9E3779B97F4A7C15ull + 1};
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t x = r.next();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<uint8_t>(r.next());
}

struct Timer {
  cudaStream_t stream;
  bool hot;
  double graph_us = 2000.0;  // work per replay
  // --neighbor-* / --predecessor: launched before every timed launch, its
  // time alone (neighbor_us; timer_for in run() times it once per m of each
  // layer) subtracted from each result.
  std::function<void()> neighbor;
  double neighbor_us = 0;
  // Median microseconds per launch of fn(copy) over a graph of back-to-back
  // launches (each after the neighbor kernel, when there is one).
  double time(int copies, const std::function<void(int)>& fn) const {
    if (!neighbor) return chain(copies, fn);
    return chain(copies, [&](int c) {
             neighbor();
             fn(c);
           }) -
           neighbor_us;
  }
  // fn's launches captured as one graph: `launches` back-to-back calls over
  // the weight copies (launches sized from est_us so that a replay is ~graph_us).
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    int launches = 0;
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    ~Graph() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
    }
  };
  void capture(Graph& g, int copies, const std::function<void(int)>& fn, double est_us) const {
    g.launches = static_cast<int>(std::clamp(graph_us / est_us, 4.0, 64.0));
    QS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < g.launches; ++i) fn(hot ? 0 : i % copies);
    QS_CUDA_CHECK(cudaStreamEndCapture(stream, &g.graph));
    QS_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  }
  // Microseconds of one launch of fn, from three back-to-back ones (at least 1).
  double estimate_us(int copies, const std::function<void(int)>& fn) const {
    cudaEvent_t a, b;
    QS_CUDA_CHECK(cudaEventCreate(&a));
    QS_CUDA_CHECK(cudaEventCreate(&b));
    QS_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < 3; ++i) fn(hot ? 0 : i % copies);
    QS_CUDA_CHECK(cudaEventRecord(b, stream));
    QS_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    QS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return std::max(1.0, ms * 1000.0 / 3);
  }
  static double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
  double chain(int copies, const std::function<void(int)>& fn) const {
    fn(0);  // first call outside the graph (tuning, lazy setup)
    Graph g;
    capture(g, copies, fn, estimate_us(copies, fn));  // ~2 ms of work per replay
    for (int i = 0; i < 2; ++i) QS_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    cudaEvent_t a, b;
    QS_CUDA_CHECK(cudaEventCreate(&a));
    QS_CUDA_CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int r = 0; r < 9; ++r) {
      bench::hold_gpu(stream);  // the replay is queued before the GPU starts it (gpu_hold.h)
      QS_CUDA_CHECK(cudaEventRecord(a, stream));
      QS_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
      QS_CUDA_CHECK(cudaEventRecord(b, stream));
      bench::release_gpu();
      QS_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      QS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      us.push_back(ms * 1000.0 / g.launches);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return median(us);
  }
  // --soak-ms: fn's graph replayed back to back for about `ms` milliseconds
  // (all replays queued at once, so the GPU never idles), microseconds per
  // launch at the start (median of the first tenth of the replays) and at the
  // end (median of the last third), where the board's power limiter has
  // settled. Prints the wall-clock span, to be matched with power samples.
  struct Soak {
    double first_us = 0, last_us = 0;
    int replays = 0;
  };
  Soak soak(int copies, const std::function<void(int)>& fn, double ms, const char* label) const {
    fn(0);
    const double est_us = estimate_us(copies, fn);
    Graph g;
    capture(g, copies, fn, est_us);
    QS_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    QS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int replays = std::max(10, static_cast<int>(ms * 1000.0 / (g.launches * est_us)));
    std::vector<cudaEvent_t> ev(replays + 1);
    for (auto& e : ev) QS_CUDA_CHECK(cudaEventCreate(&e));
    const std::string start = wall_clock();
    QS_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    for (int r = 0; r < replays; ++r) {
      QS_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
      QS_CUDA_CHECK(cudaEventRecord(ev[r + 1], stream));
    }
    QS_CUDA_CHECK(cudaEventSynchronize(ev[replays]));
    const std::string end = wall_clock();
    std::vector<double> us(replays);
    for (int r = 0; r < replays; ++r) {
      float t = 0;
      QS_CUDA_CHECK(cudaEventElapsedTime(&t, ev[r], ev[r + 1]));
      us[r] = t * 1000.0 / g.launches;
    }
    for (auto& e : ev) cudaEventDestroy(e);
    Soak s;
    s.replays = replays;
    s.first_us = median(std::vector<double>(us.begin(), us.begin() + std::max(1, replays / 10)));
    s.last_us = median(std::vector<double>(us.end() - std::max(1, replays / 3), us.end()));
    std::printf("  soak %-5s %s .. %s  %d replays x %d launches: %.1f us at the start, %.1f us at the end\n", label,
                start.c_str(), end.c_str(), replays, g.launches, s.first_us, s.last_us);
    return s;
  }
  // "YYYY/MM/DD HH:MM:SS.mmm" (UTC), nvidia-smi's timestamp form.
  static std::string wall_clock() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const int msec =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d/%02d/%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, msec);
    return buf;
  }
};

struct Row {
  std::string model, layer;
  int64_t m, n, k;
  double int8_us = 0, fp16_us = 0, pc_us = 0, g128_us = 0;  // mma.sync family (sm_80 design)
  int int8_candidate = 0, int8_candidates = 0, fp16_candidate = 0, fp16_candidates = 0;  // cuBLASLt: fastest / timed
  double pc_wg_us = 0, g_wg_us = 0;                           // wgmma family (sm_90a; 0: not run)
  int pc_tile = 0, pc_splits = 0, g_tile = 0, g_splits = 0;
  int pcw_tile = 0, pcw_splits = 0, gw_tile = 0, gw_splits = 0;
  bool pc_auto_wg = false, g_auto_wg = false;                 // the planner's family choice
  double pc_ship_us = 0, g_ship_us = 0;                       // the top-level plan (what the engine runs)
  double pc_ship_nopdl_us = 0, g_ship_nopdl_us = 0;           // the same plan without programmatic dependent launch
  int pcs_tile = 0, pcs_splits = 0, gs_tile = 0, gs_splits = 0;
  // --interleave N: cuBLASLt INT8 and the two shipped plans timed again, in
  // turn, N times; the median of each (0: not run).
  double int8_il_us = 0, pc_il_us = 0, g_il_us = 0;
  // --soak-ms: the same three, each alone for the given time, per launch at the end (0: not run).
  double int8_soak_us = 0, pc_soak_us = 0, g_soak_us = 0;
  double pc_bytes = 0, g_bytes = 0, int8_bytes = 0, fp16_bytes = 0;
  // INT8-weight tiles (0: not run): per tile, W4 with the pass, W8A8 fused.
  double g_s8_us[4] = {}, pc_s8_us[4] = {}, w8_s8_us[4] = {};
  int s8_splits[4] = {};
  double g_pass_us = 0, pc_pass_us = 0, w8a8_lt_us = 0;  // the pass alone; cuBLASLt INT8 + epilogue kernel
  double predecessor_us = 0;  // --predecessor: its time alone at this m (subtracted)
  double neighbor_alone_us = 0;  // --neighbor-us / -mb / -code: its time alone at this m (subtracted)
  // Producer-dequantizing tiles (0: not run), g128: pd_* (tiles 20-22).
  double g_pd_us[3] = {};
  int pd_splits[3] = {};
  template <int N>
  static int best(const double (&t)[N]) {
    int b = 0;
    for (int i = 1; i < N; ++i)
      if (t[i] > 0 && t[i] < t[b]) b = i;
    return b;
  }
};

int run(int argc, char** argv) {
  std::vector<int64_t> ms = {1, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192};
  std::string json_path, md_path, shape_filter;
  std::vector<Shape> shapes(std::begin(bench::kGemmLayers), std::end(bench::kGemmLayers));
  std::deque<std::string> custom_names;  // stable storage for the custom shapes' names
  bool custom = false;
  bool sweep = false, hot = false, pd = true, g128_s8_only = false;
  std::vector<int> sweep_tiles;  // empty: every tile
  std::vector<int> sweep_splits = {1, 2, 3, 4, 6, 8, 12, 16};
  double graph_us = 2000.0;
  double neighbor_us = 0;  // --neighbor-us
  double neighbor_mb = 0;  // --neighbor-mb
  bool neighbor_code = false;  // --neighbor-code
  bool predecessor = false;  // --predecessor
  int interleave = 0;      // --interleave
  double soak_ms = 0;      // --soak-ms
  bool timeline = false;   // --timeline
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::next_arg(argc, argv, i); };
    if (a == "--m") ms = bench::parse_list(next());
    else if (a == "--json") json_path = next();
    else if (a == "--md") md_path = next();
    else if (a == "--shapes") shape_filter = next();
    else if (a == "--shape") {
      const std::vector<int64_t> nk = bench::parse_list(next());
      if (nk.size() != 2 || nk[0] <= 0 || nk[1] <= 0 || nk[1] % 64 != 0)
        throw std::runtime_error("--shape wants N,K with K a multiple of 64");
      if (!custom) shapes.clear(), custom = true;
      custom_names.push_back(std::to_string(nk[0]) + "x" + std::to_string(nk[1]));
      shapes.push_back({"custom", custom_names.back().c_str(), nk[0], nk[1]});
    }
    else if (a == "--sweep") sweep = true;
    else if (a == "--sweep-splits") {  // numbers, or sk (stream-K)
      sweep_splits.clear();
      for (const std::string& v : bench::split_list(next()))
        sweep_splits.push_back(v == "sk" ? cuda::kW4A8StreamK : std::stoi(v));
    }
    else if (a == "--sweep-tiles") {
      sweep = true;
      for (const std::string& name : bench::split_list(next())) {
        int id = -1;
        for (int t = 0; t < cuda::kW4A8TileCount; ++t)
          if (name == cuda::w4a8_tile_name(t)) id = t;
        if (id < 0) {
          std::fprintf(stderr, "unknown tile %s\n", name.c_str());
          return 2;
        }
        sweep_tiles.push_back(id);
      }
    }
    else if (a == "--hot") hot = true;
    else if (a == "--no-pd") pd = false;
    else if (a == "--g128-s8-only") g128_s8_only = true;
    else if (a == "--graph-us") graph_us = std::stod(next());
    else if (a == "--neighbor-us") neighbor_us = std::stod(next());
    else if (a == "--neighbor-mb") neighbor_mb = std::stod(next());
    else if (a == "--neighbor-code") neighbor_code = true;
    else if (a == "--predecessor") predecessor = true;
    else if (a == "--interleave") interleave = std::stoi(next());
    else if (a == "--soak-ms") soak_ms = std::stod(next());
    else if (a == "--timeline") timeline = true;
    else if (a == "--host-paced") bench::queued_timing = false;
    else if (a == "--quick") ms = {1, 16, 64, 256, 1024, 4096};
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if ((neighbor_us > 0) + (neighbor_mb > 0) + neighbor_code + predecessor > 1) {
    std::fprintf(stderr, "--neighbor-us, --neighbor-mb, --neighbor-code and --predecessor exclude each other\n");
    return 2;
  }
  if (timeline && !cuda::w4a8_timeline_built()) {
    std::fprintf(stderr, "--timeline: this build's kernels do not record (configure with -DQSERVE_GEMM_TIMELINE=ON)\n");
    return 2;
  }
  if (cuda::device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  cuda::CudaContext ctx(0);
  cuda::CublasLtGemm blas(ctx);
  const cudaStream_t stream = ctx.stream();
  const auto& dev = ctx.info();
  const bool wgmma = cuda::w4a8_wgmma_supported(dev);  // the sm_90a family runs here
  std::printf("# %s, %d SMs, L2 %zu MB; weights %s\n", dev.name.c_str(), dev.sm_count, dev.l2_bytes >> 20,
              hot ? "hot (one copy)" : "rotated over copies larger than 2x L2");
  std::printf("# timing: %s\n", bench::queued_timing ? "queued (each replay queued behind a held GPU)"
                                                       : "host-paced (the start event on an idle GPU)");
  // The neighbor kernel (--neighbor-us): one block per SM holding 200 KB of
  // shared memory for neighbor_us, allowing its dependents to launch at once.
  // Its time alone is timed for each m of each layer (timer_for below).
  std::function<void()> neighbor;
  cuda::DeviceBuffer neighbor_buf;  // --neighbor-mb: what the cold neighbor reads (zeros)
  if (neighbor_mb > 0) {
    const size_t bytes = static_cast<size_t>(neighbor_mb * 1048576.0) / 16 * 16;
    neighbor_buf = cuda::DeviceBuffer(std::max<size_t>(bytes, 16));
    QS_CUDA_CHECK(cudaMemsetAsync(neighbor_buf.data(), 0, neighbor_buf.size(), stream));
    neighbor = [&, bytes] {
      bench::launch_neighbor_reader(stream, dev.sm_count, neighbor_buf.data(), bytes, 200 * 1024, true);
    };
    std::printf("# before every timed launch: a cold neighbor (%d blocks x 200 KB reading %.0f MiB; its time "
                "alone subtracted)\n",
                dev.sm_count, neighbor_mb);
  } else if (neighbor_code) {
    neighbor = [&] { bench::launch_neighbor_code(stream, dev.sm_count, 200 * 1024, true); };
    std::printf("# before every timed launch: a code neighbor (%d blocks x 200 KB running %d steps of straight-line "
                "code; its time alone subtracted)\n",
                dev.sm_count, bench::kNeighborCodeSteps);
  } else if (neighbor_us > 0) {
    neighbor = [&] { bench::launch_neighbor(stream, dev.sm_count, neighbor_us, 200 * 1024, true); };
    std::printf("# before every timed launch: a neighbor kernel (%d blocks x 200 KB, %.1f us; its time alone "
                "subtracted)\n",
                dev.sm_count, neighbor_us);
  }
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  std::vector<Row> rows;

  for (const Shape& sh : shapes) {
    const std::string full = std::string(sh.model) + "/" + sh.layer;
    // --shapes takes model/layer names ("llama3-8b/qkv") or layer names ("qkv").
    bool wanted = shape_filter.empty();
    for (const std::string& item : bench::split_list(shape_filter))
      wanted |= item == full || item == sh.layer;
    if (!wanted) continue;
    const int64_t n = sh.n, k = sh.k;
    // Rotating copies: the W4 weights of all copies span > 2x L2.
    const int copies = hot ? 1 : static_cast<int>(std::max<int64_t>(2, (2 * dev.l2_bytes) / (n * k / 2) + 1));
    // W4 weights: random canonical tensors (valid ranges), repacked once, copied.
    quant::W4G128Weights wg;
    wg.n = n, wg.k = k;
    wg.qweight.resize(n * k / 2);
    fill_random(wg.qweight, 1);
    wg.s1.assign(n, float_to_half(0.001f));
    wg.s2.resize(n * wg.groups());
    wg.zero.resize(n * wg.groups());
    fill_random(wg.s2, 2);
    fill_random(wg.zero, 3);
    for (auto& s : wg.s2) s = 1 + s % 16;
    for (auto& z : wg.zero) z = z % 16;
    quant::W4PerChannelWeights wp;
    wp.n = n, wp.k = k;
    wp.qweight = wg.qweight;
    wp.scale.assign(n, float_to_half(0.001f));
    wp.zero.assign(n, 8);
    std::vector<cuda::W4A8DeviceWeights> dg, dp;
    dg.push_back(cuda::upload_w4a8(wg));
    dp.push_back(cuda::upload_w4a8(wp));
    for (int c = 1; c < copies; ++c) {
      dg.push_back(cuda::upload_w4a8(wg));  // host repack again: simple, once per shape
      dp.push_back(cuda::upload_w4a8(wp));
    }
    std::vector<uint8_t> host(n * k);
    fill_random(host, 4);
    std::vector<cuda::DeviceBuffer> w8, w16;
    for (int c = 0; c < copies; ++c) {
      w8.emplace_back(n * k);
      w8.back().upload(host);
      w16.emplace_back(n * k * 2);
    }
    std::vector<uint16_t> h16(n * k);
    for (int64_t i = 0; i < n * k; ++i) h16[i] = float_to_half((static_cast<int>(host[i]) - 128) / 4096.0f);
    for (auto& b : w16) b.upload(h16);
    // Activations and outputs for the largest m.
    std::vector<uint8_t> xh(max_m * k);
    fill_random(xh, 5);
    for (auto& v : xh) v = static_cast<uint8_t>(static_cast<int8_t>(v % 255 - 127));
    cuda::DeviceBuffer x8(max_m * k), x16(max_m * k * 2), sx(max_m * 2), asum(max_m * 2), xsum(max_m * 4);
    x8.upload(xh);
    std::vector<uint16_t> x16h(max_m * k);
    for (int64_t i = 0; i < max_m * k; ++i) x16h[i] = float_to_half(static_cast<int8_t>(xh[i]) / 127.0f);
    x16.upload(x16h);
    std::vector<uint16_t> ones(max_m, float_to_half(0.01f));
    sx.upload(ones);
    asum.upload(ones);
    std::vector<int32_t> xsumh(max_m);  // the rows' code sums (g128)
    for (int64_t t = 0; t < max_m; ++t)
      for (int64_t i = 0; i < k; ++i) xsumh[t] += static_cast<int8_t>(xh[t * k + i]);
    xsum.upload(xsumh);
    cuda::DeviceBuffer y16(max_m * n * 2), y32(max_m * n * 4);
    // --predecessor: the kernel that writes x8 / sx / asum / xsum in the model,
    // from fp16 inputs [m, 2 k] (gate | up rows; the first k also the norm's
    // and the quantization's input) and gamma [k].
    const bool is_down = std::string(sh.layer) == "down", is_o = std::string(sh.layer) == "o";
    const char* predecessor_name = is_down ? "silu_mul_quant" : is_o ? "quantize_int8" : "rmsnorm_quant";
    cuda::DeviceBuffer pin, pgamma;
    if (predecessor) {
      pin = cuda::DeviceBuffer(max_m * 2 * k * 2);
      std::vector<uint16_t> h(max_m * 2 * k);
      for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_half(static_cast<int8_t>(xh[i % xh.size()]) / 64.0f);
      pin.upload(h);
      pgamma = cuda::DeviceBuffer(k * 2);
      pgamma.upload(std::vector<uint16_t>(k, float_to_half(1.0f)));
    }
    auto run_predecessor = [&](int64_t m) {
      const Int8Rows rows_out{x8.as<int8_t>(), sx.as<uint16_t>(), asum.as<uint16_t>(), xsum.as<int32_t>()};
      const uint16_t* in = pin.as<uint16_t>();
      cudaError_t e;
      if (is_down)
        e = cuda::silu_mul_quant(in, in + k, 2 * k, static_cast<int>(m), static_cast<int>(k), rows_out, stream);
      else if (is_o)
        e = cuda::quantize_int8(in, static_cast<int>(m), static_cast<int>(k), rows_out, stream);
      else
        e = cuda::rmsnorm_quant(in, nullptr, pgamma.as<uint16_t>(), static_cast<int>(m),
                                static_cast<int>(k), 1e-5f, rows_out, stream);
      QS_CUDA_CHECK(e);
    };
    // The timer of one m: what runs before every timed launch (the
    // process's neighbor, or this layer's predecessor at m) and its time
    // alone, timed once per m of each layer at the m's first timer (a
    // neighbor's time timed once per process would carry the board's clock
    // drift over a run into every result; round 48's --neighbor-code passes
    // moved a tenth of the rows by more than 5.7% between two passes of one build).
    std::map<int64_t, double> alone_us;
    auto timer_for = [&](int64_t m) {
      std::function<void()> before = neighbor;
      if (predecessor) before = [&run_predecessor, m] { run_predecessor(m); };
      if (!before) return Timer{stream, hot, graph_us, nullptr, 0};
      if (!alone_us.count(m))
        alone_us[m] = Timer{stream, true, graph_us, nullptr, 0}.chain(1, [&](int) { before(); });
      return Timer{stream, hot, graph_us, before, alone_us[m]};
    };

    // cuBLASLt at its best: for every m of the shape first, each heuristic
    // candidate timed as our kernels are (cold weights, graph of
    // back-to-back launches) and the fastest selected. The library's own
    // tuning (hot weights, a few event-timed calls) picked different
    // candidates in different processes at small m (Llama-3-8B o at m = 1:
    // 8.3 to 10.9 us between runs). Then a pause, so that the rows below are
    // timed as without the selection: run right before our kernels, its heat
    // made them 10-30% slower at m >= 256 (power limit), not cuBLASLt.
    {
      for (int64_t m : ms) {
        const Timer timer = timer_for(m);
        auto select_fastest = [&](bool int8, const std::function<void(int)>& fn) {
          fn(0);  // tunes the shape (the library's choice)
          double best = 1e30;
          int best_i = blas.chosen_candidate(int8, m, n, k);
          for (int i = 0; i < blas.candidate_count(int8, m, n, k); ++i) {
            blas.select_candidate(int8, m, n, k, i);
            const double t = timer.time(copies, fn);
            if (t < best) best = t, best_i = i;
          }
          blas.select_candidate(int8, m, n, k, best_i);
        };
        select_fastest(true, [&](int c) {
          blas.gemm_s8(x8.as<int8_t>(), w8[c].as<int8_t>(), y32.as<int32_t>(), m, n, k, stream);
        });
        select_fastest(false, [&](int c) {
          blas.gemm_f16(x16.as<__half>(), w16[c].as<__half>(), y16.as<__half>(), m, n, k, stream);
        });
      }
      QS_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    for (int64_t m : ms) {
      Row r{sh.model, sh.layer, m, n, k};
      const Timer timer = timer_for(m);
      if (neighbor) r.neighbor_alone_us = timer.neighbor_us;
      if (predecessor) {
        r.predecessor_us = timer.neighbor_us;
        std::printf("# %s/%s m=%lld: before every timed launch %s [%lld, %lld], %.2f us alone (subtracted)\n",
                    sh.model, sh.layer, static_cast<long long>(m), predecessor_name, static_cast<long long>(m),
                    static_cast<long long>(k), r.predecessor_us);
      }
      r.int8_us = timer.time(copies, [&](int c) {
        blas.gemm_s8(x8.as<int8_t>(), w8[c].as<int8_t>(), y32.as<int32_t>(), m, n, k, stream);
      });
      r.fp16_us = timer.time(copies, [&](int c) {
        blas.gemm_f16(x16.as<__half>(), w16[c].as<__half>(), y16.as<__half>(), m, n, k, stream);
      });
      r.int8_candidate = blas.chosen_candidate(true, m, n, k), r.int8_candidates = blas.candidate_count(true, m, n, k);
      r.fp16_candidate = blas.chosen_candidate(false, m, n, k), r.fp16_candidates = blas.candidate_count(false, m, n, k);
      // family: 0 = the top-level planner, 1 = mma.sync only, 2 = wgmma only.
      // no_pdl: launch without programmatic dependent launch (each launch then
      // waits for the previous one to finish, as cuBLASLt's do).
      auto time_w4 = [&](std::vector<cuda::W4A8DeviceWeights>& dw, int tile, int splits, cuda::W4A8Plan* out,
                         int family = 0, bool no_pdl = false, const char* soak_label = nullptr) {
        const bool g = dw[0].kind == cuda::W4A8Kind::kG128;
        cuda::W4A8Plan plan =
            family == 1   ? cuda::plan_w4a8_mma(dev, m, n, k, tile, splits, g)
            : family == 2 ? cuda::plan_w4a8_wgmma(dev, m, n, k, tile, splits, g)
                          : cuda::plan_w4a8(dev, dw[0], m, tile, splits);
        if (no_pdl) plan.pdl = false;
        cuda::DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes, 4));
        QS_CUDA_CHECK(cudaMemsetAsync(ws.data(), 0, ws.size(), stream));
        cuda::W4A8Args args;
        args.x = x8.as<int8_t>();
        args.s_x = sx.as<__half>();
        args.a_sum = asum.as<__half>();
        args.x_sum = xsum.as<int32_t>();
        args.m = m;
        args.y = y16.as<__half>();
        if (out) *out = plan;
        const auto launch = [&](int c) { cuda::gemm_w4a8(dw[c], args, plan, ws.data(), stream); };
        if (soak_label) return timer.soak(copies, launch, soak_ms, soak_label).last_us;
        return timer.time(copies, launch);
      };
      cuda::W4A8Plan pp, pg, ppw, pgw;
      r.pc_us = time_w4(dp, -1, 0, &pp, 1);
      r.g128_us = time_w4(dg, -1, 0, &pg, 1);
      r.pc_tile = pp.tile, r.pc_splits = pp.splits, r.g_tile = pg.tile, r.g_splits = pg.splits;
      if (wgmma) {
        r.pc_wg_us = time_w4(dp, -1, 0, &ppw, 2);
        r.g_wg_us = time_w4(dg, -1, 0, &pgw, 2);
        r.pcw_tile = ppw.tile, r.pcw_splits = ppw.splits, r.gw_tile = pgw.tile, r.gw_splits = pgw.splits;
        r.pc_auto_wg = cuda::w4a8_tile_is_wgmma(cuda::plan_w4a8(dev, dp[0], m).tile);
        r.g_auto_wg = cuda::w4a8_tile_is_wgmma(cuda::plan_w4a8(dev, dg[0], m).tile);
      }
      // The top-level plan: one of the two family plans above, or (a measured
      // plan of the other family's tiles) a third one, timed here.
      auto shipped = [&](std::vector<cuda::W4A8DeviceWeights>& dw, const cuda::W4A8Plan& fam_mma, double mma_us,
                         const cuda::W4A8Plan& fam_wg, double wg_us, int& tile, int& splits) {
        const cuda::W4A8Plan s = cuda::plan_w4a8(dev, dw[0], m);
        tile = s.tile, splits = s.splits;
        if (s.tile == fam_mma.tile && s.splits == fam_mma.splits) return mma_us;
        if (wgmma && s.tile == fam_wg.tile && s.splits == fam_wg.splits) return wg_us;
        return time_w4(dw, s.tile, s.splits, nullptr);
      };
      r.pc_ship_us = shipped(dp, pp, r.pc_us, ppw, r.pc_wg_us, r.pcs_tile, r.pcs_splits);
      r.g_ship_us = shipped(dg, pg, r.g128_us, pgw, r.g_wg_us, r.gs_tile, r.gs_splits);
      if (cuda::pdl_enabled(dev)) {
        r.pc_ship_nopdl_us = time_w4(dp, r.pcs_tile, r.pcs_splits, nullptr, 0, true);
        r.g_ship_nopdl_us = time_w4(dg, r.gs_tile, r.gs_splits, nullptr, 0, true);
        std::printf("%-9s %-7s m=%-5lld   shipped: pc %8.1f us (no PDL %8.1f) x%.2f int8 | g128 %8.1f us (no PDL %8.1f) "
                    "x%.2f int8\n",
                    sh.model, sh.layer, static_cast<long long>(m), r.pc_ship_us, r.pc_ship_nopdl_us,
                    r.int8_us / r.pc_ship_us, r.g_ship_us, r.g_ship_nopdl_us, r.int8_us / r.g_ship_us);
      }
      if (timeline) {
        // The shipped W4 wgmma plans once more, recording (the last launch's record).
        for (const bool g : {false, true}) {
          const int tile = g ? r.gs_tile : r.pcs_tile, splits = g ? r.gs_splits : r.pcs_splits;
          const char* kind = g ? "g128" : "pc";
          if (!cuda::w4a8_tile_is_wgmma(tile) || cuda::w4a8_tile_is_gemv(tile)) {
            std::printf("# timeline %s/%s m=%lld %s %s: not a W4 wgmma plan\n", sh.model, sh.layer,
                        static_cast<long long>(m), kind, cuda::w4a8_plan_name(tile, splits).c_str());
            continue;
          }
          cuda::W4A8Plan plan;
          cuda::set_w4a8_timeline(true, stream);
          const double us = time_w4(g ? dg : dp, tile, splits, &plan);
          cuda::set_w4a8_timeline(false, stream);
          std::printf("# timeline %s/%s m=%lld %s %s (%d CTAs, %.2f us a launch):\n%s", sh.model, sh.layer,
                      static_cast<long long>(m), kind, cuda::w4a8_plan_name(tile, splits).c_str(), plan.ctas, us,
                      cuda::summarize_w4a8_timeline(cuda::read_w4a8_timeline(stream), plan.ctas).c_str());
        }
      }
      if (interleave > 0) {
        // Each timing above ran once, in its place in the row (cuBLASLt
        // first); here the baseline and the shipped plans take turns, so that
        // neither sits in a better place of the board's power and clock state.
        // The order rotates by one each round (int8 pc g128, pc g128 int8,
        // g128 int8 pc, ...): at large m a timing right after another long
        // GEMM inherits the power limiter's state, and a fixed order put our
        // per-channel plan after cuBLASLt every round (round 24 of
        // bench/results/2026-12-03-gemm-h200-r24.md). N a multiple of 3 gives
        // each kernel each place equally often.
        std::vector<double> i8, pc, g;
        for (int rep = 0; rep < interleave; ++rep) {
          for (int slot = 0; slot < 3; ++slot) {
            switch ((rep + slot) % 3) {
              case 0:
                i8.push_back(timer.time(copies, [&](int c) {
                  blas.gemm_s8(x8.as<int8_t>(), w8[c].as<int8_t>(), y32.as<int32_t>(), m, n, k, stream);
                }));
                break;
              case 1:
                pc.push_back(time_w4(dp, r.pcs_tile, r.pcs_splits, nullptr));
                break;
              default:
                g.push_back(time_w4(dg, r.gs_tile, r.gs_splits, nullptr));
            }
          }
        }
        r.int8_il_us = Timer::median(i8), r.pc_il_us = Timer::median(pc), r.g_il_us = Timer::median(g);
        std::printf("%-9s %-7s m=%-5lld   interleaved x%d: int8 %8.1f us | pc %8.1f us x%.2f int8 | g128 %8.1f us "
                    "x%.2f int8\n",
                    sh.model, sh.layer, static_cast<long long>(m), interleave, r.int8_il_us, r.pc_il_us,
                    r.int8_il_us / r.pc_il_us, r.g_il_us, r.int8_il_us / r.g_il_us);
      }
      if (soak_ms > 0) {
        // --soak-ms MS: cuBLASLt INT8 and the two shipped plans, each alone
        // for MS after 2 s idle, to be matched with power and clock samples
        // (nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm -lms 100):
        // what each sustains under the board's power limit.
        std::printf("%-9s %-7s m=%-5lld   soak (%.0f ms each, after 2 s idle):\n", sh.model, sh.layer,
                    static_cast<long long>(m), soak_ms);
        const auto idle = [] { std::this_thread::sleep_for(std::chrono::seconds(2)); };
        idle();
        r.int8_soak_us = timer.soak(copies, [&](int c) {
          blas.gemm_s8(x8.as<int8_t>(), w8[c].as<int8_t>(), y32.as<int32_t>(), m, n, k, stream);
        }, soak_ms, "int8").last_us;
        idle();
        r.pc_soak_us = time_w4(dp, r.pcs_tile, r.pcs_splits, nullptr, 0, false, "pc");
        idle();
        r.g_soak_us = time_w4(dg, r.gs_tile, r.gs_splits, nullptr, 0, false, "g128");
      }
      if (wgmma && cuda::s8_wgmma_supported(dev, k)) {
        cuda::DeviceBuffer w8s(static_cast<size_t>(n) * k), sw(n * 4);
        std::vector<float> swh(n, 0.001f);
        sw.upload(swh);
        for (int i = 0; i < 4; ++i) {
          const int tile = cuda::kW4A8FirstS8Tile + i;
          cuda::W4A8Plan pl;
          r.g_s8_us[i] = time_w4(dg, tile, 0, &pl, 2);
          r.s8_splits[i] = pl.splits;
          if (g128_s8_only) continue;
          r.pc_s8_us[i] = time_w4(dp, tile, 0, nullptr, 2);
          const cuda::W4A8Plan p8 = cuda::plan_s8(dev, m, n, k, tile, pl.splits);
          cuda::DeviceBuffer ws(std::max<size_t>(p8.workspace_bytes, 4));
          QS_CUDA_CHECK(cudaMemsetAsync(ws.data(), 0, ws.size(), stream));
          cuda::W4A8Args args;
          args.x = x8.as<int8_t>();
          args.s_x = sx.as<__half>();
          args.m = m;
          args.y = y16.as<__half>();
          r.w8_s8_us[i] = timer.time(copies, [&](int c) {
            cuda::gemm_s8_w8a8(w8[c].as<int8_t>(), sw.as<float>(), n, k, args, p8, ws.data(), stream);
          });
        }
        for (int i = 0; i < 3 && pd; ++i) {
          cuda::W4A8Plan pl;
          r.g_pd_us[i] = time_w4(dg, cuda::kW4A8FirstPdTile + i, 0, &pl, 2);
          r.pd_splits[i] = pl.splits;
        }
        r.g_pass_us = timer.time(copies, [&](int c) { cuda::dequantize_w4a8(dg[c], w8s.as<int8_t>(), stream); });
        if (!g128_s8_only) r.pc_pass_us = timer.time(copies, [&](int c) { cuda::dequantize_w4a8(dp[c], w8s.as<int8_t>(), stream); });
        if (!g128_s8_only)
          r.w8a8_lt_us = timer.time(copies, [&](int c) {
            cuda::gemm_w8a8(blas, x8.as<int8_t>(), sx.as<__half>(), w8[c].as<int8_t>(), sw.as<float>(),
                            y32.as<int32_t>(), y16.as<__half>(), m, n, k, stream);
          });
        const int bg = Row::best(r.g_s8_us), bp = Row::best(r.pc_s8_us), bw = Row::best(r.w8_s8_us);
        std::printf(
            "%-9s %-7s m=%-5lld   s8: g128 %8.1f us x%.2f int8 [%s] (pass %.1f us, %.0f%%; tiles %.1f %.1f "
            "%.1f %.1f) | pc %8.1f us x%.2f int8 [%s] | w8a8 %8.1f us x%.2f int8, x%.2f lt+epi (%.1f us) [%s]\n",
            sh.model, sh.layer, static_cast<long long>(m), r.g_s8_us[bg], r.int8_us / r.g_s8_us[bg],
            cuda::w4a8_plan_name(cuda::kW4A8FirstS8Tile + bg, r.s8_splits[bg]).c_str(), r.g_pass_us,
            100.0 * r.g_pass_us / r.g_s8_us[bg], r.g_s8_us[0], r.g_s8_us[1], r.g_s8_us[2], r.g_s8_us[3], r.pc_s8_us[bp],
            r.int8_us / r.pc_s8_us[bp], cuda::w4a8_plan_name(cuda::kW4A8FirstS8Tile + bp, r.s8_splits[bp]).c_str(),
            r.w8_s8_us[bw], r.int8_us / r.w8_s8_us[bw], r.w8a8_lt_us / r.w8_s8_us[bw], r.w8a8_lt_us,
            cuda::w4a8_plan_name(cuda::kW4A8FirstS8Tile + bw, r.s8_splits[bw]).c_str());
        const int bd = Row::best(r.g_pd_us);
        if (pd)
          std::printf("%-9s %-7s m=%-5lld   pd: g128 %8.1f us x%.2f int8 [%s] (tiles %.1f %.1f %.1f) x%.2f s8+pass\n",
                      sh.model, sh.layer, static_cast<long long>(m), r.g_pd_us[bd], r.int8_us / r.g_pd_us[bd],
                      cuda::w4a8_plan_name(cuda::kW4A8FirstPdTile + bd, r.pd_splits[bd]).c_str(), r.g_pd_us[0],
                      r.g_pd_us[1], r.g_pd_us[2], r.g_s8_us[bg] / r.g_pd_us[bd]);
      }
      const double xy = static_cast<double>(m) * k + static_cast<double>(m) * n * 2;
      r.pc_bytes = dp[0].weight_bytes() + xy;
      r.g_bytes = dg[0].weight_bytes() + xy;
      r.int8_bytes = static_cast<double>(n) * k + m * k + static_cast<double>(m) * n * 4;
      r.fp16_bytes = 2.0 * n * k + 2.0 * m * k + 2.0 * m * n;
      const double ops = 2.0 * m * n * k;
      std::printf(
          "%-9s %-7s m=%-5lld int8 %8.1f us %6.0f TOPS | fp16 %8.1f | pc %8.1f us %6.0f TOPS %5.0f GB/s x%.2f int8 "
          "x%.2f fp16 [%s] | g128 %8.1f us %6.0f TOPS x%.2f int8 x%.2f fp16 [%s]\n",
          sh.model, sh.layer, static_cast<long long>(m), r.int8_us, ops / r.int8_us * 1e-6, r.fp16_us, r.pc_us,
          ops / r.pc_us * 1e-6, r.pc_bytes / r.pc_us * 1e-3, r.int8_us / r.pc_us, r.fp16_us / r.pc_us,
          cuda::w4a8_plan_name(pp.tile, pp.splits).c_str(), r.g128_us, ops / r.g128_us * 1e-6, r.int8_us / r.g128_us,
          r.fp16_us / r.g128_us, cuda::w4a8_plan_name(pg.tile, pg.splits).c_str());
      if (wgmma)
        std::printf(
            "%-9s %-7s m=%-5lld   wgmma: pc %8.1f us %6.0f TOPS x%.2f int8 x%.2f fp16 x%.2f mma [%s] | g128 "
            "%8.1f us %6.0f TOPS x%.2f int8 x%.2f fp16 x%.2f mma [%s]\n",
            sh.model, sh.layer, static_cast<long long>(m), r.pc_wg_us, ops / r.pc_wg_us * 1e-6, r.int8_us / r.pc_wg_us,
            r.fp16_us / r.pc_wg_us, r.pc_us / r.pc_wg_us, cuda::w4a8_plan_name(ppw.tile, ppw.splits).c_str(), r.g_wg_us,
            ops / r.g_wg_us * 1e-6, r.int8_us / r.g_wg_us, r.fp16_us / r.g_wg_us, r.g128_us / r.g_wg_us,
            cuda::w4a8_plan_name(pgw.tile, pgw.splits).c_str());
      std::fflush(stdout);
      if (sweep) {
        // Every tile x split-K for both kinds: what the planner should pick.
        for (int kind = 0; kind < 2; ++kind) {
          double best = 1e30;
          int bt = -1, bs = 0;
          std::string line;
          for (int tile = 0; tile < cuda::kW4A8TileCount; ++tile)
            for (const int splits : sweep_splits) {
              const bool wg = cuda::w4a8_tile_is_wgmma(tile);
              if (!cuda::w4a8_tile_supported(dev, tile) || (!wg && splits % 3 == 0)) continue;
              if (!sweep_tiles.empty() && std::find(sweep_tiles.begin(), sweep_tiles.end(), tile) == sweep_tiles.end())
                continue;
              if (cuda::w4a8_tile_is_cluster(tile) && splits > cuda::kW4A8MaxClusterSplits) continue;
              if (splits == cuda::kW4A8StreamK && !cuda::w4a8_tile_has_stream_k(tile)) continue;
              if (cuda::w4a8_tile_is_gemv(tile) && (splits != 1 || m > cuda::w4a8_tile_tokens(tile) ||
                                                     !cuda::w4a8_gemv_fits(dev, tile, k, kind == 1)))
                continue;
              if (!wg && m > 256 && wgmma) continue;                 // 1.6-3.3x slower than the wgmma tiles there
              if (splits > std::max<int64_t>(1, k / 256)) continue;  // >= 256 of k per split
              const double t = time_w4(kind ? dg : dp, tile, splits, nullptr);
              char buf[64];
              std::snprintf(buf, sizeof buf, " %s:%.1f", cuda::w4a8_plan_name(tile, splits).c_str(), t);
              line += buf;
              if (t < best) best = t, bt = tile, bs = splits;
            }
          std::printf("  sweep %s/%s n=%lld k=%lld %s m=%lld best %s %.1f us (planner %.1f)%s\n", sh.model,
                      sh.layer, static_cast<long long>(n), static_cast<long long>(k), kind ? "g128" : "pc",
                      static_cast<long long>(m), cuda::w4a8_plan_name(bt, bs).c_str(), best, kind ? r.g128_us : r.pc_us,
                      line.c_str());
          std::fflush(stdout);
        }
      }
      rows.push_back(r);
    }
  }

  // Markdown table and JSON.
  std::ostringstream md;
  // Per kind: the mma.sync kernel (sm_80 design), the wgmma kernel (sm_90a)
  // with its TOPS and ratios, and the planner's pick ("wg" / "mma").
  // "shipped": the top-level plan, what the engine runs, with its ratios.
  md << "| model | layer (n x k) | m | cuBLASLt INT8 us | cuBLASLt FP16 us | per-chn mma.sync us | per-chn wgmma us | "
        "TOPS | vs INT8 | vs FP16 | per-chn shipped us [plan] | vs INT8 | vs FP16 | g128 mma.sync us | g128 wgmma us | "
        "TOPS | vs INT8 | vs FP16 | g128 shipped us [plan] | vs INT8 | vs FP16 | per-chn shipped no PDL us | vs INT8 | "
        "g128 shipped no PDL us | vs INT8 | g128 s8+pass us [tile/split] | vs INT8 | pass us | per-chn s8+pass us | vs INT8 "
        "| w8a8 s8 us | vs INT8 | cuBLASLt+epi us | g128 pd us [tile/split] | vs INT8 | pd tiles us |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        "---|---|---|---|---|---|---|---|---|---|---|\n";
  std::ostringstream js;
  js << "[\n";
  char buf[4096];
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double ops = 2.0 * r.m * r.n * r.k;
    const double pcw = r.pc_wg_us > 0 ? r.pc_wg_us : r.pc_us, gw = r.g_wg_us > 0 ? r.g_wg_us : r.g128_us;
    std::snprintf(
        buf, sizeof buf,
        "| %s | %s (%lldx%lld) | %lld | %.1f | %.1f | %.1f | %.1f | %.0f | %.2fx | %.2fx | %.1f [%s] | %.2fx | "
        "%.2fx | %.1f | %.1f | %.0f | %.2fx | %.2fx | %.1f [%s] | %.2fx | %.2fx | %.1f | %.2fx | %.1f | %.2fx |\n",
        r.model.c_str(), r.layer.c_str(), (long long)r.n, (long long)r.k, (long long)r.m, r.int8_us, r.fp16_us, r.pc_us,
        r.pc_wg_us, ops / pcw * 1e-6, r.int8_us / pcw, r.fp16_us / pcw, r.pc_ship_us,
        cuda::w4a8_plan_name(r.pcs_tile, r.pcs_splits).c_str(), r.int8_us / r.pc_ship_us, r.fp16_us / r.pc_ship_us,
        r.g128_us, r.g_wg_us, ops / gw * 1e-6, r.int8_us / gw, r.fp16_us / gw, r.g_ship_us,
        cuda::w4a8_plan_name(r.gs_tile, r.gs_splits).c_str(), r.int8_us / r.g_ship_us, r.fp16_us / r.g_ship_us,
        r.pc_ship_nopdl_us, r.pc_ship_nopdl_us > 0 ? r.int8_us / r.pc_ship_nopdl_us : 0.0, r.g_ship_nopdl_us,
        r.g_ship_nopdl_us > 0 ? r.int8_us / r.g_ship_nopdl_us : 0.0);
    md << std::string(buf, std::strlen(buf) - 1);  // without the newline: the s8 columns follow
    const int bg = Row::best(r.g_s8_us), bp = Row::best(r.pc_s8_us), bw = Row::best(r.w8_s8_us);
    auto ratio = [&](double t) { return t > 0 ? r.int8_us / t : 0.0; };
    const int bd = Row::best(r.g_pd_us);
    std::snprintf(buf, sizeof buf,
                  " %.1f [%s] | %.2fx | %.1f | %.1f | %.2fx | %.1f | %.2fx | %.1f | %.1f [%s] | %.2fx | %.1f / %.1f / "
                  "%.1f |\n",
                  r.g_s8_us[bg], cuda::w4a8_plan_name(cuda::kW4A8FirstS8Tile + bg, r.s8_splits[bg]).c_str(),
                  ratio(r.g_s8_us[bg]), r.g_pass_us, r.pc_s8_us[bp], ratio(r.pc_s8_us[bp]), r.w8_s8_us[bw],
                  ratio(r.w8_s8_us[bw]), r.w8a8_lt_us, r.g_pd_us[bd],
                  cuda::w4a8_plan_name(cuda::kW4A8FirstPdTile + bd, r.pd_splits[bd]).c_str(), ratio(r.g_pd_us[bd]),
                  r.g_pd_us[0], r.g_pd_us[1], r.g_pd_us[2]);
    md << buf;
    std::snprintf(
        buf, sizeof buf,
        "  {\"model\": \"%s\", \"layer\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"cublaslt_int8_us\": "
        "%.2f, \"cublaslt_fp16_us\": %.2f, \"w4a8_per_channel_us\": %.2f, \"w4a8_g128_us\": %.2f, "
        "\"per_channel_plan\": \"%s\", \"g128_plan\": \"%s\", \"wgmma_per_channel_us\": %.2f, "
        "\"wgmma_g128_us\": %.2f, \"wgmma_per_channel_plan\": \"%s\", \"wgmma_g128_plan\": \"%s\", "
        "\"planner_per_channel\": \"%s\", \"planner_g128\": \"%s\", \"shipped_per_channel_us\": %.2f, "
        "\"shipped_per_channel_plan\": \"%s\", \"shipped_g128_us\": %.2f, \"shipped_g128_plan\": \"%s\", "
        "\"shipped_per_channel_no_pdl_us\": %.2f, \"shipped_g128_no_pdl_us\": %.2f, "
        "\"s8_splits\": [%d, %d, %d, %d], \"s8_g128_us\": [%.2f, %.2f, %.2f, %.2f], "
        "\"s8_per_channel_us\": [%.2f, %.2f, %.2f, %.2f], \"s8_w8a8_us\": [%.2f, %.2f, %.2f, %.2f], "
        "\"pass_g128_us\": %.2f, \"pass_per_channel_us\": %.2f, \"cublaslt_w8a8_epilogue_us\": %.2f, "
        "\"pd_splits\": [%d, %d, %d], \"pd_g128_us\": [%.2f, %.2f, %.2f], "
        "\"cublaslt_int8_candidate\": \"%d of %d\", \"cublaslt_fp16_candidate\": \"%d of %d\", "
        "\"neighbor_us\": %.1f, \"neighbor_mb\": %.0f, \"neighbor_code\": %d, \"neighbor_alone_us\": %.2f, \"predecessor_us\": %.2f, \"interleaved_reps\": %d, \"interleaved_int8_us\": %.2f, "
        "\"interleaved_per_channel_us\": %.2f, \"interleaved_g128_us\": %.2f, \"soak_ms\": %.0f, "
        "\"soak_int8_us\": %.2f, \"soak_per_channel_us\": %.2f, \"soak_g128_us\": %.2f}%s\n",
        r.model.c_str(), r.layer.c_str(), (long long)r.m, (long long)r.n, (long long)r.k, r.int8_us, r.fp16_us, r.pc_us,
        r.g128_us, cuda::w4a8_plan_name(r.pc_tile, r.pc_splits).c_str(),
        cuda::w4a8_plan_name(r.g_tile, r.g_splits).c_str(), r.pc_wg_us, r.g_wg_us,
        cuda::w4a8_plan_name(r.pcw_tile, r.pcw_splits).c_str(), cuda::w4a8_plan_name(r.gw_tile, r.gw_splits).c_str(),
        r.pc_auto_wg ? "wgmma" : "mma", r.g_auto_wg ? "wgmma" : "mma", r.pc_ship_us,
        cuda::w4a8_plan_name(r.pcs_tile, r.pcs_splits).c_str(), r.g_ship_us,
        cuda::w4a8_plan_name(r.gs_tile, r.gs_splits).c_str(), r.pc_ship_nopdl_us, r.g_ship_nopdl_us, r.s8_splits[0],
        r.s8_splits[1], r.s8_splits[2], r.s8_splits[3], r.g_s8_us[0], r.g_s8_us[1], r.g_s8_us[2], r.g_s8_us[3],
        r.pc_s8_us[0], r.pc_s8_us[1], r.pc_s8_us[2], r.pc_s8_us[3], r.w8_s8_us[0], r.w8_s8_us[1], r.w8_s8_us[2],
        r.w8_s8_us[3], r.g_pass_us, r.pc_pass_us, r.w8a8_lt_us, r.pd_splits[0], r.pd_splits[1], r.pd_splits[2],
        r.g_pd_us[0], r.g_pd_us[1], r.g_pd_us[2], r.int8_candidate, r.int8_candidates, r.fp16_candidate,
        r.fp16_candidates, neighbor_us, neighbor_mb, neighbor_code ? 1 : 0, r.neighbor_alone_us, r.predecessor_us, interleave, r.int8_il_us, r.pc_il_us, r.g_il_us, soak_ms, r.int8_soak_us,
        r.pc_soak_us, r.g_soak_us, i + 1 < rows.size() ? "," : "");
    js << buf;
  }
  js << "]\n";
  std::printf("\n%s", md.str().c_str());
  if (!md_path.empty()) std::ofstream(md_path) << md.str();
  if (!json_path.empty()) std::ofstream(json_path) << js.str();
  return 0;
}

}  // namespace
}  // namespace qserve

int main(int argc, char** argv) { return qserve::run(argc, argv); }
