// GPTQ over the seven linears of a transformed block, in the order the block
// computes them (q/k/v, then o, then gate/up, then down), with three refinements
// of its inputs, targets and grid (docs/qoq-quantizer.md):
//
// - sequential (GPTQ's "true sequential"): each stage's H comes from the inputs
//   the block computes with the stages before it already quantized (o_proj's
//   from the attention of the quantized q/k/v, gate/up's from the residual after
//   the quantized attention, down_proj's from the quantized gate/up), one block
//   forward over the calibration input per stage after the first;
// - FP target (asymmetric calibration): the target of each linear is not its FP
//   weights on the quantized model's inputs but the FP model's outputs on the
//   same tokens (gptq_ls_target), so each layer also compensates the error its
//   input carries from every quantized layer before it.
// - clip search (GPTQ-aware clipping, g128): GPTQ also runs on grids from
//   uniformly clipped targets (ratios 1.0 to 0.8) and, per output row (rows are
//   independent in GPTQ), the grid with the least output error on the
//   calibration rows is kept, the searched clip (chosen for round to nearest)
//   among them.
//
// None changes the grid's arithmetic (a clipped weights' round-to-nearest grid), the
// format or the run time: only which codes GPTQ picks.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/calib_forward.h"
#include "quant/quant_linear.h"
#include "quant/quantizer.h"

namespace qserve::quant {

// w: the transformed, clipped block (sets the grid); targets: the same before clipping
// (the FP function of the block). taps: the pass that measured the transforms (rows in
// the transformed basis); h_in: that pass's input [n_seq * seqlen, hidden]. fp_taps: the
// FP model's inputs of the same rows (keep_every as taps), or null for FP-weight targets.
// opt.gptq_sequential picks the stage inputs (from h_in) over the taps' rows.
std::vector<QuantizedLinear> quantize_block_staged(const LlamaShape& shape, const BlockWeights& w,
                                                   const BlockWeights& targets, const BlockTaps& taps,
                                                   const std::vector<float>& h_in, int64_t n_seq, int64_t seqlen,
                                                   const BlockTaps* fp_taps, const QuantizeOptions& opt,
                                                   LayerReport* report);

}  // namespace qserve::quant
