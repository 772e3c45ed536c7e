// W4A8 GEMM sequences: the time of a decoder layer's GEMMs in the order the
// engine runs them, not of one GEMM after itself. A chain names its layers
// and each one's plan; its launches go back to back under programmatic
// dependent launch (as the engine's), each layer after the kernel that writes
// its activations in the model (--predecessors), the weights rotated over
// copies larger than 2x L2, in a CUDA graph of L repetitions of the chain.
// Several chains (--chain, repeatable) are timed in turn over rounds (the
// order rotated each round), and each layer of each chain alone as
// bench_gemm times it (back to back with itself), so that what a plan costs
// its neighbours shows: the chain's time against the sum of its layers'.
// Round 52 found one layer on a cluster plan of another size than its
// neighbours' costing Llama-3.2-1B's decode step 8-10%, more than the layer's
// own time, which a layer timed after itself cannot show.
//
//   bench_gemm_chain --m 64 [--kind pc|g128] [--predecessors] [--no-pdl] [--rounds 8] [--graph-us 2000]
//                    [--timeline] [--attention HQ,HKV,D,CTX]
//                    --chain NAME=LAYER:NxK:PLAN,... [--chain ...] [--json FILE]
//
// LAYER: qkv, o, gate_up, down or any other word; with --predecessors, qkv
// and gate_up follow rmsnorm_quant, o quantize_int8, down silu_mul_quant
// (kernels/fused_ops.h), any other layer nothing. PLAN: TILE/SPLITS as in
// QSERVE_W4A8_PLANS (w4a8_plan: "wg64x64c-k256/2"), or "auto" (the
// planner's choice at m). QSERVE_PDL and the W4A8 switches of the environment
// apply as in the engine.
//
// Llama-3.2-1B's layer at 64 tokens, down in clusters of two (C) or three (D), one command:
//   bench_gemm_chain --m 64 --predecessors
//     --chain C=qkv:3072x2048:wg64x64c-k256/2,o:2048x2048:wg64x64c-k256/2,gate_up:16384x2048:auto,down:2048x8192:wg64x64c-k256/2
//     --chain D=qkv:3072x2048:wg64x64c-k256/2,o:2048x2048:wg64x64c-k256/2,gate_up:16384x2048:auto,down:2048x8192:wg64x64c-k256/3
//
// --attention HQ,HKV,D,CTX: between the qkv and o layers, the engine's
// attention block at decode, each of the m tokens a sequence of CTX tokens
// in a paged KV4 cache (pages of 16): rope_kv_write (RoPE, rotate-half, on
// qkv's output; K and V quantized into the cache) and decode_attention
// (split and merged as its planner decides, o's INT8 input written by it, so
// o has no other predecessor). The chain's qkv layer must have n = (HQ + 2
// HKV) D and its o layer k = HQ D. The caches rotate over sets larger than
// 2x L2, with the weights' copies.
//
// --timeline (a build configured with -DQSERVE_GEMM_TIMELINE=ON): after the
// timings, each chain once more as a graph of one pass, replayed a few times,
// its W4 wgmma launches recording their CTAs' phases each into a slot of its
// own (gemm_w4a8_timeline.h); printed per layer from the last replay, on one
// clock from the chain's first entry: its CTAs' first, median and last entry,
// their median and last end, the gap from the previous layer's last end to
// this one's first entry (negative: they overlapped under PDL), the SMs, and
// the launch's phase summary (summarize_w4a8_timeline).
//
// Output: per chain, its plans, the median microseconds per chain over the
// rounds (and the rounds' range), the sum of its layers alone and the
// difference; per layer, its time alone. JSON (--json): one object per chain.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/attention/decode_attention.h"
#include "backend/cuda/attention/rope_kv_write.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"
#include "backend/cuda/gemm_w4a8_timeline.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "core/half.h"
#include "quant/weight_format.h"
#include "../bench_args.h"
#include "gpu_hold.h"

