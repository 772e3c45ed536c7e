// Prometheus text-format metrics of the server: HTTP requests by endpoint and
// status, finished requests by reason, TTFT / TPOT / end-to-end latency
// histograms, plus the engine's gauges and token counters (EngineStats) read
// at scrape time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "qserve/engine.h"

namespace qserve::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // `name`_bucket{le=...}, `name`_sum, `name`_count lines (caller holds no lock).
  std::string render(const std::string& name, const std::string& help, const std::string& labels) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void record_http(const std::string& endpoint, int status);
  void record_finished(FinishReason reason, const RequestTimings& timings, int completion_tokens);
  // A request cancelled because its client went away (its final output is not awaited).
  void record_cancelled();
  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> http_;  // (endpoint, status) -> count
  std::map<std::string, uint64_t> finished_;              // finish reason -> count
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace qserve::server
