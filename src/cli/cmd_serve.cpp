// qserve serve [--model M] [--host 127.0.0.1] [--port 8000] [--api-key KEY] ...
// The OpenAI-compatible HTTP server (src/server/). SIGTERM / SIGINT: stop
// taking requests, finish the in-flight ones, then exit.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/app.h"
#include "cli/engine_flags.h"
#include "core/error.h"
#include "qserve/engine.h"
#include "server/http_server.h"
#include "server/openai_server.h"

namespace qserve::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  int max_model_len = 0;
  int max_num_seqs = 64;
  int max_waiting_requests = 4096;
  int64_t num_kv_pages = 0;
  std::string device = "cpu";
  size_t max_body_bytes = 8u << 20;
  int http_threads = 256;
  int drain_timeout_s = 600;
  EngineConfig model_flags;  // --precision, --load-format, --arch, --memory-budget, --gpu-memory-utilization
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int serve(const ServeOptions& o) {
  // Signals go to one waiting thread (blocked everywhere else, before any thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a dead server

  if (o.api_key.empty()) {
    if (is_loopback(o.host))
      std::fprintf(stderr, "qserve: no --api-key: listening on %s (loopback) only; pass --host with --api-key to serve others\n",
                   o.host.c_str());
    else
      std::fprintf(stderr, "qserve: warning: no --api-key and --host %s: anyone who reaches this port can use it\n",
                   o.host.c_str());
  }

  EngineConfig config;
  config.model = o.model;
  config.device = o.device;
  config.max_model_len = o.max_model_len;
  config.max_num_seqs = o.max_num_seqs;
  config.max_waiting_requests = o.max_waiting_requests;
  config.num_kv_pages = o.num_kv_pages;
  copy_model_flags(o.model_flags, config);
  auto engine = Engine::create(config);

  server::ServerConfig sc;
  sc.served_model_name = o.served_model_name;
  sc.api_key = o.api_key;
  server::OpenAIServer api(*engine, sc);
  server::HttpServerOptions ho;
  ho.max_body_bytes = o.max_body_bytes;
  ho.num_threads = o.http_threads;
  auto http = server::make_http_server(ho);
  api.register_routes(*http);
  int port = http->bind(o.host, o.port);
  std::fprintf(stderr, "qserve: serving '%s' (context %d) at http://%s:%d  (chat page: /, API: /v1, metrics: /metrics)%s\n",
               api.model_name().c_str(), engine->model_info().max_model_len, o.host.c_str(), port,
               api.has_chat_template() ? "" : "  [no chat template: /v1/chat/completions disabled]");

  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    signalled = true;
    std::fprintf(stderr, "qserve: %s: draining %d in-flight request(s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 api.in_flight());
    api.begin_drain();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.drain_timeout_s);
    while (api.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    http->stop();
  });
  http->serve();
  if (!signalled) kill(getpid(), SIGTERM);  // serve() ended on its own: release the waiter
  waiter.join();
  engine->shutdown(/*drain=*/true);
  std::fprintf(stderr, "qserve: stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* sub = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API (completions, chat, metrics, a chat page)");
  auto o = std::make_shared<ServeOptions>();
  sub->add_option("--model", o->model, "Model directory or .gguf file (default: the installed default model)")
      ->envname("QSERVE_MODEL");
  sub->add_option("--host", o->host, "Address to bind")->capture_default_str()->envname("QSERVE_HOST");
  sub->add_option("--port", o->port, "Port to bind (0: any free port)")->capture_default_str()->envname("QSERVE_PORT");
  sub->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/*")->envname("QSERVE_API_KEY");
  sub->add_option("--served-model-name", o->served_model_name, "Model name in the API (default: the model's)")
      ->envname("QSERVE_SERVED_MODEL_NAME");
  sub->add_option("--max-model-len", o->max_model_len, "Context length (0: the model's)")->capture_default_str()
      ->envname("QSERVE_MAX_MODEL_LEN");
  sub->add_option("--max-num-seqs", o->max_num_seqs, "Sequences batched in one step")->capture_default_str()
      ->envname("QSERVE_MAX_NUM_SEQS");
  sub->add_option("--max-waiting-requests", o->max_waiting_requests, "Queue length beyond which requests get 429")
      ->capture_default_str()->envname("QSERVE_MAX_WAITING_REQUESTS");
  sub->add_option("--num-kv-pages", o->num_kv_pages, "KV cache pages (0: sized by the engine)")->capture_default_str();
  sub->add_option("--device", o->device, "cpu or cuda")->capture_default_str()->envname("QSERVE_DEVICE");
  add_model_flags(sub, o->model_flags);
  sub->add_option("--max-body-bytes", o->max_body_bytes, "Larger request bodies get 413")->capture_default_str();
  sub->add_option("--http-threads", o->http_threads, "Connections served at once")->capture_default_str();
  sub->add_option("--drain-timeout", o->drain_timeout_s, "Seconds SIGTERM waits for in-flight requests")
      ->capture_default_str();
  set_command_body(sub, [o]() -> int { return serve(*o); });
}

}  // namespace qserve::cli
