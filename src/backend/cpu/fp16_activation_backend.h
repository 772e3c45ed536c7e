// The CPU reference with the contract's FP16 activations (qoq-spec section 1:
// each block takes FP16 in and gives FP16 out): a Backend that forwards every
// op to an inner backend (the FP32 reference, with or without a KV4 / KV8
// cache) and rounds each float activation it stores to fp16 at the points
// where the CUDA backend stores fp16: linear outputs (logits included), the
// residual stream after each add, norm and SiLU outputs of the float
// precisions, q after RoPE, attention outputs, embeddings. Arithmetic inside
// each op stays FP32, as inside each CUDA kernel.
//
// Device name "cpu-fp16" (engine/backend_factory.h). It is the oracle for the
// GPU's quantized precisions: fp16 rounding moves INT8 activation codes and
// KV codes across rounding boundaries, and a quantized model amplifies such
// moves, so the GPU is compared with the CPU that rounds where it rounds.
//
// "cpu-fp16:POINTS" rounds at the listed points only (Fp16Points below), to
// find which roundings move a quantized model's tokens
// (docs/cuda-backend.md, "Which fp16 roundings matter").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"

namespace qserve::cpu {

// The points where an activation can be rounded to fp16, one bit each.
// Linear outputs are told apart by the order in which the model makes its
// linears (LlamaModel::create: lm_head, then q, k, v, o, gate, up, down of
// each layer in turn).
enum class Fp16Point : uint32_t {
  kEmbed = 1u << 0,     // embedding rows
  kResidual = 1u << 1,  // the residual stream after each add
  kNorm = 1u << 2,      // RMSNorm outputs of float precisions (the lm_head input of quantized ones)
  kQ = 1u << 3,         // q projection outputs (before RoPE)
  kK = 1u << 4,         // k projection outputs (before RoPE and KV quantization)
  kV = 1u << 5,         // v projection outputs (before KV quantization)
  kQRope = 1u << 6,     // q after RoPE (the attention's input)
  kAttn = 1u << 7,      // attention outputs (the o projection's input)
  kO = 1u << 8,         // o projection outputs (added to the residual)
  kGate = 1u << 9,      // gate projection outputs
  kUp = 1u << 10,       // up projection outputs
  kSilu = 1u << 11,     // SiLU(gate) * up of float precisions
  kDown = 1u << 12,     // down projection outputs (added to the residual)
  kLogits = 1u << 13,   // lm_head outputs
};

struct Fp16Points {
  uint32_t bits = 0;
  // 0: round to fp16. 1..23: round to that many explicit mantissa bits with
  // the FP32 exponent range instead (fp16 has 10, bf16 7): how the agreement
  // scales with the size of the rounding error.
  int mantissa_bits = 0;
  static Fp16Points all() { return {(1u << 14) - 1}; }
  bool has(Fp16Point p) const { return (bits & static_cast<uint32_t>(p)) != 0; }
};

// "all", "none", or a comma list of point names applied in order to an empty
// set: "name" adds a point, "-name" removes it, "all" adds every point
// ("all,-k,-q" = every point but k and q). Names: embed, residual, norm, q, k,
// v, q_rope, attn, o, gate, up, silu, down, logits; "mantissa=N" sets
// mantissa_bits. Errors: kInvalidArgument naming the unknown point.
Fp16Points parse_fp16_points(std::string_view spec);
// The canonical comma list of a set ("all" / "none" at the ends).
std::string fp16_points_name(Fp16Points points);

std::unique_ptr<Backend> make_fp16_activation_backend(std::unique_ptr<Backend> inner,
                                                      Fp16Points points = Fp16Points::all());

// Rounds every value of an F32 tensor to the nearest fp16 (ties to even); other dtypes untouched.
void round_activations_to_fp16(Tensor& t);
// Rounds x to `bits` explicit mantissa bits (1..23), ties to even, FP32 exponent range.
float round_to_mantissa(float x, int bits);

}  // namespace qserve::cpu
