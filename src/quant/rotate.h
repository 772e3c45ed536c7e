// QoQ step 2 (spec section 6): rotate the residual stream by an orthogonal Q
// (quant/hadamard.h). With the norm gains folded (quant/fold_norm.h),
// RMSNorm(x Q) = RMSNorm(x) Q, so the model computes the same function when
//   embedding rows      E <- E Q
//   input modules       W <- W Q      (q/k/v, gate/up, lm_head: they read the stream)
//   output modules      W <- Q^T W    (o, down: they write the stream)
// Requires the gains to be folded first (QS_CHECK).
#pragma once

#include "quant/hadamard.h"
#include "quant/llama_weights.h"

namespace qserve::quant {

void rotate_block(const Rotation& q, BlockWeights& w);
void rotate_embedding(const Rotation& q, Matrix& embed);  // [vocab, hidden]
void rotate_lm_head(const Rotation& q, Matrix& lm_head);  // [vocab, hidden]

}  // namespace qserve::quant
