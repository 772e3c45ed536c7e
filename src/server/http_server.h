// The HTTP library behind one small interface: routes map a request to a
// response; a response either carries its body or streams it through a
// producer that writes chunks until it returns (server-sent events). The
// OpenAI layer (openai_server.h) only sees these types; the one implementation
// (httplib/httplib_server.cpp) is built when cpp-httplib is found.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace qserve::server {

struct HttpRequest {
  std::string method;                          // "GET", "POST"
  std::string path;                            // without the query string
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote_addr;

  const std::string* header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

// Where a streaming producer writes. write() returns false once the client is
// gone: the producer must stop (and cancel its work).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
  // Set: the body is streamed (chunked transfer encoding) by this producer, on
  // the connection's thread, after the status and headers went out.
  std::function<void(StreamSink&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  size_t max_body_bytes = 8u << 20;  // larger bodies: 413 before the handler runs
  int num_threads = 256;             // connections served at once (a streaming client holds one)
  int read_timeout_s = 30;
  int write_timeout_s = 30;
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Handlers must not throw (the server answers 500 if one does).
  virtual void route(const std::string& method, const std::string& path, HttpHandler handler) = 0;
  // Served for every path no route matches.
  virtual void set_not_found(HttpHandler handler) = 0;
  // Binds; port 0 picks a free one. Throws qserve::Error(kIo) if it cannot bind.
  virtual int bind(const std::string& host, int port) = 0;
  // Serves until stop(); blocks the calling thread.
  virtual void serve() = 0;
  // Stops accepting and returns from serve(). Any thread.
  virtual void stop() = 0;
};

// The cpp-httplib server; throws qserve::Error(kUnsupported) when qserve was
// built without cpp-httplib.
std::unique_ptr<HttpServer> make_http_server(const HttpServerOptions& options);

}  // namespace qserve::server
