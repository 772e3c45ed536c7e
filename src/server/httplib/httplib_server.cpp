// HttpServer on cpp-httplib (Debian's libcpp-httplib-dev). Built only when the
// library is found (src/CMakeLists.txt), which also defines QSERVE_HAVE_HTTPLIB.
#include <httplib.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/logging.h"
#include "server/api_error.h"
#include "server/http_server.h"

namespace qserve::server {
namespace {

class DataSinkAdapter : public StreamSink {
 public:
  explicit DataSinkAdapter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    if (!alive_) return false;
    if (data.empty()) return true;
    alive_ = sink_.write(data.data(), data.size());
    return alive_;
  }

 private:
  httplib::DataSink& sink_;
  bool alive_ = true;
};

HttpRequest convert(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  r.remote_addr = req.remote_addr;
  for (const auto& [name, value] : req.headers) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    r.headers.emplace(lower, value);
  }
  return r;
}

void apply(HttpResponse out, httplib::Response& res) {
  res.status = out.status;
  for (const auto& [k, v] : out.headers) res.set_header(k.c_str(), v);
  if (out.stream) {
    auto producer = std::move(out.stream);
    res.set_chunked_content_provider(out.content_type, [producer](size_t, httplib::DataSink& sink) {
      DataSinkAdapter adapter(sink);
      try {
        producer(adapter);
      } catch (const std::exception& e) {  // producers should not throw; never let it reach httplib
        spdlog::error("stream producer failed: {}", e.what());
      }
      sink.done();
      return true;
    });
  } else {
    res.set_content(out.body, out.content_type);
  }
}

class HttplibServer : public HttpServer {
 public:
  explicit HttplibServer(const HttpServerOptions& options) : options_(options) {
    int threads = std::max(4, options.num_threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    server_.set_payload_max_length(options.max_body_bytes);
    server_.set_read_timeout(options.read_timeout_s, 0);
    server_.set_write_timeout(options.write_timeout_s, 0);
    server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      ApiError e{500, "internal server error", "internal_error", ""};
      res.status = e.status;
      res.set_content(e.body(), "application/json");
    });
    // httplib's own errors (404 for unknown paths, 413 for oversized bodies,
    // 400 for malformed HTTP) get an OpenAI-style body.
    server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404 && not_found_) {
        apply(not_found_(convert(req)), res);
        return;
      }
      ApiError e = ApiError::for_status(res.status);
      res.set_content(e.body(), "application/json");
    });
  }

  void route(const std::string& method, const std::string& path, HttpHandler handler) override {
    auto fn = [handler](const httplib::Request& req, httplib::Response& res) { apply(handler(convert(req)), res); };
    if (method == "GET") server_.Get(path, fn);
    else if (method == "POST") server_.Post(path, fn);
    else if (method == "DELETE") server_.Delete(path, fn);
    else QS_CHECK(false) << "unsupported method " << method;
  }
  void set_not_found(HttpHandler handler) override { not_found_ = std::move(handler); }

  int bind(const std::string& host, int port) override {
    int bound = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (bound <= 0) fail(ErrorCode::kIo, "cannot bind {}:{} (in use, or not an address of this machine)", host, port);
    return bound;
  }
  void serve() override { server_.listen_after_bind(); }
  void stop() override { server_.stop(); }

 private:
  HttpServerOptions options_;
  httplib::Server server_;
  HttpHandler not_found_;
};

}  // namespace

std::unique_ptr<HttpServer> make_http_server(const HttpServerOptions& options) {
  return std::make_unique<HttplibServer>(options);
}

}  // namespace qserve::server
