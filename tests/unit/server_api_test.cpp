// The OpenAI layer without sockets: a scripted engine behind OpenAIServer,
// requests as HttpRequest, streamed bodies read through a test sink.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "server/openai_server.h"
#include "server/request_parser.h"

namespace qserve::server {
namespace {

// TEST DOUBLE: each request yields max_tokens tokens "t0 t1 ..." (one per 1 ms,
// on its own thread), finishing with kLength; honours cancel(); prompts longer
// than 100 bytes are beyond its "context".
class ScriptedEngine : public Engine {
 public:
  ScriptedEngine() {
    info_.name = "scripted";
    info_.max_model_len = 100;
    info_.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                          "{% if add_generation_prompt %}<assistant>{% endif %}";
  }
  ~ScriptedEngine() override { shutdown(false); }

  std::shared_ptr<RequestStream> submit(const Request&) override { throw Error(ErrorCode::kUnsupported, "unused"); }
  uint64_t submit(const Request& r, OutputCallback cb) override {
    if (r.prompt.empty() && r.prompt_token_ids.empty()) fail(ErrorCode::kInvalidArgument, "empty prompt");
    if (r.prompt.size() > 100) fail(ErrorCode::kOutOfRange, "prompt beyond the context");
    if (reject_all) fail(ErrorCode::kResourceExhausted, "queue full");
    std::lock_guard lock(mutex_);
    uint64_t id = next_id_++;
    live_.insert(id);
    last_prompt = r.prompt;
    int n = r.params.max_tokens < 0 ? 5 : r.params.max_tokens;
    threads_.emplace_back([this, id, n, cb] {
      Usage u{7, 0};
      for (int i = 0; i < n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(token_ms));
        if (cancelled(id)) {
          RequestOutput o;
          o.request_id = id;
          o.finished = true;
          o.finish_reason = FinishReason::kCancelled;
          o.usage = u;
          finish(id);
          cb(o);
          return;
        }
        RequestOutput o;
        o.request_id = id;
        o.token_ids = {i};
        o.text = "t" + std::to_string(i) + " ";
        u.completion_tokens = i + 1;
        o.usage = u;
        if (i + 1 == n) {
          o.finished = true;
          o.finish_reason = FinishReason::kLength;
          finish(id);
        }
        cb(o);
      }
    });
    return id;
  }
  bool cancel(uint64_t id) override {
    std::lock_guard lock(mutex_);
    if (!live_.count(id)) return false;
    cancel_requested_.insert(id);
    ++cancels;
    return true;
  }
  EngineStats stats() const override {
    std::lock_guard lock(mutex_);
    EngineStats s;
    s.num_running = static_cast<int>(live_.size());
    s.kv_pages_total = 10;
    s.kv_pages_free = 10 - static_cast<int64_t>(live_.size());
    return s;
  }
  const ModelInfo& model_info() const override { return info_; }
  const EngineConfig& config() const override { return config_; }
  std::vector<int32_t> tokenize(const std::string& t, bool) const override { return std::vector<int32_t>(t.size(), 1); }
  std::string detokenize(const std::vector<int32_t>& ids, bool) const override {
    return ids.empty() ? "" : "t" + std::to_string(ids[0]);
  }
  void shutdown(bool) override {
    std::vector<std::thread> ts;
    {
      std::lock_guard lock(mutex_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }
  int live() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(live_.size());
  }

  std::atomic<int> cancels{0};
  std::atomic<bool> reject_all{false};
  int token_ms = 1;
  std::string last_prompt;

 private:
  bool cancelled(uint64_t id) {
    std::lock_guard lock(mutex_);
    return cancel_requested_.count(id) > 0;
  }
  void finish(uint64_t id) {
    std::lock_guard lock(mutex_);
    live_.erase(id);
  }
  ModelInfo info_;
  EngineConfig config_;
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::set<uint64_t> live_, cancel_requested_;
  std::vector<std::thread> threads_;
};

class CollectSink : public StreamSink {
 public:
  explicit CollectSink(int fail_after = -1) : fail_after_(fail_after) {}
  bool write(std::string_view d) override {
    if (fail_after_ >= 0 && writes_ >= fail_after_) return false;
    ++writes_;
    data += d;
    return true;
  }
  std::string data;

