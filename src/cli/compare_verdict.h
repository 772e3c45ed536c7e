// The acceptance verdict of `qserve eval compare --control D` (docs/cuda-backend.md,
// "Why 99% top-1 agreement is out of reach on quantized checkpoints").
//
// On a quantized checkpoint any arithmetic that is not bit-identical to the
// reference (even one fp32 ulp before a quantizer) moves the top-1 agreement
// to a floor set by the model's quantization noise (~80% at KV4, ~95% at KV8),
// so a fixed agreement threshold judges the checkpoint, not the device. The
// verdict judges the device against control runs instead: the CPU reference
// itself, perturbed (`cpu-fp16`, `cpu-fp16:all,mantissa=22`), compared with
// the same unperturbed reference run.
//   - top-1: the device's agreement is at least the lowest control's minus
//     two binomial standard deviations of an agreement rate over the
//     device's positions (sqrt(p (1 - p) / N));
//   - perplexity: |device / reference - 1| at most max(0.5%, the largest
//     control's |difference|).
// Without controls the fixed thresholds apply (top-1 >= 99%, ppl within 0.5%),
// the criterion of unquantized checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::cli {

// One teacher-forced comparison against the reference.
struct AgreementFigures {
  std::string device;
  int64_t positions = 0;
  double top1 = 0;           // fraction of positions with the reference's top-1 token
  double ppl_rel_diff = 0;   // ppl_device / ppl_reference - 1
};

struct CompareVerdict {
  bool pass = false;
  bool top1_pass = false, ppl_pass = false;
  double top1_floor = 0;  // the device's agreement must be >= this
  double ppl_limit = 0;   // |ppl_rel_diff| must be <= this
  std::string basis;      // "controls" or "fixed thresholds"
};

inline constexpr double kFixedTop1 = 0.99;
inline constexpr double kFixedPplLimit = 0.005;

CompareVerdict judge_agreement(const AgreementFigures& device, const std::vector<AgreementFigures>& controls);

}  // namespace qserve::cli