namespace qserve {
namespace {

struct Layer {
  std::string name;  // qkv, o, gate_up, down, ...
  int64_t n = 0, k = 0;
  int tile = -1, splits = 0;  // the plan given, TILE/SPLITS (-1, 0: auto, the planner's)
  cuda::W4A8Plan plan;
  std::vector<cuda::W4A8DeviceWeights> copies;  // the weights, one per rotation copy
  cuda::DeviceBuffer workspace;                  // plan.workspace_bytes, zeroed once
  double alone_us = 0;                           // back to back with itself
};

struct Chain {
  std::string name;
  std::vector<Layer> layers;
  std::vector<double> round_us;  // per round: median us per chain
};

// "C=qkv:3072x2048:wg64x64c-k256/2,o:2048x2048:auto" -> a chain (plans unset).
Chain parse_chain(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--chain wants NAME=LAYER:NxK:PLAN,...: " + spec);
  Chain c;
  c.name = spec.substr(0, eq);
  for (const std::string& item : bench::split_list(spec.substr(eq + 1))) {
    const size_t a = item.find(':'), b = item.rfind(':');
    const size_t x = item.find('x', a + 1);
    if (a == std::string::npos || b == a || x == std::string::npos || x > b)
      throw std::invalid_argument("--chain: a layer is LAYER:NxK:PLAN, not " + item);
    Layer l;
    l.name = item.substr(0, a);
    l.n = std::stoll(item.substr(a + 1, x - a - 1));
    l.k = std::stoll(item.substr(x + 1, b - x - 1));
    const std::string plan = item.substr(b + 1);
    if (l.n <= 0 || l.k <= 0 || l.k % 128 != 0)
      throw std::invalid_argument("--chain: " + item + ": N > 0 and K a positive multiple of 128");
    if (plan != "auto") {
      try {
        const cuda::W4A8Choice ch = cuda::w4a8_plan(plan);
        l.tile = ch.tile, l.splits = ch.splits;
      } catch (const char* what) {
        throw std::invalid_argument("--chain: " + item + ": " + what);
      }
    }
    c.layers.push_back(std::move(l));
  }
  if (c.layers.empty()) throw std::invalid_argument("--chain " + c.name + ": no layers");
  return c;
}

// Random canonical W4 weights (valid ranges) of one layer, uploaded `copies` times.
std::vector<cuda::W4A8DeviceWeights> make_weights(int64_t n, int64_t k, bool g128, int copies, uint32_t seed) {
  std::vector<uint8_t> q(n * k / 2);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : q) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v = static_cast<uint8_t>(s);
  }
  std::vector<cuda::W4A8DeviceWeights> out;
  if (g128) {
    quant::W4G128Weights w;
    w.n = n, w.k = k, w.qweight = q;
    w.s1.assign(n, float_to_half(0.001f));
    w.s2.assign(n * w.groups(), 3);
    w.zero.assign(n * w.groups(), 8);
    for (int c = 0; c < copies; ++c) out.push_back(cuda::upload_w4a8(w));
  } else {
    quant::W4PerChannelWeights w;
    w.n = n, w.k = k, w.qweight = q;
    w.scale.assign(n, float_to_half(0.001f));
    w.zero.assign(n, 8);
    for (int c = 0; c < copies; ++c) out.push_back(cuda::upload_w4a8(w));
  }
  return out;
}

