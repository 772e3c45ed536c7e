#include <gtest/gtest.h>

#include <thread>

#include "qserve/engine.h"

namespace qserve {
namespace {

TEST(RequestStream, DeliversInOrderThenEnds) {
  RequestStream stream(7);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      RequestOutput out;
      out.request_id = 7;
      out.token_ids = {i};
      out.finished = (i == 99);
      out.finish_reason = out.finished ? FinishReason::kLength : FinishReason::kNone;
      stream.push(std::move(out));
    }
  });
  int expected = 0;
  while (auto out = stream.next()) {
    ASSERT_EQ(out->token_ids.size(), 1u);
    EXPECT_EQ(out->token_ids[0], expected++);
  }
  producer.join();
  EXPECT_EQ(expected, 100);
  EXPECT_TRUE(stream.finished());
  EXPECT_FALSE(stream.next().has_value());
}

TEST(RequestStream, NextForTimesOut) {
  RequestStream stream(1);
  EXPECT_FALSE(stream.next_for(std::chrono::milliseconds(5)).has_value());
  EXPECT_FALSE(stream.finished());
}

TEST(RequestStream, CancelCallsBoundFunctionUntilFinished) {
  RequestStream stream(1);
  int calls = 0;
  stream.bind_cancel([&] { ++calls; });
  stream.cancel();
  EXPECT_EQ(calls, 1);
  RequestOutput out;
  out.finished = true;
  out.finish_reason = FinishReason::kCancelled;
  stream.push(out);
  stream.cancel();  // already finished: no call
  EXPECT_EQ(calls, 1);
  EXPECT_STREQ(finish_reason_name(FinishReason::kCancelled), "cancelled");
}

}  // namespace
}  // namespace qserve
