// GPTQ-style error compensation (Frantar et al., "GPTQ", 2023; spec section 6,
// step 7; DeepCompressor's QoQ configs turn it on).
//
// For a linear layer Y = X W^T with calibration inputs X [t, k], the layer
// output error of quantized weights is sum_o (W_o - Wq_o) H (W_o - Wq_o)^T with
// H = X^T X / t. GPTQ quantizes the input columns one at a time, left to right,
// and moves each column's rounding error onto the columns not yet quantized
// (i, j are positions in the processing order):
//   e_i = (w_i - q(w_i)) / U[i, i],   w_j -= e_i * U[i, j]  for j > i,
// where U is the upper Cholesky factor of H^-1 (H^-1 = U^T U). Output rows are
// independent (they share U), so rows run in parallel.
//
// The quantization grid is fixed beforehand and is exactly the format's round-
// to-nearest grid of the (clipped) weights: level-1 scale, level-2 scale and
// zero of each group (g128), per-channel scale and zero, W4A16 group scale and
// zero, W8 scale. GPTQ only chooses the codes, each by the format's own
// rounding of the error-updated weight (g128: to the INT8 level, then to the
// level-2 step), clamped in each g128 group to [min code, max code] of round to
// nearest there, so that every level-2 value stays inside the range the
// protective range guarantees, [-128, 127]. Columns go in descending H[i, i]
// ("act order") by default; with a fixed grid the order needs nothing at run time.
// So a GPTQ checkpoint has exactly the layout and value ranges of a round-to-
// nearest one, and clipping (which sets the grid) composes with GPTQ (which
// targets the unclipped weights).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/llama_weights.h"
#include "quant/quant_linear.h"

namespace qserve::quant {

struct GptqOptions {
  double damp = 0.01;     // added to H's diagonal: damp * mean(diag H) (raised x10 until Cholesky succeeds)
  bool act_order = true;  // quantize columns in descending H[i, i] (the grid is fixed, so any order keeps the format)
  // Row weighting of H (0: off). A row whose squared norm exceeds row_cap times the
  // median squared norm (attention-sink tokens, orders of magnitude above the others)
  // is scaled down to that bound, so that it still counts but no longer dominates H.
  double row_cap = 0;
};

// U [k, k] row-major upper triangular with Hp^-1 = U^T U, Hp = P (X^T X / rows + damp) P^T
// the Hessian with rows and columns in the processing order perm (Hp[a, b] = H[perm[a], perm[b]]).
struct GptqFactor {
  int64_t k = 0;
  std::vector<int64_t> perm;  // [k] column processed at each step (identity without act_order)
  std::vector<float> u;
  double damp_used = 0;  // the relative damping that made H positive definite
};

// x: [rows, k] calibration inputs of the layer (rows >= 1). Channels never
// active (H[i, i] == 0) get H[i, i] = 1 (their weights still quantize; no error
// flows through them).
GptqFactor gptq_factor(const Matrix& x, const GptqOptions& opt = {});

// Rewrites the codes of q (any format but kF16, whose call is a no-op) by GPTQ
// for the target weights w [n, k]; q's scales and zeros are kept.
void gptq_requantize(QuantizedLinear& q, const Matrix& w, const GptqFactor& f);

// Convenience: quantize_linear(format, grid_weights, group) then gptq_requantize
// towards w. grid_weights are the (clipped) weights that set the grid; pass w
// itself when not clipping.
QuantizedLinear gptq_quantize_linear(WeightFormat format, const Matrix& w, const Matrix& grid_weights, int64_t group,
                                     const GptqFactor& f);

// The target of asymmetric calibration: the weights W* whose outputs on the quantized
// model's inputs x_q [t, k] best reproduce the FP model's outputs x_ref W^T (x_ref [t, k],
// the same tokens' inputs in the FP model), with f's damping as a ridge towards W:
//   W* = argmin ||x_q V^T - x_ref W^T||^2 / t + damp ||V - W||^2
//      = W + W G^T Hd^-1,   G = x_q^T (x_ref - x_q) / t,   Hd = x_q^T x_q / t + damp.
// f must be gptq_factor(x_q) (its U gives Hd^-1). GPTQ towards W* with f then minimizes
// ||x_q Wq^T - x_ref W^T|| (up to a constant): each layer also compensates the error its
// input already carries from the quantized layers before it.
Matrix gptq_ls_target(const Matrix& w, const Matrix& x_q, const Matrix& x_ref, const GptqFactor& f);
// The same in two steps, for linears that share their input: S^T = Hd^-1 G [k, k] row-major
// (once per input), then W* = W + W S for each linear.
std::vector<float> gptq_ls_shift(const Matrix& x_q, const Matrix& x_ref, const GptqFactor& f);
Matrix gptq_apply_shift(const Matrix& w, const std::vector<float>& shift_t);

// sum_t || X_t (W - Wq)^T ||^2 / rows: the mean squared layer output error of q against w on x.
double layer_output_error(const Matrix& x, const Matrix& w, const QuantizedLinear& q);

}  // namespace qserve::quant
