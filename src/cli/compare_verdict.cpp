#include "cli/compare_verdict.h"

#include <algorithm>
#include <cmath>

namespace qserve::cli {

CompareVerdict judge_agreement(const AgreementFigures& device, const std::vector<AgreementFigures>& controls) {
  CompareVerdict v;
  if (controls.empty()) {
    v.basis = "fixed thresholds";
    v.top1_floor = kFixedTop1;
    v.ppl_limit = kFixedPplLimit;
  } else {
    v.basis = "controls";
    double lowest = 1.0, widest = 0.0;
    for (const AgreementFigures& c : controls) {
      lowest = std::min(lowest, c.top1);
      widest = std::max(widest, std::fabs(c.ppl_rel_diff));
    }
    const double n = static_cast<double>(std::max<int64_t>(device.positions, 1));
    v.top1_floor = lowest - 2.0 * std::sqrt(lowest * (1.0 - lowest) / n);
    v.ppl_limit = std::max(kFixedPplLimit, widest);
  }
  v.top1_pass = device.top1 >= v.top1_floor;
  v.ppl_pass = std::fabs(device.ppl_rel_diff) <= v.ppl_limit;
  v.pass = v.top1_pass && v.ppl_pass;
  return v;
}

}  // namespace qserve::cli
