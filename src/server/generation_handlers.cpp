// POST /v1/completions and /v1/chat/completions: parse, apply the chat
// template, fan out the choices, then stream (SSE) or collect the outputs.
#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "core/logging.h"
#include "server/generation.h"
#include "server/openai_format.h"
#include "server/openai_server.h"

namespace qserve::server {

// Everything one accepted generation request needs after its handler returned:
// it lives in the stream producer, on the connection's thread.
class GenerationResponder {
 public:
  GenerationResponder(OpenAIServer& server, bool chat, const CommonRequest& common, int num_prompts)
      : server_(server), gen_(server.engine_), chat_(chat), common_(common) {
    static std::atomic<uint64_t> salt{std::random_device{}()};
    id_ = fmt::format("{}-{:016x}", chat ? "chatcmpl" : "cmpl",
                      salt.fetch_add(0x9E3779B97F4A7C15ull) ^ server.next_id_.fetch_add(1));
    created_ = static_cast<int64_t>(std::time(nullptr));
    results_.resize(static_cast<size_t>(common.n * num_prompts));
  }
  ~GenerationResponder() { release(); }

  Generation& generation() { return gen_; }
  bool want_logprobs() const { return common_.params.logprobs >= 0; }

  void run(StreamSink& sink) {
    try {
      if (common_.stream) stream(sink);
      else collect(sink);
    } catch (const std::exception& e) {  // never escapes to the HTTP layer
      spdlog::error("generation {} failed: {}", id_, e.what());
    }
    if (!gen_.done()) {
      gen_.cancel();
      for (const auto& r : results_)
        if (r.finish_reason == FinishReason::kNone) server_.metrics_.record_cancelled();
    }
    release();  // the response is written: no longer in flight (SIGTERM may now finish)
  }

 private:
  TokenText token_text() {
    return [this](int32_t id) { return server_.token_text(id); };
  }

  // Folds one output into its choice; true when it is the final one.
  bool absorb(const IndexedOutput& o) {
    ChoiceResult& r = results_[static_cast<size_t>(o.index)];
    r.text += o.output.text;
    r.logprobs.insert(r.logprobs.end(), o.output.logprobs.begin(), o.output.logprobs.end());
    r.usage = o.output.usage;
    if (o.output.finished) {
      r.finish_reason = o.output.finish_reason;
      r.error = o.output.error;
      r.timings = o.output.timings;
      server_.metrics_.record_finished(r.finish_reason, r.timings, r.usage.completion_tokens);
    }
    return o.output.finished;
  }

  Json usage() const {
    int prompt = 0, completion = 0;
    for (size_t i = 0; i < results_.size(); ++i) {
      if (i % static_cast<size_t>(common_.n) == 0) prompt += results_[i].usage.prompt_tokens;
      completion += results_[i].usage.completion_tokens;
    }
    return usage_json(prompt, completion);
  }

  Json chunk(int index, const Json& delta_or_text, const Json& logprobs, const char* finish) {
    Json j = envelope(id_, chat_ ? "chat.completion.chunk" : "text_completion", created_, server_.model_name_);
    Json choice;
    choice["index"] = index;
    if (chat_) choice["delta"] = delta_or_text;
    else choice["text"] = delta_or_text;
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
    j["choices"] = Json::array({choice});
    return j;
  }

