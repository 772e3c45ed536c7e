// The traffic of the engine soak tests (tests/unit/test_engine_soak.cpp on a
// fake model, tests/ops/test_engine_soak_model.cpp on real ones): random
// prompts and output lengths, greedy and seeded sampling, random
// cancellations, submitted from several client threads at once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "qserve/engine.h"

namespace qserve::test {

struct SoakCase {
  Request request;
  int cancel_after = -1;  // >= 0: cancel once this many tokens arrived (0: right after submit)
};

// n requests: prompts of 1..60 ids in [0, token_range), 1..min(80, max_len -
// prompt) output tokens, one in five sampled (temperature 0.7, top-k 50, own
// seed), one in seven cancelled after 0..19 tokens. eos_coin: half of them
// may stop early at EOS, the others ignore it; else all ignore EOS.
inline std::vector<SoakCase> make_soak_cases(int n, int token_range, int max_len, uint32_t seed, bool eos_coin) {
  std::mt19937 rng(seed);
  std::vector<SoakCase> cases(n);
  for (auto& c : cases) {
    const int prompt_len = 1 + static_cast<int>(rng() % 60);
    Request& r = c.request;
    for (int t = 0; t < prompt_len; ++t) r.prompt_token_ids.push_back(static_cast<int32_t>(rng() % token_range));
    r.params.max_tokens = 1 + static_cast<int>(rng() % std::min(80, max_len - prompt_len));
    r.params.ignore_eos = eos_coin ? rng() % 2 == 0 : true;
    if (rng() % 5 == 0) {
      r.params.temperature = 0.7f;
      r.params.top_k = 50;
      r.params.seed = rng();
    } else {
      r.params.temperature = 0;
    }
    if (rng() % 7 == 0) c.cancel_after = static_cast<int>(rng() % 20);
  }
  return cases;
}

// What each request got in the crowd: its tokens, how it ended, and how many
// final outputs it received (exactly one is right).
struct CrowdRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> reason;
  std::vector<int> finals;
};

// Runs every case on `engine` from `threads` client threads, each keeping up
// to `in_flight` requests live and cancelling as the case says.
inline CrowdRun run_in_a_crowd(Engine& engine, const std::vector<SoakCase>& cases, int threads = 8,
                               int in_flight = 4) {
  const int n = static_cast<int>(cases.size());
  CrowdRun run{std::vector<std::vector<int32_t>>(n), std::vector<FinishReason>(n, FinishReason::kNone),
               std::vector<int>(n, 0)};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      std::vector<std::pair<int, std::shared_ptr<RequestStream>>> live;
      int next = t;
      while (next < n || !live.empty()) {
        while (next < n && static_cast<int>(live.size()) < in_flight) {
          live.emplace_back(next, engine.submit(cases[next].request));
          if (cases[next].cancel_after == 0) live.back().second->cancel();
          next += threads;
        }
        for (size_t k = 0; k < live.size();) {
          auto& [i, stream] = live[k];
          auto out = stream->next_for(std::chrono::milliseconds(1));
          if (out) {
            run.tokens[i].insert(run.tokens[i].end(), out->token_ids.begin(), out->token_ids.end());
            if (cases[i].cancel_after > 0 && out->usage.completion_tokens >= cases[i].cancel_after) stream->cancel();
            if (out->finished) {
              run.reason[i] = out->finish_reason;
              ++run.finals[i];
            }
          }
          if (stream->finished()) {
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          } else {
            ++k;
          }
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  return run;
}

}  // namespace qserve::test
