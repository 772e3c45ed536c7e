// Which backend a model runs on: one place that turns a device name and a KV
// cache format into a Backend, so that every loader (float checkpoints,
// quantized checkpoints, dummy weights) and every subcommand picks devices
// the same way.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "quant/kv_format.h"

namespace qserve {

// device: "cpu" (the FP32 reference, SIMD matmuls), "cpu-fp16" (the same with
// the contract's FP16 activations: backend/cpu/fp16_activation_backend.h, the
// oracle of the GPU's quantized precisions), "cpu-fp16:POINTS" (rounding at
// the listed points only: cpu::parse_fp16_points) or "cuda" (device 0).
// kv: the KV page format of the quantized-KV precisions (KV4 / KV8); nullopt
// keeps the backend's float pages (FP32 on the CPU, FP16 on CUDA).
// Errors: kUnsupported for an unknown device or a device this build lacks.
// The errors of make_backend for a device name, without making a backend.
void check_device_name(const std::string& device);

std::unique_ptr<Backend> make_backend(const std::string& device, std::optional<KvDtype> kv = std::nullopt);

// Replaces the CUDA W4A8 GEMM's plan overrides in force (QSERVE_W4A8_PLANS
// syntax; empty: the measured table) for A/B runs on one loaded model; drop the
// model's captured graphs after it. check_w4a8_plan_overrides: the same
// errors, nothing changed. Errors: kInvalidArgument for a malformed spec,
// kUnsupported for a non-empty spec in a build without CUDA.
void set_w4a8_plan_overrides(const std::string& spec);
void check_w4a8_plan_overrides(const std::string& spec);

// Sets one of the CUDA W4A8 GEMM's kernel-form switches ("NAME=0|1",
// src/backend/cuda/gemm_w4a8_switches.h) for A/B runs on one loaded model;
// drop the model's captured graphs after it. check_w4a8_switch: the same
// errors, nothing set; reset_w4a8_switches: back to the environment's values.
// Errors: kInvalidArgument for an unknown switch or a value other than 0 / 1,
// kUnsupported in a build without CUDA.
void set_w4a8_switch(const std::string& assignment);
void check_w4a8_switch(const std::string& assignment);
void reset_w4a8_switches();

}  // namespace qserve
