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

namespace tierkv::transfer {

Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const TlsFiles& files, bool server) {
  auto ctx = std::make_unique<asio::ssl::context>(server ? asio::ssl::context::tls_server
                                                         : asio::ssl::context::tls_client);
  asio::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   ec);
  auto fail = [](const std::string& what, const std::string& path, const asio::error_code& e) {
    return InvalidArgument("cannot load " + what + " " + path + ": " + e.message());
  };
  ctx->use_certificate_chain_file(files.cert, ec);
  if (ec) return fail("--peer-tls-cert", files.cert, ec);
  ctx->use_private_key_file(files.key, asio::ssl::context::pem, ec);
  if (ec) return fail("--peer-tls-key", files.key, ec);
  ctx->load_verify_file(files.ca, ec);
  if (ec) return fail("--peer-tls-ca", files.ca, ec);
  ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
  return ctx;
}

}  // namespace tierkv::transfer