 private:
  int fail_after_;
  int writes_ = 0;
};

HttpRequest post(const std::string& path, const std::string& body) {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body;
  return r;
}

std::string run(const HttpResponse& r, int fail_after = -1) {
  if (!r.stream) return r.body;
  CollectSink sink(fail_after);
  r.stream(sink);
  return sink.data;
}

TEST(ServerApi, CompletionNonStreaming) {
  ScriptedEngine engine;
  OpenAIServer api(engine, {});
  auto res = api.handle(post("/v1/completions", R"({"model":"scripted","prompt":"hi","max_tokens":3})"));
  ASSERT_EQ(res.status, 200);
  auto j = nlohmann::json::parse(run(res));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "t0 t1 t2 ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 10);
  EXPECT_EQ(api.in_flight(), 0);
}

TEST(ServerApi, ChatStreamingAppliesTheTemplate) {
  ScriptedEngine engine;
  OpenAIServer api(engine, {});
  auto res = api.handle(post("/v1/chat/completions",
                             R"({"messages":[{"role":"user","content":"yo"}],"max_tokens":2,"stream":true,
                                 "stream_options":{"include_usage":true},"n":2})"));
  ASSERT_EQ(res.status, 200);
  EXPECT_EQ(engine.last_prompt, "<user>yo<assistant>");
  std::string body = run(res);
  EXPECT_NE(body.find("\"role\":\"assistant\""), std::string::npos);
  EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(body.find("\"completion_tokens\":4"), std::string::npos);  // 2 choices x 2
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
}

TEST(ServerApi, ClientDisconnectCancels) {
  ScriptedEngine engine;
  engine.token_ms = 5;
  OpenAIServer api(engine, {});
  auto res = api.handle(post("/v1/completions", R"({"prompt":"hi","max_tokens":1000,"stream":true})"));
  ASSERT_EQ(res.status, 200);
  run(res, /*fail_after=*/3);
  EXPECT_GE(engine.cancels.load(), 1);
  for (int i = 0; i < 200 && engine.live() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(engine.live(), 0);
}

TEST(ServerApi, ErrorStatuses) {
  ScriptedEngine engine;
  ServerConfig config;
  config.api_key = "sekret";
  OpenAIServer api(engine, config);
  auto with_key = [](HttpRequest r, const std::string& key) {
    r.headers["authorization"] = "Bearer " + key;
    return r;
  };
  EXPECT_EQ(api.handle(post("/v1/completions", R"({"prompt":"x"})")).status, 401);
  EXPECT_EQ(api.handle(with_key(post("/v1/completions", R"({"prompt":"x"})"), "wrong")).status, 401);
  EXPECT_EQ(api.handle(with_key(post("/v1/completions", R"({"prompt":"x","max_tokens":1})"), "sekret")).status, 200);
  auto status = [&](const std::string& path, const std::string& body) {
    return api.handle(with_key(post(path, body), "sekret")).status;
  };
  EXPECT_EQ(status("/v1/completions", "{not json"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt":"x","max_tokens":"3"})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt":"x","temperature":7})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt":"x","model":"other"})"), 404);
  EXPECT_EQ(status("/v1/completions", std::string(R"({"prompt":")") + std::string(200, 'a') + "\"}"), 400);
  EXPECT_EQ(status("/v1/chat/completions", R"({"messages":[]})"), 400);
  EXPECT_EQ(status("/v1/nope", "{}"), 404);
  engine.reject_all = true;
  EXPECT_EQ(status("/v1/completions", R"({"prompt":"x"})"), 429);
  engine.reject_all = false;
  api.begin_drain();
  EXPECT_EQ(status("/v1/completions", R"({"prompt":"x"})"), 503);
  auto body = nlohmann::json::parse(api.handle(with_key(post("/v1/completions", "[1]"), "sekret")).body);
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(api.in_flight(), 0);
}

TEST(ServerApi, MetricsAndModels) {
  ScriptedEngine engine;
  OpenAIServer api(engine, {});
  run(api.handle(post("/v1/completions", R"({"prompt":"x","max_tokens":2})")));
  HttpRequest get;
  get.method = "GET";
  get.path = "/metrics";
  std::string m = api.handle(get).body;
  EXPECT_NE(m.find("qserve_http_requests_total{model_name=\"scripted\",endpoint=\"/v1/completions\",status=\"200\"} 1"),
            std::string::npos);
  EXPECT_NE(m.find("qserve_e2e_request_latency_seconds_count{model_name=\"scripted\"} 1"), std::string::npos);
  EXPECT_NE(m.find("qserve_kv_cache_pages_free{model_name=\"scripted\"} 10"), std::string::npos);
  get.path = "/v1/models";
  auto j = nlohmann::json::parse(api.handle(get).body);
  EXPECT_EQ(j["data"][0]["id"], "scripted");
  get.path = "/";
  auto page = api.handle(get);
  EXPECT_EQ(page.content_type.rfind("text/html", 0), 0u);
  EXPECT_NE(page.body.find("/v1/chat/completions"), std::string::npos);
}

TEST(ServerRequestParser, ValidAndInvalidBodies) {
  auto c = parse_completion_request(R"({"prompt":[[1,2],[3]],"n":2,"stop":["a","b"],"seed":-1,"temperature":0})");
  ASSERT_TRUE(c.ok()) << c.error.message;
  EXPECT_EQ(c.value->prompts.size(), 2u);
  EXPECT_EQ(c.value->params.stop.size(), 2u);
  EXPECT_EQ(c.value->params.max_tokens, 16);
  EXPECT_EQ(*c.value->params.seed, UINT64_MAX);
  auto chat = parse_chat_request(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
                                     {"type":"text","text":"b"}]}],"max_completion_tokens":5,"logprobs":true,"top_logprobs":2})");
  ASSERT_TRUE(chat.ok()) << chat.error.message;
  EXPECT_EQ(chat.value->messages[0]["content"], "a\nb");
  EXPECT_EQ(chat.value->params.max_tokens, 5);
  EXPECT_EQ(chat.value->params.logprobs, 2);
  for (const char* bad : {"", "null", "[]", "{\"prompt\":1}", "{\"prompt\":[]}", "{\"prompt\":\"\"}",
                          "{\"prompt\":\"x\",\"n\":0}", "{\"prompt\":\"x\",\"n\":1000}", "{\"prompt\":\"x\",\"top_p\":0}",
                          "{\"prompt\":\"x\",\"stop\":[1]}", "{\"prompt\":\"x\",\"max_tokens\":0}",
                          "{\"prompt\":\"x\",\"max_tokens\":1.5}", "{\"prompt\":[-1]}", "{\"prompt\":\"x\",\"echo\":true}",
                          "{\"prompt\":\"x\",\"stream_options\":{}}", "{\"prompt\":\"x\",\"logprobs\":21}"}) {
    SCOPED_TRACE(bad);
    auto r = parse_completion_request(bad);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.error.status, 400);
  }
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(parse_completion_request(deep).ok());
  for (const char* bad : {"{\"messages\":[]}", "{\"messages\":[{\"role\":\"user\"}]}", "{\"messages\":[{\"content\":\"x\"}]}",
                          "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "{\"messages\":\"hi\"}",
                          "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_chat_request(bad).ok());
  }
}

TEST(ServerAuth, ConstantTimeEquals) {
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abc", "abd"));
  EXPECT_FALSE(constant_time_equals("abc", "abcd"));
  EXPECT_FALSE(constant_time_equals("", "a"));
  EXPECT_TRUE(constant_time_equals("", ""));
}

}  // namespace
}  // namespace qserve::server
