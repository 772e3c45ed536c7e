// QoQ step 1 (spec section 6): fold RMSNorm gains into the linear layers that
// read the normalized stream, so that the norm has no per-channel gain left and
// an orthogonal rotation of the residual stream commutes with it:
//   RMSNorm(x) * g  then  W   ==   RMSNorm(x)  then  W diag(g).
#pragma once

#include "quant/llama_weights.h"

namespace qserve::quant {

// q/k/v columns *= attn_norm, gate/up columns *= mlp_norm; both gains become 1.
void fold_block_norms(BlockWeights& w);

// lm_head columns *= final_norm; final_norm becomes 1. The lm_head stops being
// a copy of the embedding: a tied model comes out untied (docs/qoq-quantizer.md).
void fold_final_norm(OuterWeights& w);

// W[:, i] *= scale[i] for a [out, in] matrix.
void scale_columns(Matrix& w, const std::vector<float>& scale);
// W[o, :] *= scale[o].
void scale_rows(Matrix& w, const std::vector<float>& scale);

}  // namespace qserve::quant
