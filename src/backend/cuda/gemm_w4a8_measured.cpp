#include "backend/cuda/gemm_w4a8_measured.h"

#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_overrides.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"

namespace qserve::cuda {
namespace {

struct Entry {
  int64_t n, k;
  int m;  // bucket: the largest m it serves (1: m <= 8, measured at m = 1)
  W4A8Choice pc, g128;  // wgmma tiles (since round 6 no mma.sync tile wins a row)
};

// A plan by name, "TILE/SPLITS" (gemm_w4a8_tile_names.h: the tile names of
// w4a8_tile_name, splits a number or sk for stream-K), looked up when this
// file compiles: a name not in the tile list is a compile error, and a tile
// inserted into the list moves no entry.
consteval W4A8Choice P(std::string_view plan) { return w4a8_plan(plan); }

// From `bench_gemm --m 1,16,32,64,128,256 --graph-us 400 --sweep-tiles ...`
// on the H200 (bench/results/2026-11-30-gemm-h200-r6.md, round G2): per row
// the fastest of every tile x split-K of the mma.sync tiles 128x8/16/32 and
// the wgmma W4 tiles (split-K 1-16; cluster tiles 1-8), weights cold
// (rotated over copies > 2x L2), with the level-2 words of g128 copied with
// each stage; the m = 512 rows from the round-F sweep (the same tiles; the
// W4 tiles with the same kernels but the level-2 words copied per 16-channel
// tile), except g128 on the 4096-row layers: from the round-K sweep of the
// large tiles against the pass + INT8-weight tiles (the W4 tile faster on
// every row). What the sweep showed: the
// cluster tiles win at m <= 128 wherever the layer has fewer than ~64
// output tiles (o, qkv, the down layers: 48-128 CTAs, 2-6 splits), the
// persistent W4 tiles on the wide layers (gate_up) and above; g128 no longer
// takes an mma.sync tile anywhere. The 4096 x 4096 rows at m = 1 and 16:
// from the round-P sweep (bench/results/2026-11-30-gemm-h200-r7.md), which
// added the 128-channel cluster tiles 29, 30 to every m <= 32 row; they won
// on those two rows only (8-16%), every other row reproduced its entry.
// Round 8 (bench/results/2026-11-30-gemm-h200-r8.md): the deep-stage tiles
// 31-39 (sweeps B and C; entries marked r8), and the Llama-2-13B and
// Llama-2-70B layers (sweep I: the m <= 16 tiles with splits 1-8, the 32-128
// tiles with splits 1-8, the large tiles with splits 1-2 at m = 256 / 512).
// Round 10 (bench/results/2026-11-30-gemm-h200-r10.md): stream-K (splits
// kW4A8StreamK) on the long-k down layers at m = 256, where the 128 x 128
// tile has 64-80 output tiles for 132 SMs (entries marked r10: 5-18% over
// the split-K plans); elsewhere the large tiles' stream-K lost (its partial
// tiles cost as much as an epilogue each, and the CTAs' scattered k ranges
// share less in L2).
// Round 17 (bench/results/2026-12-02-gemm-h200-r17.md): the split-K partials
// as 16-B pieces in register order (they had gone through an [splits][m][n]
// array, one 4-byte access per output, and a split's fix-up cost 5-15 us):
// wg128x128 with 2 or 4 splits on the 4096-row layers at m = 128-256 and
// Llama-3-8B qkv at m = 128; wg128x256/2 for g128 on the long-k down layers
// (entries marked r17); and at m = 16-32 the persistent 256 x 16 / 32 tiles
// with 2-6 global splits on the qkv and down layers, where they beat the
// cluster tiles by 3-8% (call 5 of that file).
// Round 18 (bench/results/2026-12-02-gemm-h200-r18.md): the resident decode
// kernels (gemv8r / 16r / 32r: one CTA of 16 warps per SM, each warp's activation
// rows kept in shared memory) for g128 on Llama-3-8B qkv at m = 9-16 and on
// the 4096 x 4096 layers at m = 17-32 (1.14-1.24x over the earlier entries
// back to back, 1.13-1.21x after a neighbor; the engine's g128 decode at 16
// sequences +1.5%, 4 of 4 pairs ahead). Per-channel keeps its entries there:
// 4-8% faster back to back, but the engine at 16 sequences 0.1-0.5% slower.
// The same round re-swept the Llama-2-13B / 70B rows at m = 128-512 (round 8's
// entries, measured against the slow split-K): 13 choices on 8 rows changed
// (marked r18: split 2 or stream-K on wg128x128 / wg128x256, 1.04-1.21x),
// and at m = 16 / 32 7 choices on 5 rows took the persistent 256 x 16 / 32
// tiles with 3-6 global splits (1.05-1.17x), as round 17 found on the 7B / 8B
// layers.
// Round 21 (bench/results/2026-12-02-gemm-h200-r21.md): the g128 plans at
// m <= 64 re-swept after round 20 made g128 5-12% faster, back to back and
// after a 5-us neighbor kernel (the model's pattern), and the candidates run
// in the engine. Six g128 choices changed (marked r21), each taken only where
// the neighbor pattern gained >= 3%, back to back lost <= 3% and the engine
// showed no loss (one exception, Llama-3-8B down at m = 9-16: 2.6-3.6% slower
// back to back in three timings, 13% faster after a neighbor, engine +0.8 /
// +1.5% at 16 sequences): Llama-2-7B gate_up at m <= 16 (the deep-stage cluster tile
// on its 86 CTAs: engine decode +5% at 1-4 sequences), Llama-3-8B qkv at
// m = 17-32 and both down layers at m = 9-16 (cluster or resident plans in
// place of global split-K, which lose most after another kernel: the new
// plans take 13-17% less time after a neighbor), 70B down at m = 9-16. Not taken, the engine
// disagreeing with the benchmark: Llama-3-8B gate_up's deep-stage tile (9%
// faster back to back, no faster after a neighbor, engine 0 to -1%), gemv8d on the
// down layers at m = 5-8 (15% faster in both patterns; the engine at 8
// sequences mixed, as in round 14), per-channel gemv16r on Llama-3-8B qkv at
// m = 9-16 (10% / 27% faster, engine -1.3%).
// Round 22 (bench/results/2026-12-02-gemm-h200-r22.md): tile 30 (wg128x16c)
// runs two CTAs per SM (TileShape::occ); with it the per-channel plans at
// m = 9-16 of the qkv and down layers (marked r22: 192 CTAs) take 5-13%
// less time after a neighbor and 0.96-1.02x the time back to back; engine
// (per-channel, 16 sequences) Llama-3-8B +3.0%, Llama-2-7B +0.9%. By the
// same rule nothing else changed: two CTAs per SM lost on the gate_up and
// 70B rows (3-25%), the decode tiles' stream-K lost on every row.
// Round 23 (bench/results/2026-12-02-gemm-h200-r23.md): the 128 x 32 cluster
// tiles 40-42, swept at m = 32 against the 256 x 32 tiles and gemv32r
// (splits 1-8, back to back and after a 5-us neighbor); by the round-21
// rule six choices on five layers changed (marked r23): per-channel 70B
// down, Llama-2-7B down and qkv, the 4096 x 4096 layers; g128 70B down and
// Llama-2-7B gate_up. Engine at 32 sequences (three passes, every pair
// ahead): per-channel Llama-3-8B +1.4%, Llama-2-7B +2.1%; g128 +0.1% /
// +0.3%; Llama-2-70B (one pass) +0.6% / +1.3%. The same sweep on the
// Llama-2-13B / 70B layers (call 6 of that file): Llama-2-70B o (8192 x 8192)
// both kinds on wg128x32c-k512/2 (1.16 / 1.24x after a neighbor), Llama-2-13B
// qkv per-channel on wg256x32c/2 (1.03x; engine per-channel at 32 sequences
// +2.7%, two passes).
// Round 29 (bench/results/2026-12-03-gemm-h200-r29.md): the nine issue
// layers' m <= 256 rows re-swept after round 28's two-thread producer (the
// small tiles with splits 1-8, the large ones 1-4 and stream-K; back to back
// and after a 5-us neighbor), by the round-21 rule: 16 rows changed (marked
// r29), 18 choices at m = 1-128, 0.85-1.00x the time back to back and
// 0.80-0.98x after a neighbor in the A/B of the issue table (two passes
// each), every new choice a cluster tile: other cluster shapes or splits on
// 11, in place of the resident plans on 2 (gemv32r on the 4096 x 4096
// layers, gemv16r on Llama-2-7B down) and of persistent tiles on 5 (Llama-3-8B
// qkv at m = 65-128 on 128 x 64 / 128 x 128 cluster plans: 1.02x of cuBLASLt
// INT8, was 0.89-0.91x). Engine (Llama-3-8B, decode at 1-64 sequences,
// one ABBA; 1-4 sequences, plans unchanged, within +-1.2%):
// per-channel +1.3 / +1.6% at 8 / 16 (at 32 / 64, no per-channel plan of
// the model changed: +1.0 / +0.5%); g128 +1.7% at 32, 0.0% at 64. Not
// taken: g128 gemv8d on the down layers at m = 5-8 (10-14% faster in both
// patterns, engine -2.8% at 8 sequences: the third time, after rounds 14
// and 21). The Llama-2-7B and 70B rows were not run in the engine. An r29
// comment gives us back to back / after a neighbor, then "before r29:" the
// entry's earlier history.
// Round 31 (bench/results/2026-12-04-gemm-h200-r31.md): cluster plans of
// one split run their own unsplit twin (the staged epilogue, no cluster:
// 0.92-0.97x the time of the cluster of one on the eight issue rows that
// had such a plan). The 21 cluster tiles at split 1 swept again at m =
// 16-128 on the nine layers against the shipped plans (back to back and
// after a 5-us neighbor): four rows passed the round-21 rule, and the
// engine (A R R A R A A R at the bucket's sequence count) kept three
// (marked r31): Llama-2-7B qkv per-channel at m = 17-32 (engine +1.3% at 32
// sequences), Llama-2-7B gate_up per-channel at m = 33-64 (+0.3% at 64),
// Llama-3-8B gate_up g128 at m = 17-32 (+0.05% at 32). Not taken:
// Llama-2-7B qkv g128 at m = 17-32 on wg128x32c-k512/1 (0.92x after a
// neighbor, engine -1.3%, every pass below). An r31 comment gives us back to
// back / after a neighbor, as r29's.
// Round 32 (bench/results/2026-12-04-gemm-h200-r32.md): split-2 cluster
// plans run the pair form (0.88-0.96x the time of the cluster reduction on
// the issue rows with such a plan). The 16 pair tiles swept at split 2 on
// the nine layers at m = 16-256 against the shipped plans (back to back and
// after a 5-us neighbor); 12 choices passed the round-21 rule, the engine
// (A B B A, every candidate at once through QSERVE_W4A8_PLANS, decode at the
// bucket's sequence count) kept five (marked r32): Llama-2-7B qkv both kinds
// at m = 9-16 (+1.6% per-channel, +0.3% g128 at 16 sequences), the 4096 x
// 4096 layers g128 at m = 33-64 (Llama-3-8B +1.1% at 64), Llama-3-8B qkv
// per-channel at m = 65-128 (+1.7% at 128), Llama-2-7B down g128 at m =
// 65-128 (+0.8% at 128). Not taken: Llama-3-8B qkv g128 at m = 9-16 on
// wg128x16c-k256/2 (0.94x / 0.91x, engine -0.2%), the 4096 x 4096 layers
// g128 at m = 17-32 on wg128x16c-k256/2 (0.97x, engine -0.4%), Llama-3-8B
// qkv per-channel at m = 17-32 on wg128x32c-k256/2 (1.02x / 0.95x, engine
// -0.8%). Not run in the engine (a 70B model's dummy load takes 78 s): 70B
// down at m = 65-128 on wg128x128c-k256/2 (0.93-0.96x / 0.91-0.92x) and at
// m = 129-256 on wg256x128c/2 (per-channel 0.92x / 0.88x, g128 0.97x /
// 0.97x); left for a call with room for it.
// Round 51 (bench/results/2026-12-07-gemm-h100-r51.md, an H100): the 64-channel
// cluster tiles (ids 44-46: half a 128-channel block per CTA, twice the CTAs)
// at m = 33-64 on the 4096-row layers, where their grid at split 2 (128 CTAs)
// still fits one wave: wg64x64c-k256/2 on o and both down layers, both kinds
// (the entries marked r51), in place of split-2 plans on o and split-3 plans
// on down. Engine (A B B A x 2 through QSERVE_W4A8_PLANS, every B pass above
// every A pass), the six cells against the plans they replace, at 64
// sequences: Llama-3-8B +6.6% per-channel and g128, Llama-2-7B +6.5% / +5.4%.
// These rows follow the engine, not back-to-back timing: g128 down is 4-5%
// slower back to back on the new plan and still gains 2.8-3.8% of the step;
// a 128-channel split-2 plan, 8-21% slower back to back than the split-3 one,
// is 3.6% faster (per-channel) or even (g128) in the engine: a split-3
// cluster plan cost the step 3-4% beyond its own time there. Not taken
// (engine below): o and down at m = 17-32 on wg64x32c-k256/2 (-0.9 to -1.6%
// at 32 sequences, against the split-3 / split-6 plans), Llama-3-8B qkv at m = 33-64 on
// wg64x64c-k256/1 (96 CTAs; -1.4% per-channel, -0.5% g128; at split 2 two
// waves, 1.4x back to back).
constexpr Entry kTable[] = {
    // o at m <= 16: the 96-CTA plans (split 3), not the back-to-back optimum (64 CTAs, split 2:
    // 5.4 / 6.5 us at m = 1), which owes 0.4 us to two launches of one GEMM sharing the GPU. After
    // a kernel that holds every SM (the model's pattern, bench_gemm --neighbor-us 5) split 3 takes
    // 6.4 / 7.3 us where split 2 takes 8.0 / 10.0 (bench/results/2026-11-30-gemm-h200-r9.md).
    {4096, 4096, 1, P("wg128x8c-k256/3"), P("wg128x8c-k256/3")},  // pc wg128x8c-k256/3 5.8 (6.4 after a neighbor); g128 6.7 (7.3)
    {4096, 4096, 16, P("wg128x16c-k256/3"), P("wg128x16c-k256/3")},  // pc wg128x16c-k256/3 6.5 (7.2); g128 wg128x16c-k256/3 7.2 (7.9)
    {4096, 4096, 32, P("wg128x32c-k256/3"), P("wg128x32c-k256/3")},  // r29: g128 wg128x32c-k256/3 6.3 / 7.0 (was gemv32r/1 7.1 / 8.2); before r29: pc wg128x32c-k256/3 6.9, 7.9 after a neighbor (r23; was wg256x32c/4 7.2, 8.5); g128 gemv32r 7.4 (r18; was wg256x32c-k256/4 8.5, r8)
    {4096, 4096, 64, P("wg64x64c-k256/2"), P("wg64x64c-k256/2")},  // r51 (an H100, the 64-channel tile): pc wg64x64c-k256/2 5.3 (main's best wg128x64c/3 5.5), g128 5.6 (5.8); engine below; before r51: pc wg128x64c/2; r32 (the pair form): g128 wg128x32c-k256/2 6.8 / 7.1 (was wg128x64c/3 7.0 / 7.5; engine Llama-3-8B g128 64 sequences +1.1%); r29: g128 wg128x64c/3 7.0 / 7.7 (was wg128x64c/2 7.6 / 8.7); before r29: pc wg128x64c/2 7.8; g128 wg128x64c/2 8.7
    {4096, 4096, 128, P("wg128x64c-k256/2"), P("wg128x64c-k256/2")},  // pc wg128x64c-k256/2 9.9 (r8); g128 wg128x64c-k256/2 10.9 (r8)
    {4096, 4096, 256, P("wg128x128c-k256/2"), P("wg128x128c-k256/2")},  // wg128x128c-k256/2: pc 12.7, 13.3 after a neighbor; g128 12.7, 13.2 (r25; were wg128x128/2 13.0 / 14.2, 13.1 / 14.3; r17: wg256x32/1 14.0, wg128x128/1 15.1)
    {4096, 4096, 512, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 15.9; g128 wg128x128/1 17.5 (round K; pass + s8 20.9)
    {6144, 4096, 1, P("wg256x8a2c-k256/4"), P("wg256x8/4")},  // pc wg256x8a2c-k256/4 6.9 (r8); g128 wg256x8/4 8.2
    {6144, 4096, 16, P("wg256x16a2c/4"), P("wg128x16c/4")},  // r34: g128 wg128x16c/4 5.8 / 7.0 (was gemv16r/1 6.7 / 7.8; engine Llama-3-8B g128 16 sequences +0.3% with the 4096 x 14336 entry below); r29: pc wg256x16a2c/4 6.1 / 6.8 (was wg128x16c/4 6.4 / 7.4); before r29: pc wg128x16c/4 7.0, 8.8 after a neighbor (r22, two CTAs per SM; was wg256x16/4 7.2, 9.8); g128 gemv16r 7.0 (r18; was wg256x16a2c-k256/4 8.7, r8)
    {6144, 4096, 32, P("wg256x32c/4"), P("wg256x32c/4")},  // r41 (an H100; the row is bound by the CTA, not HBM: gemm-hopper.md "Phase timestamps"): g128 wg256x32c/4 6.7 / 7.5 after a neighbor (was wg128x32c-k256/2 7.0 / 7.7; A B B A 6.99 -> 6.80 us; engine Llama-3-8B g128 32 sequences +2.4%, with down's below); r29: g128 wg128x32c-k256/2 7.0 / 7.9 (was wg256x32c-k256/4 7.4 / 8.6); before r29: pc wg256x32c/4 8.4; g128 wg256x32c-k256/4 8.6, 9.9 after a neighbor (r21; was wg256x32/4 8.7, 11.8)
    {6144, 4096, 64, P("wg128x64c-k256/2"), P("wg128x64c/2")},  // r29: g128 wg128x64c/2 8.1 / 8.8 (was wg128x64c-k256/2 8.4 / 9.1); before r29: pc wg128x64c-k256/2 9.4 (r8); g128 wg128x64c-k256/2 10.3 (r8)
    {6144, 4096, 128, P("wg128x128c-k256/2"), P("wg128x128c-k256/2")},  // r32 (the pair form): pc wg128x128c-k256/2 10.2 / 10.5 (was wg128x64c-k256/1 10.4 / 10.7; engine Llama-3-8B per-channel 128 sequences +1.7%); r29: pc wg128x64c-k256/1 11.2 / 11.4 (was wg128x128/2 12.8 / 12.9); g128 wg128x128c-k256/2 11.1 / 11.7 (was wg128x128/2 12.5 / 12.8); before r29: pc wg128x128/2 12.5; g128 wg128x128/2 13.1 (r17; were wg256x32/1 13.4, wg256x128c/4 14.5)
    {6144, 4096, 256, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 15.1; g128 wg128x128/1 16.8
    {6144, 4096, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 24.8; g128 wg128x256/1 26.6
    {12288, 4096, 1, P("wg256x8a2c/2"), P("wg256x8a2c-k256/2")},  // pc wg256x8a2c/2 9.8; g128 wg256x8a2c-k256/2 12.4 (r8)
    {12288, 4096, 16, P("wg256x16a2c/2"), P("wg128x16c/2")},  // r32 (the pair form): pc wg256x16a2c/2 8.9 / 10.1 (was wg128x16c/2 9.2 / 10.9; engine Llama-2-7B per-channel 16 sequences +1.6%), g128 wg128x16c/2 9.7 / 10.8 (was wg256x16a2c-k256/2 10.0 / 11.1; engine g128 16 sequences +0.3%); before r32: pc wg128x16c/2 9.5, 12.2 (r22; was wg256x16/2 9.9, 12.8); g128 wg256x16a2c-k256/2 13.1 (r8)
    {12288, 4096, 32, P("wg128x32c-k256o2/2"), P("wg128x32c-k256o2/2")},  // r36 (the push form's received parts apart): pc wg128x32c-k256o2/2 8.6 / 10.9 (was wg128x32c-k512/1 9.9 / 10.3), g128 wg128x32c-k256o2/2 9.5 / 11.2 (was wg256x32c-k256/2 10.1 / 11.2); slower after a neighbor per-channel, but the engine (Llama-2-7B, A B B A x 2) +1.3% pc / +1.6% g128 at 24 sequences, +0.3% / +0.6% at 32; r31: pc wg128x32c-k512/1 9.9 / 10.4 (was wg128x32c-k256o2/2 9.7 / 11.6); before r31: pc wg128x32c-k256o2/2 10.6, 12.6 (r23; was wg256x32/2 10.8, 13.4, r17); g128 wg256x32c-k256/2 13.8 (r8)
    {12288, 4096, 64, P("wg128x64c-k256/1"), P("wg128x64c-k256/1")},  // r29: pc wg128x64c-k256/1 11.4 / 11.9 (was wg256x32/1 12.2 / 12.8); before r29: pc wg256x32/1 13.6; g128 wg128x64c-k256/1 15.5 (r8)
    {12288, 4096, 128, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 15.4; g128 wg128x128/1 16.9
    {12288, 4096, 256, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 24.8; g128 wg128x256/1 25.3
    {12288, 4096, 512, P("wg128x128/1"), P("wg128x256/1")},  // pc wg128x128/1 42.5; g128 wg128x256/1 50.0
    {22016, 4096, 1, P("wg256x8/1"), P("wg256x8a2c-k256/1")},  // pc wg256x8/1 13.2; g128 wg256x8a2c-k256/1 15.7, 18.5 after a neighbor (r21; was wg256x8/1 17.4, 19.8)
    {22016, 4096, 16, P("wg256x16a2/1"), P("wg256x16a2c-k256/1")},  // pc wg256x16a2/1 13.6; g128 wg256x16a2c-k256/1 16.7, 19.2 (r21; was wg256x16/1 18.0, 20.4)
    {22016, 4096, 32, P("wg256x32/1"), P("wg256x32c-k256/1")},  // r29: g128 wg256x32c-k256/1 16.1 / 16.6 (was wg128x32c-k256o2/1 16.1 / 17.4); before r29: pc wg256x32/1 14.3; g128 wg128x32c-k256o2/1 18.7, 20.3 (r23; was wg256x32/1 19.0, 21.2)
    {22016, 4096, 64, P("wg256x64c/1"), P("wg256x64c-k256/1")},  // r31: pc wg256x64c/1 16.2 / 17.2 (was wg256x64/1 17.1 / 18.1); r29: g128 wg256x64c-k256/1 18.9 / 20.3 (was wg256x64/1 20.7 / 21.8); before r29: pc wg256x64/1 17.8; g128 wg256x64/1 23.1
    {22016, 4096, 128, P("wg256x128/1"), P("wg256x128/1")},  // pc wg256x128/1 25.6; g128 wg256x128/1 27.8
    {22016, 4096, 256, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 41.9; g128 wg128x128/1 46.8
    {22016, 4096, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 71.3; g128 wg128x256/1 76.2
    {28672, 4096, 1, P("wg256x8/1"), P("wg256x8a2/1")},  // pc wg256x8/1 14.9; g128 wg256x8a2/1 19.9
    {28672, 4096, 16, P("wg256x16a2/1"), P("wg256x16/1")},  // pc wg256x16a2/1 15.8; g128 wg256x16/1 20.6
    {28672, 4096, 32, P("wg256x32/1"), P("wg128x32c-k256o2/1")},  // r31: g128 wg128x32c-k256o2/1 17.8 / 19.1 (was wg256x32/1 19.3 / 20.1); before r31: pc wg256x32/1 16.8; g128 wg256x32/1 21.6
    {28672, 4096, 64, P("wg256x64/1"), P("wg256x64c-k256/1")},  // r29: g128 wg256x64c-k256/1 20.8 / 21.5 (was wg256x64/1 21.2 / 22.2); before r29: pc wg256x64/1 19.2; g128 wg256x64/1 24.0
    {28672, 4096, 128, P("wg256x128/1"), P("wg256x128/1")},  // pc wg256x128/1 26.6; g128 wg256x128/1 28.7
    {28672, 4096, 256, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 48.4; g128 wg128x256/1 49.5
    {28672, 4096, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 95.0; g128 wg128x256/1 99.9
    {4096, 11008, 1, P("wg256x8a2c/6"), P("gemv8d/1")},  // r34: g128 gemv8d/1 (engine Llama-2-7B g128 at 8 sequences +0.9%, A B B A A B B A, every B pass above every A pass; 1-4 sequences within 0.2%; Llama-3-8B down still -2.3% there); r29, m = 8 (m <= 4: the decode rule): pc wg256x8a2c/6 8.1 / 8.8 (was wg256x8a2c-k256/4 9.4 / 10.4); g128 wg256x8/6 kept (gemv8d/1 8.7 / 10.3 against 9.5 / 12.0, but the engine's g128 decode at 8 sequences -2.8%, as in r14 and r21); before r29: pc wg256x8a2c-k256/4 9.9 (r8); g128 wg256x8/6 12.1
    {4096, 11008, 16, P("wg256x16a2c/6"), P("wg128x16c/6")},  // r29: pc wg256x16a2c/6 8.5 / 9.2 (was wg128x16c/6 8.7 / 10.3); g128 wg128x16c/6 9.3 / 10.2 (was gemv16r/1 10.9 / 12.4); before r29: pc wg128x16c/6 10.2, 11.7 (r22; was wg256x16a2/6 10.1, 13.4); g128 gemv16r 11.0, 12.6 after a neighbor (r21; was wg256x16/6 11.0, 14.5)
    {4096, 11008, 32, P("wg256x32c/6"), P("wg128x32c-k256/3")},  // r34: g128 wg128x32c-k256/3 9.9 / 10.7 (was wg256x32c-k256/6 10.7 / 11.4; engine Llama-2-7B g128 32 sequences +0.6%); r29: pc wg256x32c/6 9.4 / 10.0 (was wg128x32c-k512/3 10.8 / 11.0); before r29: pc wg128x32c-k512/3 11.1, 12.2 (r23; was wg256x32c-k256/4 11.4, 13.2); g128 wg256x32c-k256/6 14.1 (r8)
    {4096, 11008, 64, P("wg64x64c-k256/2"), P("wg64x64c-k256/2")},  // r51 (an H100, the 64-channel tile): pc wg64x64c-k256/2 10.1 (shipped 10.2; engine Llama-2-7B per-channel +6.3% at 64 sequences, +3.4% at 48), g128 11.4 (10.9: slower back to back, engine +2.8% at 64); before r51: pc wg128x64c-k256/3, g128 wg128x64c/3; r34: g128 wg128x64c/3 11.6 / 12.3 (was wg128x64c-k256/3 11.9 / 12.5; engine Llama-2-7B g128 64 sequences +0.3%; per-channel wg128x64c/3 with o's -1.6%: not taken); pc wg128x64c-k256/3 12.7 (r8); g128 wg128x64c-k256/3 14.8 (r8)
    {4096, 11008, 128, P("wg128x64c-k256/2"), P("wg128x64c-k256/2")},  // r32 (the pair form): g128 wg128x64c-k256/2 15.1 / 15.5 (was wg128x128/4 17.1 / 16.6; engine Llama-2-7B g128 128 sequences +0.8%); before r32: pc wg128x64c-k256/2 16.0; g128 wg128x128/4 17.6 (r17; was 19.4)
    {4096, 11008, 256, P("wg128x128c-k256/2"), P("wg128x128c-k256/2")},  // wg128x128c-k256/2: pc 21.0 / 21.8 after a neighbor (r26, the batched cluster sums; r25 21.7 / 22.4, was wg128x128/2 22.0 / 23.2), g128 21.7 / 22.3 after a neighbor (r26; was wg128x128/2 22.4 / 23.9) (r17; were wg256x64c/2 25.1, wg128x128/sk 27.8)
    {4096, 11008, 512, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 34.1; g128 wg128x128/1 39.1 (round K; pass + s8 49.0)
    {4096, 14336, 1, P("wg256x8a2c/6"), P("wg256x8a2/6")},  // r29, m = 8 (m <= 4: the decode rule): pc wg256x8a2c/6 9.6 / 10.5 (was wg256x8a2c-k256/6 10.4 / 11.1; the engine's per-channel decode at 8 sequences +1.3%); g128 wg256x8a2/6 kept (gemv8d/1 10.3 / 12.8 against 11.4 / 14.2, but the engine -2.8% at 8 sequences); before r29: pc wg256x8a2c-k256/6 11.3 (r8); g128 wg256x8a2/6 13.9
    {4096, 14336, 16, P("wg256x16a2c/6"), P("wg128x16c/6")},  // r34: g128 wg128x16c/6 11.0 / 12.0 (was wg256x16a2c-k256/6 11.3 / 12.2; engine with the 6144 x 4096 entry +0.3%); r29: pc wg256x16a2c/6 10.0 / 10.8 (was wg128x16c/6 10.1 / 11.9); before r29: pc wg128x16c/6 11.5, 13.2 (r22; was wg256x16/6 11.3, 14.6); g128 wg256x16a2c-k256/6 13.2, 14.5 after a neighbor (r21; was wg256x16a2/6 12.8, 16.6)
    {4096, 14336, 32, P("wg256x32c/6"), P("wg256x32c/6")},  // r41 (an H100): g128 wg256x32c/6 12.6 / 13.2 after a neighbor (was wg256x32c-k256/6 13.1 / 13.4; A B B A 13.15 -> 12.81 us; engine as qkv's above); pc wg256x32c/6 13.0; g128 wg256x32c-k256/6 16.1 (r8)
    {4096, 14336, 64, P("wg64x64c-k256/2"), P("wg64x64c-k256/2")},  // r51 (an H100, the 64-channel tile): pc wg64x64c-k256/2 12.5 (main's best wg128x64c/3 12.6), g128 14.1 (13.5: slower back to back, engine +3.8%); engine below; before r51: pc wg128x64c-k256/3, g128 wg128x64c/3; r34: g128 wg128x64c/3 14.1 / 14.9 (was wg128x64c-k256/3 14.4 / 15.0; engine Llama-3-8B g128 64 sequences +0.5%; per-channel wg128x64c/3 with o's: -0.1%, not taken); pc wg128x64c-k256/3 14.9 (r8); g128 wg128x64c-k256/3 17.7 (r8)
    {4096, 14336, 128, P("wg128x64c-k256/2"), P("wg128x128/4")},  // pc wg128x64c-k256/2 19.3; g128 wg128x128/4 20.0 (r17; was 23.6)
    {4096, 14336, 256, P("wg128x128c-k256/2"), P("wg128x128c-k256/2")},  // wg128x128c-k256/2: pc 25.5 / 26.0 after a neighbor (r26, the batched cluster sums; r25 26.0 / 26.7, was wg128x128/2 26.4 / 27.8), g128 26.2 / 26.9 after a neighbor (r26; was wg128x128/2 27.1 / 28.4) (r17; were wg256x64c/2 30.1, wg128x128/sk 32.7)
    {4096, 14336, 512, P("wg128x128/1"), P("wg128x256/2")},  // pc wg128x128/1 41.8; g128 wg128x256/2 45.6 (r17; was wg128x128/1 52.2)
    {8192, 28672, 1, P("wg128x8c-k512/2"), P("wg128x8c/2")},  // r29: g128 wg128x8c/2 30.7 / 31.3 (was wg128x16c-k512/2 30.9 / 33.8); before r29: pc wg128x8c-k512/2 28.9 (r8); g128 wg128x16c-k512/2 36.1 (r8)
    {8192, 28672, 16, P("wg128x16c-k256/2"), P("wg128x16c-k512/2")},  // pc wg128x16c-k256/2 30.1 (r8); g128 wg128x16c-k512/2 32.1, 34.3 after a neighbor (r21; was wg256x16a2/4 35.5, 36.9)
    {8192, 28672, 32, P("wg128x32c-k256/2"), P("wg128x32c-k512/2")},  // pc wg128x32c-k256/2 30.8, 33.3 (r23; was wg256x32c-k256/3 33.6, 35.5); g128 wg128x32c-k512/2 33.3, 34.5 (r23; was wg256x32/4 37.3, 38.6)
    {8192, 28672, 64, P("wg128x64c-k256/2"), P("wg128x64c-k256/2")},  // pc wg128x64c-k256/2 33.8 (r8); g128 wg128x64c-k256/2 42.0 (r8)
    {8192, 28672, 128, P("wg128x128c-k256/2"), P("wg128x128c-k256/2")},  // r34 (from the r32 split-2 sweep): pc wg128x128c-k256/2 43.3 / 43.9 after a neighbor (was wg128x128/2 45.0 / 47.5), g128 45.6 / 44.1 (was 49.0 / 48.4); engine Llama-3-70B 128 sequences per-channel +0.6%, g128 +1.2%; before r34: pc wg128x128/2 52.9; g128 wg128x128/2 58.8
    {8192, 28672, 256, P("wg256x128c/2"), P("wg128x256/2")},  // r34 (from the r32 split-2 sweep): pc wg256x128c/2 81.2 / 78.4 after a neighbor (was wg128x128/1 88.7 / 88.8; engine Llama-3-70B per-channel 256 sequences +0.7%); g128 wg128x256/2 kept (the sweep's wg256x128c/2 84.4 / 85.4 against 87.5 / 88.0, but the engine -1.4% at 256 sequences); before r34: pc wg128x128/1 79.8; g128 wg128x256/2 83.5 (r17; was wg128x256/sk 94.5)
    {8192, 28672, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 135.6; g128 wg128x256/1 153.2
    // Llama-2-13B (qkv, o, gate_up, down) and Llama-2-70B (qkv, o, gate_up): round 8's sweep I
    // (bench/results/2026-11-30-gemm-h200-r8.md; bucket 1 by the mean of m = 1 and 8).
    {15360, 5120, 1, P("wg256x8a2c-k256/2"), P("wg256x8a2c-k256/2")},  // pc wg256x8a2c-k256/2 11.9; g128 wg256x8a2c-k256/2 15.2 (r8)
    {15360, 5120, 16, P("wg256x16a2c-k256/2"), P("wg256x16a2c-k256/2")},  // pc wg256x16a2c-k256/2 12.6; g128 wg256x16a2c-k256/2 15.9 (r8)
    {15360, 5120, 32, P("wg256x32c/2"), P("wg256x32c-k256/2")},  // pc wg256x32c/2 14.0, 15.6 after a neighbor (r23; was wg256x32c-k256/2 13.9, 16.1); g128 wg256x32c-k256/2 16.6 (r8)
    {15360, 5120, 64, P("wg128x64c-k256/1"), P("wg128x64c-k256/1")},  // pc wg128x64c-k256/1 16.2; g128 wg128x64c-k256/1 18.9 (r8)
    {15360, 5120, 128, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 18.7; g128 wg128x128/1 21.0 (r8)
    {15360, 5120, 256, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 30.2; g128 wg128x256/1 30.8 (r8)
    {15360, 5120, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 58.2; g128 wg128x256/1 59.6 (r8)
    {5120, 5120, 1, P("wg256x8a2c-k256/4"), P("wg256x8a2c-k256/4")},  // pc wg256x8a2c-k256/4 6.9; g128 wg256x8a2c-k256/4 8.4 (r8)
    {5120, 5120, 16, P("wg256x16a2c-k256/4"), P("wg256x16a2c-k256/4")},  // pc wg256x16a2c-k256/4 7.5; g128 wg256x16a2c-k256/4 9.0 (r8)
    {5120, 5120, 32, P("wg256x32c/4"), P("wg256x32c-k256/4")},  // pc wg256x32c/4 8.4; g128 wg256x32c-k256/4 9.9 (r8)
    {5120, 5120, 64, P("wg128x64c-k256/2"), P("wg256x64c-k256/4")},  // pc wg128x64c-k256/2 9.7; g128 wg256x64c-k256/4 11.0 (r8)
    {5120, 5120, 128, P("wg128x128/2"), P("wg128x128/2")},  // r18: pc wg128x128/2 13.8; g128 wg128x128/2 14.5 (mean of two sweeps); was pc wg256x128c/4 14.4; g128 wg256x128c/4 15.3 (r8)
    {5120, 5120, 256, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 17.3; g128 wg128x128/1 19.8 (r8)
    {5120, 5120, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 29.3; g128 wg128x256/1 29.5 (r8)
    {27648, 5120, 1, P("wg256x8a2/1"), P("wg256x8a2c-k256/1")},  // pc wg256x8a2/1 18.2; g128 wg256x8a2c-k256/1 23.4 (r8)
    {27648, 5120, 16, P("wg256x16a2/1"), P("wg256x16a2c-k256/1")},  // pc wg256x16a2/1 19.0; g128 wg256x16a2c-k256/1 24.0 (r8)
    {27648, 5120, 32, P("wg256x32/1"), P("wg256x32c-k256/1")},  // pc wg256x32/1 19.9; g128 wg256x32c-k256/1 25.7 (r8)
    {27648, 5120, 64, P("wg256x64/1"), P("wg256x64/1")},  // pc wg256x64/1 22.6; g128 wg256x64/1 28.7 (r8)
    {27648, 5120, 128, P("wg256x128/1"), P("wg256x128/1")},  // pc wg256x128/1 31.8; g128 wg256x128/1 34.7 (r8)
    {27648, 5120, 256, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 58.8; g128 wg128x256/1 59.5 (r8)
    {27648, 5120, 512, P("wg128x128/1"), P("wg128x256/1")},  // pc wg128x128/1 112.8; g128 wg128x256/1 118.7 (r8)
    {5120, 13824, 1, P("wg256x8a2c-k256/4"), P("wg256x8/6")},  // pc wg256x8a2c-k256/4 12.2; g128 wg256x8/6 16.4 (r8)
    {5120, 13824, 16, P("wg256x16a2c-k256/4"), P("wg256x16/6")},  // r18: pc wg256x16a2c-k256/4 12.9; g128 wg256x16/6 15.9 (mean of two sweeps); was pc wg256x16a2c-k256/4 13.0; g128 wg256x16a2c-k256/4 16.9 (r8)
    {5120, 13824, 32, P("wg256x32c-k256/4"), P("wg256x32c-k256/4")},  // pc wg256x32c-k256/4 14.0; g128 wg256x32c-k256/4 17.8 (r8)
    {5120, 13824, 64, P("wg256x64c-k256/4"), P("wg256x64c-k256/4")},  // pc wg256x64c-k256/4 17.0; g128 wg256x64c-k256/4 20.0 (r8)
    {5120, 13824, 128, P("wg128x128/sk"), P("wg128x128/sk")},  // r18: pc wg128x128/sk 23.8; g128 wg128x128/sk 25.2 (mean of two sweeps); was pc wg256x128c/4 25.0; g128 wg256x128c/4 28.6 (r8)
    {5120, 13824, 256, P("wg128x128/sk"), P("wg128x128/sk")},  // wg128x128/sk: pc 34.1 (r10; /1 39.0), g128 37.1 (45.5)
    {5120, 13824, 512, P("wg128x128/sk"), P("wg128x256/sk")},  // r18: pc wg128x128/sk 59.1; g128 wg128x256/sk 60.2 (mean of two sweeps); was pc wg128x256/1 68.8; g128 wg128x256/1 70.1 (r8)
    {10240, 8192, 1, P("wg256x8/3"), P("wg256x8/3")},  // pc wg256x8/3 13.1; g128 wg256x8/3 16.4 (r8)
    {10240, 8192, 16, P("wg256x16/3"), P("wg256x16a2/3")},  // r18: pc wg256x16/3 13.1; g128 wg256x16a2/3 16.4 (mean of two sweeps); was pc wg256x16a2c-k256/2 14.5; g128 wg256x16a2/3 18.9 (r8)
    {10240, 8192, 32, P("wg256x32/3"), P("wg256x32/3")},  // r18: pc wg256x32/3 14.5; g128 wg256x32/3 17.2 (mean of two sweeps); was pc wg256x32c-k256/2 15.7; g128 wg256x32c-k256/2 20.2 (r8)
    {10240, 8192, 64, P("wg256x64c-k256/2"), P("wg256x64c-k256/2")},  // pc wg256x64c-k256/2 20.0; g128 wg256x64c-k256/2 23.4 (r8)
    {10240, 8192, 128, P("wg128x128/1"), P("wg128x128/sk")},  // r18: pc wg128x128/1 24.9; g128 wg128x128/sk 27.2 (mean of two sweeps); was pc wg128x128/1 25.6; g128 wg128x128/1 29.5 (r8)
    {10240, 8192, 256, P("wg128x128/sk"), P("wg128x256/1")},  // r18: pc wg128x128/sk 39.3; g128 wg128x256/1 42.5 (mean of two sweeps); was pc wg128x256/1 43.6; g128 wg128x256/1 44.5 (r8)
    {10240, 8192, 512, P("wg128x256/sk"), P("wg128x256/sk")},  // r18: pc wg128x256/sk 68.7; g128 wg128x256/sk 69.0 (mean of two sweeps); was pc wg128x128/1 73.6; g128 wg128x128/1 85.5 (r8)
    {8192, 8192, 1, P("wg256x8a2c-k256/3"), P("wg128x16c-k512/2")},  // pc wg256x8a2c-k256/3 11.5 (12.8 after a neighbor, r9; wg256x8/3 11.3, 14.3); g128 wg128x16c-k512/2 14.6 (r8)
    {8192, 8192, 16, P("wg256x16/3"), P("wg128x16c-k512/2")},  // r18: pc wg256x16/3 11.4; g128 wg128x16c-k512/2 14.8 (mean of two sweeps); was pc wg128x16c-k512/2 12.4; g128 wg128x16c-k512/2 14.7 (r8)
    {8192, 8192, 32, P("wg128x32c-k512/2"), P("wg128x32c-k512/2")},  // r23: pc wg128x32c-k512/2 12.4, 13.7 after a neighbor (was wg256x32/3 12.3, 15.9, r18); g128 wg128x32c-k512/2 13.7, 14.8 (was wg256x32/3 14.9, 18.3)
    {8192, 8192, 64, P("wg128x64c-k256/2"), P("wg128x64c-k256/2")},  // pc wg128x64c-k256/2 14.2; g128 wg128x64c-k256/2 16.4 (r8)
    {8192, 8192, 128, P("wg128x128/2"), P("wg128x128/2")},  // r18: pc wg128x128/2 18.6; g128 wg128x128/2 20.0 (mean of two sweeps); was pc wg256x64c-k256/2 20.9; g128 wg256x64c-k256/2 24.3 (r8)
    {8192, 8192, 256, P("wg128x128/1"), P("wg128x128/1")},  // pc wg128x128/1 26.4; g128 wg128x128/1 30.4 (r8)
    {8192, 8192, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 44.9; g128 wg128x256/1 45.9 (r8)
    {57344, 8192, 1, P("wg256x8/1"), P("wg256x16a2c-k256/1")},  // pc wg256x8/1 59.7; g128 wg256x16a2c-k256/1 69.0 (r8)
    {57344, 8192, 16, P("wg256x16a2/1"), P("wg256x16a2c-k256/1")},  // pc wg256x16a2/1 60.4; g128 wg256x16a2c-k256/1 70.2 (r8)
    {57344, 8192, 32, P("wg256x32/1"), P("wg256x32c-k256/1")},  // pc wg256x32/1 61.8; g128 wg256x32c-k256/1 74.6 (r8)
    {57344, 8192, 64, P("wg256x64/1"), P("wg256x64/1")},  // pc wg256x64/1 65.9; g128 wg256x64/1 83.2 (r8)
    {57344, 8192, 128, P("wg256x128/1"), P("wg256x128/1")},  // pc wg256x128/1 92.7; g128 wg256x128/1 102.9 (r8)
    {57344, 8192, 256, P("wg128x256/sk"), P("wg128x256/1")},  // r18: pc wg128x256/sk 164.3; g128 wg128x256/1 175.4 (mean of two sweeps); was pc wg128x128/1 170.9; g128 wg128x256/1 180.3 (r8)
    {57344, 8192, 512, P("wg128x256/1"), P("wg128x256/1")},  // pc wg128x256/1 296.0; g128 wg128x256/1 310.8 (r8)
    // Large m (round 9's sweep of the large tiles at m = 1024 / 4096 / 8192,
    // bench/results/2026-11-30-gemm-h200-r9.md): the rule's tile (128 x 256, or
    // 128 x 128 where it has fewer rounds) is within 4.1% of the best on every
    // row but these two, where the 256-channel tile reads the long-k
    // activations (117-235 MB, past the L2) half as often.
    {8192, 28672, 4096, P("wg256x128/1"), P("wg128x256/1")},  // pc wg256x128/1 1360.7 (wg128x256/1 1427.6); g128 wg128x256/1 1365.1
    {8192, 28672, 8192, P("wg256x128/1"), P("wg128x256/1")},  // pc wg256x128/1 2762.4 (wg128x256/1 3050.1); g128 wg128x256/1 3115.6
};

static_assert([] {
  for (const Entry& e : kTable)
    if (!w4a8_tile_is_wgmma(e.pc.tile) || !w4a8_tile_is_wgmma(e.g128.tile)) return false;
  return true;
}());

}  // namespace

int w4a8_m_bucket(int64_t m) {
  if (m <= 0) return 0;
  if (m <= 8) return 1;  // bucket 1 serves the decode batches up to 8
  for (const int b : kW4A8MBuckets)
    if (m <= b) return b;
  return 0;
}

std::optional<W4A8Choice> measured_w4a8_plan(int64_t m, int64_t n, int64_t k, bool g128, bool* overridden) {
  if (overridden) *overridden = false;
  const int bucket = w4a8_m_bucket(m);
  if (bucket == 0) return std::nullopt;
  for (const W4A8PlanOverride& o : w4a8_plan_overrides())  // QSERVE_W4A8_PLANS first
    if (o.n == n && o.k == k && o.bucket == bucket && o.g128 == g128) {
      if (overridden) *overridden = true;
      return o.choice;
    }
  for (const Entry& e : kTable)
    if (e.n == n && e.k == k && e.m == bucket) {
      const W4A8Choice c = g128 ? e.g128 : e.pc;
      // An entry is measured at its bucket's largest m. Above m = 128 (where
      // the time follows the MACs, not the weight bytes) it does not serve an
      // m whose token blocks it pads by over 20% more than there: the 128 x
      // 256 entries of bucket 512 at m = 320 compute 512 tokens, 1.6-2.4x
      // the time of 128 x 160 (round 3 of bench/results/2026-11-30-gemm-h200-
      // r11.md); the rule takes those (rounds 4-6 there: over m = 160-448 the
      // plans came within 2.2% of the fastest tile, against 15.3% with the
      // entries everywhere). Not the cluster tiles of up to 64 tokens
      // (w4a8_tile_is_small_cluster): their time follows the weight bytes
      // there, and the 256 x 64 entries of the down layers' bucket 256
      // measured fastest at m = 160-230 (round 5: at m = 200, 24.8 / 30.3 us
      // against 29.3 / 34.9 for the rule's plan).
      if (m > 128 && !w4a8_tile_is_small_cluster(c.tile)) {
        const int64_t bm = w4a8_tile_tokens(c.tile);
        const auto padded = [bm](int64_t t) { return static_cast<double>((t + bm - 1) / bm * bm) / t; };
        if (padded(m) > 1.2 * padded(bucket)) return std::nullopt;
      }
      return c;
    }
  return std::nullopt;
}

}  // namespace qserve::cuda
