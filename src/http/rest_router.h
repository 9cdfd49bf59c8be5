// RestServer::Router: cpp-httplib's router fed one complete request at a time
// from memory (the HttpGate reads it off the wire). Internal to http/.
#ifndef TIERKV_HTTP_REST_ROUTER_H_
#define TIERKV_HTTP_REST_ROUTER_H_

#include <httplib.h>

#include "http/http_gate.h"
#include "http/rest_server.h"

namespace tierkv {

class RestServer::Router : public httplib::Server {
 public:
  // Routes `ex.request` and writes the whole HTTP response into ex.response;
  // sets ex.closed_by_handler when the connection must close after it.
  void Handle(HttpExchange& ex);
};

}  // namespace tierkv

#endif  // TIERKV_HTTP_REST_ROUTER_H_