// A graph of `reps` back-to-back calls of fn(rep); its replays timed one by
// one, each queued behind a held GPU (gpu_hold.h): median us per rep of `replays`.
class GraphTimer {
 public:
  GraphTimer(cudaStream_t stream, const std::function<void(int)>& fn, int reps) : stream_(stream), reps_(reps) {
    QS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; ++i) fn(i);
    QS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    QS_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    for (int i = 0; i < 2; ++i) QS_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }
  ~GraphTimer() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  GraphTimer(const GraphTimer&) = delete;
  GraphTimer& operator=(const GraphTimer&) = delete;
  double median_us(int replays) const {
    cudaEvent_t a, b;
    QS_CUDA_CHECK(cudaEventCreate(&a));
    QS_CUDA_CHECK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int r = 0; r < replays; ++r) {
      bench::hold_gpu(stream_);
      QS_CUDA_CHECK(cudaEventRecord(a, stream_));
      QS_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
      QS_CUDA_CHECK(cudaEventRecord(b, stream_));
      bench::release_gpu();
      QS_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      QS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      us.push_back(ms * 1000.0 / reps_);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }

 private:
  cudaStream_t stream_;
  int reps_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// --timeline: `pass` (one pass of the chain over weight copy `rep`, each
// layer recording into its slot) captured as a graph of one pass per weight
// copy (cold weights, as timed) and replayed three times; each layer's record
// of the last pass, on the clock of the chain's first entry.
void print_timeline(const Chain& c, cudaStream_t stream, const std::function<void(int)>& pass) {
  cuda::set_w4a8_timeline(true, stream);
  {
    GraphTimer g(stream, pass, static_cast<int>(c.layers[0].copies.size()));  // (replays twice on construction)
    g.median_us(1);
  }
  cuda::set_w4a8_timeline(false, stream);
  std::vector<std::vector<uint64_t>> rec;
  for (size_t i = 0; i < c.layers.size(); ++i) rec.push_back(cuda::read_w4a8_timeline(stream, static_cast<int>(i)));
  cuda::set_w4a8_timeline_slot(0);
  const auto at = [&](size_t layer, int cta, int point) {
    return rec[layer][static_cast<size_t>(cta) * cuda::kW4A8TimelinePoints + point];
  };
  uint64_t origin = 0;  // the earliest entry of any layer
  for (size_t i = 0; i < c.layers.size(); ++i)
    for (int t = 0; t < cuda::kW4A8TimelineCtas; ++t)
      if (const uint64_t e = at(i, t, cuda::kTlEntry); e != 0 && (origin == 0 || e < origin)) origin = e;
  std::printf("# timeline of chain %s (us from its first entry; the last pass of three replays)\n", c.name.c_str());
  double prev_last_end = -1;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const Layer& l = c.layers[i];
    const int ctas = static_cast<int>(std::min<int64_t>(l.plan.launched_ctas(), cuda::kW4A8TimelineCtas));
    std::vector<double> entry, end;
    for (int t = 0; t < ctas; ++t) {
      const uint64_t e = at(i, t, cuda::kTlEntry), x = at(i, t, cuda::kTlEnd);
      if (e == 0 || e < origin) continue;
      entry.push_back((e - origin) * 1e-3);
      if (x >= e) end.push_back((x - origin) * 1e-3);
    }
    const std::string plan = cuda::w4a8_plan_name(l.plan.tile, l.plan.splits);
    if (entry.empty() || end.empty()) {
      std::printf("  %-8s %-20s not recorded (not a W4 wgmma plan)\n", l.name.c_str(), plan.c_str());
      continue;
    }
    std::sort(entry.begin(), entry.end());
    std::sort(end.begin(), end.end());
    std::printf("  %-8s %-20s entry %7.2f / %7.2f / %7.2f  end %7.2f / %7.2f", l.name.c_str(), plan.c_str(),
                entry.front(), entry[entry.size() / 2], entry.back(), end[end.size() / 2], end.back());
    if (prev_last_end >= 0) std::printf("  gap %+6.2f", entry.front() - prev_last_end);
    std::printf("\n%s", cuda::summarize_w4a8_timeline(rec[i], ctas).c_str());
    prev_last_end = end.back();
  }
}

