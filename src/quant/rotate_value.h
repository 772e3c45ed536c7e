// Value rotation: an orthogonal Hadamard R [head_dim, head_dim] applied inside
// every KV head to the values and undone in o_proj (QuaRot's offline value
// rotation; an extension of spec section 6, docs/qoq-quantizer.md):
//   v_proj rows of KV head h   V_h <- R^T V_h      (v_h <- v_h R)
//   o_proj columns of query head j reading KV head h = j / group   O_j <- O_j R
// Attention mixes value rows with scalar weights, so the attention output of
// head j becomes a_j R and a_j R (O_j R)^T = a_j O_j^T: the function is
// unchanged. The per-token, per-head KV4 values and the per-token INT8 o_proj
// inputs see the head's channels spread evenly (no outlier channel).
// RoPE acts on keys only, so nothing here touches q/k.
#pragma once

#include <cstdint>

#include "quant/llama_weights.h"

namespace qserve::quant {

// Applies the rotation (Hadamard of order head_dim with signs from `seed`) to w.v and w.o.
void rotate_value_heads(const LlamaShape& shape, BlockWeights& w, uint64_t seed = 0);

}  // namespace qserve::quant
