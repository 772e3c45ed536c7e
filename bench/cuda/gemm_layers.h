// The layer shapes the W4A8 GEMM benchmarks time by default (host code only):
// Llama-3-8B and Llama-2-7B qkv / o / gate_up / down and the Llama-2-70B
// down layer, n output channels x k input channels.
#pragma once

#include <cstdint>

namespace qserve::bench {

struct GemmLayer {
  const char* model;
  const char* layer;
  int64_t n, k;
};

inline constexpr GemmLayer kGemmLayers[] = {
    {"llama3-8b", "qkv", 6144, 4096},     {"llama3-8b", "o", 4096, 4096},
    {"llama3-8b", "gate_up", 28672, 4096}, {"llama3-8b", "down", 4096, 14336},
    {"llama2-7b", "qkv", 12288, 4096},    {"llama2-7b", "o", 4096, 4096},
    {"llama2-7b", "gate_up", 22016, 4096}, {"llama2-7b", "down", 4096, 11008},
    {"70b", "down", 8192, 28672},
};

}  // namespace qserve::bench