int run(int argc, char** argv) {
  int64_t m = 64;
  bool g128 = false, predecessors = false, no_pdl = false, timeline = false;
  std::vector<int64_t> attention;  // --attention HQ,HKV,D,CTX (empty: none)
  int rounds = 8;
  double graph_us = 2000.0;
  std::string json_path;
  std::vector<Chain> chains;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::next_arg(argc, argv, i); };
    if (a == "--m") m = std::stoll(next());
    else if (a == "--kind") {
      const std::string v = next();
      if (v != "pc" && v != "g128") throw std::invalid_argument("--kind is pc or g128");
      g128 = v == "g128";
    } else if (a == "--predecessors") predecessors = true;
    else if (a == "--no-pdl") no_pdl = true;
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--graph-us") graph_us = std::stod(next());
    else if (a == "--chain") chains.push_back(parse_chain(next()));
    else if (a == "--json") json_path = next();
    else if (a == "--timeline") timeline = true;
    else if (a == "--attention") {
      attention = bench::parse_list(next());
      if (attention.size() != 4 || attention[0] <= 0 || attention[1] <= 0 || attention[0] % attention[1] != 0 ||
          (attention[2] != 64 && attention[2] != 128) || attention[3] <= 0)
        throw std::invalid_argument("--attention wants HQ,HKV,D,CTX: HQ a multiple of HKV, D 64 or 128, CTX > 0");
    }
    else throw std::invalid_argument("unknown argument " + a);
  }
  if (chains.empty()) throw std::invalid_argument("no --chain given");
  if (m < 1 || rounds < 1 || graph_us <= 0) throw std::invalid_argument("--m, --rounds and --graph-us must be positive");
  if (!attention.empty()) {
    const int64_t hq = attention[0], hkv = attention[1], d = attention[2];
    for (const Chain& c : chains) {
      bool qkv = false, o = false;
      for (const Layer& l : c.layers) {
        if (l.name == "qkv") {
          if (l.n != (hq + 2 * hkv) * d) throw std::invalid_argument("--attention: chain " + c.name + "'s qkv n is not (HQ + 2 HKV) D");
          qkv = true;
        }
        if (l.name == "o") {
          if (l.k != hq * d) throw std::invalid_argument("--attention: chain " + c.name + "'s o k is not HQ D");
          o = true;
        }
      }
      if (!qkv || !o) throw std::invalid_argument("--attention: chain " + c.name + " needs a qkv and an o layer");
    }
  }
  if (timeline && !cuda::w4a8_timeline_built())
    throw std::invalid_argument("--timeline: this build's kernels do not record (configure with -DQSERVE_GEMM_TIMELINE=ON)");
  for (const Chain& c : chains)
    if (timeline && static_cast<int>(c.layers.size()) > cuda::kW4A8TimelineSlots)
      throw std::invalid_argument("--timeline: chain " + c.name + " has more layers than the timeline's slots");
  if (cuda::device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  cuda::CudaContext ctx(0);
  const cudaStream_t stream = ctx.stream();
  const auto& dev = ctx.info();
  std::printf("# %s, %d SMs, L2 %zu MB; m = %lld, %s, predecessors %s, PDL %s\n", dev.name.c_str(), dev.sm_count,
              dev.l2_bytes >> 20, static_cast<long long>(m), g128 ? "g128" : "per-channel",
              predecessors ? "on" : "off", no_pdl || !cuda::pdl_enabled(dev) ? "off" : "on");

  // Plans, and the rotation: every chain's weights over its copies span > 2x L2.
  int64_t max_k = 0, max_n = 0;
  for (Chain& c : chains) {
    int64_t bytes = 0;
    for (Layer& l : c.layers) {
      l.plan = cuda::plan_w4a8(dev, m, l.n, l.k, l.tile, l.splits, g128);
      if (no_pdl) l.plan.pdl = false;
      bytes += l.n * l.k / 2;
      max_k = std::max(max_k, l.k), max_n = std::max(max_n, l.n);
    }
    const int copies = static_cast<int>(std::max<int64_t>(2, 2 * static_cast<int64_t>(dev.l2_bytes) / bytes + 1));
    uint32_t seed = 1;
    for (Layer& l : c.layers) {
      l.copies = make_weights(l.n, l.k, g128, copies, seed++);
      l.workspace = cuda::DeviceBuffer(std::max<size_t>(l.plan.workspace_bytes, 4));
      QS_CUDA_CHECK(cudaMemsetAsync(l.workspace.data(), 0, l.workspace.size(), stream));
    }
  }

  // Activations (INT8 rows, scales, sums) for the widest k, outputs for the
  // widest n; the predecessors' fp16 inputs [m, 2 max_k] and gamma.
  cuda::DeviceBuffer x8(m * max_k), sx(m * 2), asum(m * 2), xsum(m * 4), y16(m * max_n * 2);
  cuda::DeviceBuffer pin(m * 2 * max_k * 2), gamma(max_k * 2);
  {
    std::vector<uint8_t> xh(m * max_k);
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = static_cast<uint8_t>(static_cast<int8_t>((i * 37) % 255 - 127));
    x8.upload(xh);
    const std::vector<uint16_t> small(m, float_to_half(0.01f));
    sx.upload(small);
    asum.upload(small);
    std::vector<int32_t> xs(m, 0);
    xsum.upload(xs);
    std::vector<uint16_t> h(m * 2 * max_k);
    for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_half(static_cast<float>(static_cast<int>(i % 251) - 125) / 64.0f);
    pin.upload(h);
    gamma.upload(std::vector<uint16_t>(max_k, float_to_half(1.0f)));
  }
  const Int8Rows rows_out{x8.as<int8_t>(), sx.as<uint16_t>(), asum.as<uint16_t>(), xsum.as<int32_t>()};
  const int mi = static_cast<int>(m);
  auto predecessor = [&](const Layer& l) {
    if (!predecessors) return;
    const uint16_t* in = pin.as<uint16_t>();
    const int k = static_cast<int>(l.k);
    cudaError_t e = cudaSuccess;
    if (l.name == "qkv" || l.name == "gate_up")
      e = cuda::rmsnorm_quant(in, nullptr, gamma.as<uint16_t>(), mi, k, 1e-5f, rows_out, stream);
    else if (l.name == "o")
      e = cuda::quantize_int8(in, mi, k, rows_out, stream);
    else if (l.name == "down")
      e = cuda::silu_mul_quant(in, in + k, 2 * l.k, mi, k, rows_out, stream);
    QS_CUDA_CHECK(e);
  };
  // --attention: the KV4 caches (sets rotated per pass), page tables, RoPE
  // table, q and the attention output, the decode plan and its workspace.
  struct AttentionBlock {
    AttentionShape shape;
    KvPageLayout layout;
    int ctx = 0, pps = 0, sets = 1;
    cuda::DeviceBuffer k, v, page_table, context_lens, positions, slots, rope_table, q, out, workspace;
    cuda::DecodePlan plan;
  };
  std::unique_ptr<AttentionBlock> attn;
  if (!attention.empty()) {
    attn = std::make_unique<AttentionBlock>();
    AttentionBlock& a = *attn;
    a.shape = AttentionShape{static_cast<int32_t>(attention[0]), static_cast<int32_t>(attention[1]),
                             static_cast<int32_t>(attention[2])};
    a.layout = KvPageLayout{16, a.shape.num_kv_heads, a.shape.head_dim, KvDtype::kInt4};
    a.ctx = static_cast<int>(attention[3]);
    a.pps = (a.ctx + a.layout.page_size - 1) / a.layout.page_size;
    const int64_t set_bytes = 2 * m * a.pps * a.layout.page_bytes();  // K and V
    a.sets = static_cast<int>(std::max<int64_t>(1, 2 * static_cast<int64_t>(dev.l2_bytes) / set_bytes + 1));
    const int64_t pages = static_cast<int64_t>(a.sets) * m * a.pps;
    a.k = cuda::DeviceBuffer(pages * a.layout.page_bytes());
    a.v = cuda::DeviceBuffer(pages * a.layout.page_bytes());
    // 0x3c bytes: codes 12 / 3, fp16 scales and zeros 1.06 (finite, timing only).
    QS_CUDA_CHECK(cudaMemsetAsync(a.k.data(), 0x3c, a.k.size(), stream));
    QS_CUDA_CHECK(cudaMemsetAsync(a.v.data(), 0x3c, a.v.size(), stream));
    std::vector<int32_t> pt(pages), ctxs(m, a.ctx), pos(m, a.ctx - 1), slots(static_cast<size_t>(a.sets) * m);
    for (int64_t i = 0; i < pages; ++i) pt[i] = static_cast<int32_t>(i);  // set s: rows s * m ..
    for (int64_t b = 0; b < static_cast<int64_t>(a.sets) * m; ++b)
      slots[b] = pt[b * a.pps + (a.ctx - 1) / a.layout.page_size] * a.layout.page_size + (a.ctx - 1) % a.layout.page_size;
    std::vector<float> table(static_cast<size_t>(a.ctx) * a.shape.head_dim);
    for (int p = 0; p < a.ctx; ++p)
      for (int i = 0; i < a.shape.head_dim / 2; ++i) {
        const double ang = p * std::pow(500000.0, -2.0 * i / a.shape.head_dim);
        table[(static_cast<size_t>(p) * a.shape.head_dim / 2 + i) * 2] = static_cast<float>(std::cos(ang));
        table[(static_cast<size_t>(p) * a.shape.head_dim / 2 + i) * 2 + 1] = static_cast<float>(std::sin(ang));
      }
    auto upload = [&](cuda::DeviceBuffer& buf, const void* src, size_t bytes) {
      buf = cuda::DeviceBuffer(bytes);
      QS_CUDA_CHECK(cudaMemcpy(buf.data(), src, bytes, cudaMemcpyHostToDevice));
    };
    upload(a.page_table, pt.data(), pt.size() * 4);
    upload(a.context_lens, ctxs.data(), ctxs.size() * 4);
    upload(a.positions, pos.data(), pos.size() * 4);
    upload(a.slots, slots.data(), slots.size() * 4);
    upload(a.rope_table, table.data(), table.size() * 4);
    const int64_t q_elems = m * a.shape.num_q_heads * a.shape.head_dim;
    a.q = cuda::DeviceBuffer(q_elems * 2);
    a.out = cuda::DeviceBuffer(q_elems * 2);
    a.plan = cuda::plan_decode_attention(a.shape, KvDtype::kInt4, static_cast<int>(m), a.ctx, dev.sm_count);
    a.workspace = cuda::DeviceBuffer(std::max<size_t>(a.plan.workspace_bytes, 4));
    std::printf("# attention: %d sequences of %d tokens, %d / %d heads of %d, KV4 pages of 16 (%d sets); decode "
                "%d split(s) of %d tokens, %s kernel\n",
                static_cast<int>(m), a.ctx, a.shape.num_q_heads, a.shape.num_kv_heads, a.shape.head_dim, a.sets,
                a.plan.num_splits, a.plan.split_tokens, cuda::decode_kernel_name(a.plan.kernel));
  }
  // After qkv's GEMM (its output in y16, [m, (Hq + 2 Hkv) D]): RoPE + KV
  // write, then decode attention writing o's INT8 rows.
  auto attention_block = [&](int rep) {
    AttentionBlock& a = *attn;
    const int set = rep % a.sets;
    const int64_t row = static_cast<int64_t>(a.shape.num_q_heads + 2 * a.shape.num_kv_heads) * a.shape.head_dim;
    const uint16_t* qkv = y16.as<uint16_t>();
    const QkvInput in{qkv, qkv + a.shape.num_q_heads * a.shape.head_dim,
                      qkv + (a.shape.num_q_heads + a.shape.num_kv_heads) * a.shape.head_dim, row, row, row};
    const KvWriteBatch wb{static_cast<int32_t>(m), a.positions.as<int32_t>(),
                          a.slots.as<int32_t>() + static_cast<size_t>(set) * m};
    const PagedKvCache cache{a.k.as<uint8_t>(), a.v.as<uint8_t>(), static_cast<int32_t>(a.sets * m * a.pps), a.layout};
    QS_CUDA_CHECK(cuda::rope_kv_write(in, wb, a.shape, RopeStyle::kRotateHalf, a.rope_table.as<float>(),
                                      a.q.as<uint16_t>(), cache, stream));
    cuda::DecodeArgs args;
    args.q = a.q.as<uint16_t>();
    args.out = a.out.as<uint16_t>();
    args.context_lens = a.context_lens.as<int32_t>();
    args.page_table = a.page_table.as<int32_t>() + static_cast<size_t>(set) * m * a.pps;
    args.page_table_stride = a.pps;
    args.batch = static_cast<int32_t>(m);
    args.softmax_scale = 1.f / std::sqrt(static_cast<float>(a.shape.head_dim));
    args.quant = rows_out;
    QS_CUDA_CHECK(cuda::decode_attention(args, a.shape, cache, a.plan, a.workspace.data(), stream));
  };
  auto gemm = [&](Layer& l, int copy) {
    cuda::W4A8Args args;
    args.x = x8.as<int8_t>();
    args.s_x = sx.as<__half>();
    args.a_sum = asum.as<__half>();
    args.x_sum = xsum.as<int32_t>();
    args.m = m;
    args.y = y16.as<__half>();
    cuda::gemm_w4a8(l.copies[copy % l.copies.size()], args, l.plan, l.workspace.data(), stream);
  };
  // With --attention, o's INT8 input comes from the attention block after
  // qkv (its predecessor), not from quantize_int8.
  auto before = [&](const Layer& l) {
    if (!(attn && l.name == "o")) predecessor(l);
  };
  auto after = [&](const Layer& l, int rep) {
    if (attn && l.name == "qkv") attention_block(rep);
  };
  auto run_chain = [&](Chain& c, int rep) {
    for (Layer& l : c.layers) {
      before(l);
      gemm(l, rep);
      after(l, rep);
    }
  };
  // --timeline: the same, each layer's launch recording into slot = its index.
  auto run_chain_recording = [&](Chain& c, int rep) {
    for (size_t i = 0; i < c.layers.size(); ++i) {
      before(c.layers[i]);
      cuda::set_w4a8_timeline_slot(static_cast<int>(i));
      gemm(c.layers[i], rep);
      after(c.layers[i], rep);
    }
  };
  // Reps per graph from one untimed pass: ~graph_us of work per replay.
  auto reps_for = [&](const std::function<void(int)>& fn) {
    fn(0);
    QS_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaEvent_t a, b;
    QS_CUDA_CHECK(cudaEventCreate(&a));
    QS_CUDA_CHECK(cudaEventCreate(&b));
    QS_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < 3; ++i) fn(i);
    QS_CUDA_CHECK(cudaEventRecord(b, stream));
    QS_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    QS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return static_cast<int>(std::clamp(graph_us / std::max(1.0, ms * 1000.0 / 3), 4.0, 256.0));
  };

  // Each layer alone (with its predecessor when on), back to back with itself.
  for (Chain& c : chains)
    for (Layer& l : c.layers) {
      const auto fn = [&](int rep) {
        predecessor(l);
        gemm(l, rep);
      };
      GraphTimer t(stream, fn, reps_for(fn));
      l.alone_us = t.median_us(9);
    }
  // --attention: the attention block alone (RoPE + KV write, decode attention), back to back.
  if (attn) {
    const auto fn = [&](int rep) { attention_block(rep); };
    GraphTimer t(stream, fn, reps_for(fn));
    std::printf("# attention block alone %.2f us (in a chain it replaces o's quantize_int8, which o's time alone includes)\n",
                t.median_us(9));
  }
  // The chains, in turn: round r starts at chain r % count, and every second
  // round runs the order backwards (A B, B A, ...; A B C, C B A, B C A, ...).
  std::vector<std::unique_ptr<GraphTimer>> timers;
  for (Chain& c : chains) {
    const auto fn = [&](int rep) { run_chain(c, rep); };
    timers.push_back(std::make_unique<GraphTimer>(stream, fn, reps_for(fn)));
  }
  const int count = static_cast<int>(chains.size());
  for (int r = 0; r < rounds; ++r) {
    std::vector<int> order(count);
    for (int i = 0; i < count; ++i) order[i] = (r / 2 + i) % count;
    if (r % 2) std::reverse(order.begin(), order.end());
    for (const int i : order) chains[i].round_us.push_back(timers[i]->median_us(5));
  }

  FILE* json = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (json) std::fprintf(json, "[\n");
  for (int i = 0; i < count; ++i) {
    Chain& c = chains[i];
    std::vector<double> v = c.round_us;
    std::sort(v.begin(), v.end());
    const double med = v[v.size() / 2];
    double sum = 0;
    std::string plans;
    for (const Layer& l : c.layers) {
      sum += l.alone_us;
      plans += (plans.empty() ? "" : " ") + l.name + "=" + cuda::w4a8_plan_name(l.plan.tile, l.plan.splits);
    }
    std::printf("chain %-6s %8.2f us (rounds %.2f .. %.2f) | layers alone %8.2f us | chain - alone %+7.2f us | %s\n",
                c.name.c_str(), med, v.front(), v.back(), sum, med - sum, plans.c_str());
    for (const Layer& l : c.layers)
      std::printf("  %-8s %6lldx%-6lld %-20s ctas %4lld  alone %7.2f us\n", l.name.c_str(), static_cast<long long>(l.n),
                  static_cast<long long>(l.k), cuda::w4a8_plan_name(l.plan.tile, l.plan.splits).c_str(), static_cast<long long>(l.plan.launched_ctas()),
                  l.alone_us);
    if (json) {
      std::fprintf(json, "  {\"chain\": \"%s\", \"m\": %lld, \"kind\": \"%s\", \"predecessors\": %s, \"pdl\": %s, "
                         "\"us\": %.3f, \"us_min\": %.3f, \"us_max\": %.3f, \"alone_sum_us\": %.3f, \"layers\": [",
                   c.name.c_str(), static_cast<long long>(m), g128 ? "g128" : "pc", predecessors ? "true" : "false",
                   no_pdl || !cuda::pdl_enabled(dev) ? "false" : "true", med, v.front(), v.back(), sum);
      for (size_t j = 0; j < c.layers.size(); ++j) {
        const Layer& l = c.layers[j];
        std::fprintf(json, "%s{\"layer\": \"%s\", \"n\": %lld, \"k\": %lld, \"plan\": \"%s\", \"ctas\": %lld, "
                           "\"alone_us\": %.3f}",
                     j ? ", " : "", l.name.c_str(), static_cast<long long>(l.n), static_cast<long long>(l.k),
                     cuda::w4a8_plan_name(l.plan.tile, l.plan.splits).c_str(), static_cast<long long>(l.plan.launched_ctas()), l.alone_us);
      }
      std::fprintf(json, "]}%s\n", i + 1 < count ? "," : "");
    }
  }
  if (json) {
    std::fprintf(json, "]\n");
    std::fclose(json);
  }
  if (timeline)
    for (Chain& c : chains) print_timeline(c, stream, [&](int rep) { run_chain_recording(c, rep); });
  return 0;
}

}  // namespace
}  // namespace qserve

int main(int argc, char** argv) {
  try {
    return qserve::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm_chain: %s\n", e.what());
    return 2;
  }
}