  // Writes a probe when nothing was written for a keep-alive interval, so that a
  // client that hung up is noticed even while outputs carry no text yet (held
  // back for a stop string, or token ids only). False: the client is gone.
  bool probe_if_idle(StreamSink& sink, const char* probe) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_write_ < std::chrono::milliseconds(server_.config_.keepalive_ms)) return true;
    return write(sink, probe);
  }
  bool write(StreamSink& sink, std::string_view data) {
    last_write_ = std::chrono::steady_clock::now();
    return sink.write(data);
  }

  void stream(StreamSink& sink) {
    const auto keepalive = std::chrono::milliseconds(server_.config_.keepalive_ms);
    if (chat_)
      for (size_t i = 0; i < results_.size(); ++i)
        if (!write(sink, sse_event(chunk(static_cast<int>(i), Json{{"role", "assistant"}, {"content", ""}}, nullptr,
                                         nullptr))))
          return;
    std::vector<int> text_offset(results_.size(), 0);
    while (!gen_.done()) {
      auto o = gen_.next(keepalive);
      if (!o) {
        if (!probe_if_idle(sink, ": keep-alive\n\n")) return;  // the client is gone: run() cancels
        continue;
      }
      bool final = absorb(*o);
      const RequestOutput& out = o->output;
      if (final && out.finish_reason == FinishReason::kError) {
        ApiError e{500, "generation failed: " + out.error, "internal_error", ""};
        if (!write(sink, "data: " + e.body() + "\n\n")) return;
        continue;
      }
      if (out.text.empty() && out.logprobs.empty() && !final) {
        if (!probe_if_idle(sink, ": keep-alive\n\n")) return;
        continue;
      }
      Json lp = nullptr;
      if (want_logprobs() && !out.logprobs.empty())
        lp = chat_ ? chat_logprobs(out.logprobs, token_text())
                   : completion_logprobs(out.logprobs, token_text(), text_offset[static_cast<size_t>(o->index)]);
      text_offset[static_cast<size_t>(o->index)] += static_cast<int>(out.text.size());
      Json payload = chat_ ? (out.text.empty() ? Json::object() : Json{{"content", out.text}}) : Json(out.text);
      const char* finish = final ? openai_finish_reason(out.finish_reason) : nullptr;
      if (!write(sink, sse_event(chunk(o->index, payload, lp, finish)))) return;
    }
    if (common_.include_usage) {
      Json j = envelope(id_, chat_ ? "chat.completion.chunk" : "text_completion", created_, server_.model_name_);
      j["choices"] = Json::array();
      j["usage"] = usage();
      if (!sink.write(sse_event(j))) return;
    }
    sink.write("data: [DONE]\n\n");
  }

  void collect(StreamSink& sink) {
    const auto keepalive = std::chrono::milliseconds(server_.config_.keepalive_ms);
    while (!gen_.done()) {
      auto o = gen_.next(keepalive);
      if (o) absorb(*o);
      // JSON allows leading whitespace: a space probes whether the client is still there.
      if (!probe_if_idle(sink, " ")) return;
    }
    for (const auto& r : results_)
      if (r.finish_reason == FinishReason::kError) {
        sink.write(ApiError{500, "generation failed: " + r.error, "internal_error", ""}.body());
        return;
      }
    Json j = envelope(id_, chat_ ? "chat.completion" : "text_completion", created_, server_.model_name_);
    Json choices = Json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
      const ChoiceResult& r = results_[i];
      Json c;
      c["index"] = static_cast<int>(i);
      if (chat_) c["message"] = Json{{"role", "assistant"}, {"content", r.text}};
      else c["text"] = r.text;
      c["logprobs"] = !want_logprobs() ? Json(nullptr)
                      : chat_          ? chat_logprobs(r.logprobs, token_text())
                                       : completion_logprobs(r.logprobs, token_text(), 0);
      const char* finish = openai_finish_reason(r.finish_reason);
      c["finish_reason"] = finish ? Json(finish) : Json(nullptr);
      choices.push_back(c);
    }
    j["choices"] = choices;
    j["usage"] = usage();
    sink.write(dump(j));
  }

  void release() {
    if (counted_) server_.in_flight_.fetch_sub(1);
    counted_ = false;
  }

  OpenAIServer& server_;
  bool counted_ = true;  // holds one unit of OpenAIServer::in_flight_
  Generation gen_;
  bool chat_;
  CommonRequest common_;
  std::string id_;
  int64_t created_ = 0;
  std::vector<ChoiceResult> results_;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

namespace {

// Submits every choice; on a submit error the responder (and with it the
// choices already submitted) is dropped, which cancels them.
HttpResponse start(std::shared_ptr<GenerationResponder> responder, const std::vector<Request>& prompts, int n,
                   bool stream) {
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int i = 0; i < n; ++i) {
      Request r = prompts[p];
      if (r.params.seed) r.params.seed = *r.params.seed + static_cast<uint64_t>(i);
      responder->generation().submit(r, static_cast<int>(p) * n + i);
    }
  HttpResponse res;
  res.content_type = stream ? "text/event-stream" : "application/json";
  if (stream) {
    res.headers["Cache-Control"] = "no-cache";
    res.headers["X-Accel-Buffering"] = "no";
  }
  res.stream = [responder](StreamSink& sink) { responder->run(sink); };
  return res;
}

}  // namespace

HttpResponse OpenAIServer::completions(const HttpRequest& http) {
  auto parsed = parse_completion_request(http.body, config_.limits);
  if (!parsed.ok()) return error_response(parsed.error);
  CompletionRequest& req = *parsed.value;
  if (auto e = check_model(req.model)) return error_response(*e);
  std::vector<Request> prompts;
  for (auto& p : req.prompts) {
    Request r;
    r.prompt = std::move(p.text);
    r.prompt_token_ids = std::move(p.token_ids);
    r.params = req.params;
    prompts.push_back(std::move(r));
  }
  in_flight_.fetch_add(1);  // before the draining check: begin_drain() then waits for this one
  auto responder = std::make_shared<GenerationResponder>(*this, false, req, static_cast<int>(prompts.size()));
  if (draining_) return error_response(ApiError::for_status(503));
  try {
    return start(std::move(responder), prompts, req.n, req.stream);
  } catch (const Error& e) {
    return error_response(ApiError::from_error(e));
  }
}

HttpResponse OpenAIServer::chat_completions(const HttpRequest& http) {
  auto parsed = parse_chat_request(http.body, config_.limits);
  if (!parsed.ok()) return error_response(parsed.error);
  ChatRequest& req = *parsed.value;
  if (auto e = check_model(req.model)) return error_response(*e);
  if (!chat_template_)
    return error_response(ApiError::bad_request(
        "the model has no usable chat template" + (chat_template_error_.empty() ? "" : ": " + chat_template_error_) +
            "; use /v1/completions",
        "messages", "no_chat_template"));
  Request r;
  try {
    r.prompt = chat_template_->render(req.messages, req.add_generation_prompt, req.template_extra);
  } catch (const Error& e) {
    return error_response(ApiError::bad_request(e.what(), "messages", "chat_template_error"));
  }
  if (r.prompt.empty()) return error_response(ApiError::bad_request("the chat template rendered an empty prompt", "messages"));
  r.add_special_tokens = false;  // the template wrote the special tokens it wants
  r.params = req.params;
  in_flight_.fetch_add(1);
  auto responder = std::make_shared<GenerationResponder>(*this, true, req, 1);
  if (draining_) return error_response(ApiError::for_status(503));
  try {
    return start(std::move(responder), {r}, req.n, req.stream);
  } catch (const Error& e) {
    return error_response(ApiError::from_error(e));
  }
}

}  // namespace qserve::server
