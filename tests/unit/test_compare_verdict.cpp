// The acceptance verdict of `qserve eval compare` (cli/compare_verdict.h).
#include <cmath>

#include <gtest/gtest.h>

#include "cli/compare_verdict.h"

namespace qserve::cli {
namespace {

AgreementFigures figures(const char* device, int64_t positions, double top1, double ppl_rel_diff) {
  return AgreementFigures{device, positions, top1, ppl_rel_diff};
}

TEST(CompareVerdict, FixedThresholdsWithoutControls) {
  const CompareVerdict ok = judge_agreement(figures("cuda", 2048, 0.9946, 0.0003), {});
  EXPECT_TRUE(ok.pass);
  EXPECT_EQ(ok.basis, "fixed thresholds");
  EXPECT_DOUBLE_EQ(ok.top1_floor, kFixedTop1);
  const CompareVerdict low = judge_agreement(figures("cuda", 2048, 0.985, 0.0003), {});
  EXPECT_FALSE(low.pass);
  EXPECT_FALSE(low.top1_pass);
  EXPECT_TRUE(low.ppl_pass);
  const CompareVerdict far = judge_agreement(figures("cuda", 2048, 0.995, -0.006), {});
  EXPECT_FALSE(far.pass);
  EXPECT_FALSE(far.ppl_pass);
}

TEST(CompareVerdict, TopOneFloorIsTheLowestControlMinusTwoSigma) {
  const std::vector<AgreementFigures> controls = {figures("cpu-fp16", 16384, 0.776, -0.004),
                                                   figures("cpu-fp16:all,mantissa=22", 16384, 0.815, -0.0044)};
  const double sigma = std::sqrt(0.776 * 0.224 / 16384.0);
  const CompareVerdict at = judge_agreement(figures("cuda", 16384, 0.776 - 1.9 * sigma, -0.003), controls);
  EXPECT_TRUE(at.top1_pass);
  EXPECT_NEAR(at.top1_floor, 0.776 - 2 * sigma, 1e-12);
  EXPECT_EQ(at.basis, "controls");
  const CompareVerdict below = judge_agreement(figures("cuda", 16384, 0.776 - 2.1 * sigma, -0.003), controls);
  EXPECT_FALSE(below.top1_pass);
  EXPECT_FALSE(below.pass);
}

TEST(CompareVerdict, PerplexityLimitWidensToTheControlsSpread) {
  const std::vector<AgreementFigures> wide = {figures("cpu-fp16", 1024, 0.81, 0.012)};
  EXPECT_DOUBLE_EQ(judge_agreement(figures("cuda", 1024, 0.80, -0.011), wide).ppl_limit, 0.012);
  EXPECT_TRUE(judge_agreement(figures("cuda", 1024, 0.80, -0.011), wide).ppl_pass);
  EXPECT_FALSE(judge_agreement(figures("cuda", 1024, 0.80, -0.013), wide).ppl_pass);
  // Controls closer than 0.5% keep the 0.5% limit: it never tightens below the fixed one.
  const std::vector<AgreementFigures> tight = {figures("cpu-fp16", 1024, 0.81, 0.001)};
  EXPECT_DOUBLE_EQ(judge_agreement(figures("cuda", 1024, 0.80, 0.004), tight).ppl_limit, kFixedPplLimit);
  EXPECT_TRUE(judge_agreement(figures("cuda", 1024, 0.80, 0.004), tight).pass);
}

}  // namespace
}  // namespace qserve::cli
