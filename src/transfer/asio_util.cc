#include "transfer/asio_util.h"

namespace tierkv::transfer {

Result<asio::ip::tcp::endpoint> ResolveEndpoint(asio::io_context& io, const std::string& hostport) {
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hostport.size()) {
    return InvalidArgument("not HOST:PORT: '" + hostport + "'");
  }
  std::string host = hostport.substr(0, colon);
  const std::string port = hostport.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  asio::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host, ec);
  if (!ec) {
    unsigned long p = 0;
    try {
      p = std::stoul(port);
    } catch (...) {
      return InvalidArgument("bad port in '" + hostport + "'");
    }
    if (p > 65535) return InvalidArgument("bad port in '" + hostport + "'");
    return asio::ip::tcp::endpoint(addr, static_cast<uint16_t>(p));
  }
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, port, ec);
  if (ec || results.empty()) {
    return Status(Code::kUnavailable, "cannot resolve '" + hostport + "': " + ec.message());
  }
  return results.begin()->endpoint();
}

}  // namespace tierkv::transfer
