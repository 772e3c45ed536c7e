// KV4 / KV8 caches on the CPU backend (docs/qoq-spec.md section 5): a Backend
// that forwards every op to an inner backend (the FP32 reference), except that
// each new token's K (after RoPE) and V are quantized per token and per KV head
// with the shared arithmetic of quant/kv_format.h (fp16 scale and zero,
// asymmetric, round half to even) before they are stored. The FP32 pages then
// hold exactly the dequantized values xhat = (q - zero) * scale that a packed
// KV4 / KV8 page yields (docs/kv-cache-layout.md), so attention sees the
// numbers of the contract; the memory saving of packed pages is the CUDA
// backend's (and paged_attention_cpu's) business, not this oracle's.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "quant/kv_format.h"

namespace qserve::cpu {

std::unique_ptr<Backend> make_kv_quant_backend(std::unique_ptr<Backend> inner, KvDtype dtype);

// Replaces each [head_dim] vector of x [rows * heads, head_dim] f32 by its
// quantize-dequantize image (values rounded to fp16 first, as the cache writer sees them).
void kv_fake_quantize(float* x, int64_t vectors, int64_t head_dim, KvDtype dtype);

}  // namespace qserve::cpu
