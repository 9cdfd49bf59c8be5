// Internal to src/http: how REST handlers answer (JSON, text, the contract's
// error body).
#ifndef TIERKV_HTTP_REST_REPLY_H_
#define TIERKV_HTTP_REST_REPLY_H_

#include <httplib.h>
#include <time.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http/rest_server.h"

namespace tierkv::rest_reply {

using Json = nlohmann::ordered_json;
inline constexpr const char* kJsonType = "application/json; charset=utf-8";
inline constexpr const char* kTextType = "text/plain; charset=utf-8";

inline int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

inline void SendJson(httplib::Response& res, const Json& j) {
  res.set_content(j.dump(), kJsonType);
}
inline void SendText(httplib::Response& res, const std::string& s) {
  res.set_content(s, kTextType);
}
inline void SendError(httplib::Response& res, const std::string& message) {
  res.status = 200;  // business errors are HTTP 200; `success` tells
  res.set_content(ErrorBody(message, NowMs()), kJsonType);
}

}  // namespace tierkv::rest_reply

#endif  // TIERKV_HTTP_REST_REPLY_H_
