#include "server/metrics.h"

#include <fmt/format.h>

namespace qserve::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help, const std::string& labels) const {
  std::lock_guard lock(mutex_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, cumulative);
  std::string l = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, l, sum_, name, l, count_);
  return out;
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0}),
      tpot_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0}) {}

void ServerMetrics::record_http(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++http_[{endpoint, status}];
}

void ServerMetrics::record_finished(FinishReason reason, const RequestTimings& t, int completion_tokens) {
  {
    std::lock_guard lock(mutex_);
    ++finished_[finish_reason_name(reason)];
  }
  if (completion_tokens > 0) ttft_.observe(t.ttft_s);
  if (completion_tokens > 1) tpot_.observe(t.mean_tpot_s);
  e2e_.observe(t.e2e_s);
}

void ServerMetrics::record_cancelled() {
  std::lock_guard lock(mutex_);
  ++finished_[finish_reason_name(FinishReason::kCancelled)];
}

std::string ServerMetrics::render(const EngineStats& s, const std::string& model_name) const {
  std::string m = fmt::format("model_name=\"{}\"", model_name);
  std::string out;
  auto gauge = [&](const char* name, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, m, value);
  };
  auto counter = [&](const char* name, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, m, value);
  };
  gauge("qserve_num_requests_running", "Sequences holding KV cache pages.", s.num_running);
  gauge("qserve_num_requests_waiting", "Requests accepted and waiting to be scheduled.", s.num_waiting);
  gauge("qserve_kv_cache_usage_ratio", "Fraction of KV cache pages in use (0-1).", s.kv_cache_usage);
  gauge("qserve_kv_cache_pages_total", "KV cache pages.", s.kv_pages_total);
  gauge("qserve_kv_cache_pages_free", "Free KV cache pages.", s.kv_pages_free);
  counter("qserve_prompt_tokens_total", "Prompt tokens admitted.", s.prompt_tokens);
  counter("qserve_generation_tokens_total", "Generated tokens.", s.generation_tokens);
  counter("qserve_num_preemptions_total", "Sequences preempted (recomputed later).", s.num_preemptions);
  counter("qserve_engine_requests_rejected_total", "Requests the engine refused at submission.", s.requests_rejected);
  {
    std::lock_guard lock(mutex_);
    out += "# HELP qserve_http_requests_total HTTP requests by endpoint and status code.\n"
           "# TYPE qserve_http_requests_total counter\n";
    for (const auto& [key, n] : http_)
      out += fmt::format("qserve_http_requests_total{{{},endpoint=\"{}\",status=\"{}\"}} {}\n", m, key.first,
                         key.second, n);
    out += "# HELP qserve_request_finished_total Generation requests finished, by reason.\n"
           "# TYPE qserve_request_finished_total counter\n";
    for (const auto& [reason, n] : finished_)
      out += fmt::format("qserve_request_finished_total{{{},finished_reason=\"{}\"}} {}\n", m, reason, n);
  }
  out += ttft_.render("qserve_time_to_first_token_seconds", "Time to first token.", m);
  out += tpot_.render("qserve_time_per_output_token_seconds", "Mean time per output token after the first.", m);
  out += e2e_.render("qserve_e2e_request_latency_seconds", "End-to-end request latency.", m);
  return out;
}

}  // namespace qserve::server
