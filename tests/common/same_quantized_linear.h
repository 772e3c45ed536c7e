// Two quantized layers equal byte for byte: every array of every format
// (the unused formats' arrays empty on both sides), n, k and group.
#pragma once

#include <gtest/gtest.h>

#include "quant/quant_linear.h"

namespace qserve::test {

inline void expect_same_linear(const quant::QuantizedLinear& a, const quant::QuantizedLinear& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.f16, b.f16);
  EXPECT_EQ(a.g128.n, b.g128.n);
  EXPECT_EQ(a.g128.qweight, b.g128.qweight);
  EXPECT_EQ(a.g128.s1, b.g128.s1);
  EXPECT_EQ(a.g128.s2, b.g128.s2);
  EXPECT_EQ(a.g128.zero, b.g128.zero);
  EXPECT_EQ(a.w4pc.n, b.w4pc.n);
  EXPECT_EQ(a.w4pc.qweight, b.w4pc.qweight);
  EXPECT_EQ(a.w4pc.scale, b.w4pc.scale);
  EXPECT_EQ(a.w4pc.zero, b.w4pc.zero);
  EXPECT_EQ(a.w8.n, b.w8.n);
  EXPECT_EQ(a.w8.q, b.w8.q);
  EXPECT_EQ(a.w8.scale, b.w8.scale);
  EXPECT_EQ(a.w4a16.n, b.w4a16.n);
  EXPECT_EQ(a.w4a16.qweight, b.w4a16.qweight);
  EXPECT_EQ(a.w4a16.scale, b.w4a16.scale);
  EXPECT_EQ(a.w4a16.zero, b.w4a16.zero);
}

}  // namespace qserve::test
