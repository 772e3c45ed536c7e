#include "server/http_server.h"

#include "core/error.h"

namespace qserve::server {

#ifndef QSERVE_HAVE_HTTPLIB
// Without cpp-httplib (e.g. on a machine lacking libcpp-httplib-dev) the
// server cannot listen; everything else of it still builds and is tested.
std::unique_ptr<HttpServer> make_http_server(const HttpServerOptions&) {
  fail(ErrorCode::kUnsupported, "qserve was built without cpp-httplib (apt install libcpp-httplib-dev, then rebuild)");
}
#endif

}  // namespace qserve::server
