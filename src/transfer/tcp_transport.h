// TcpTransport: the requester side of the TCP data channel.
//
// Keeps up to connections_per_peer connections to each owner's data endpoint
// (reads of a batch run on several at once); a READ takes an idle one, or
// opens one, or waits for one. The reply's bytes are read straight into the
// caller's destination (no copy on this side) and checked against the xxh3-64
// that follows them. A connection that failed or timed out is closed, never
// reused. Authorizations have a pool of their own per owner, of the same
// size, so one never waits for a READ's connection. Each call runs its connection's own io_context
// on the calling thread, so a READ is bounded by io_timeout_ms plus one second per 64 MiB. With TLS
// every connection does a handshake that presents this manager's certificate and requires the
// owner's to chain to the CA.
//
// Thread-safety: thread-safe.
#ifndef TIERKV_TRANSFER_TCP_TRANSPORT_H_
#define TIERKV_TRANSFER_TCP_TRANSPORT_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transfer/tls.h"
#include "transfer/transport.h"

namespace asio::ssl {
class context;
}

namespace tierkv::transfer {

struct TcpTransportOptions {
  size_t connections_per_peer = 4;
  int64_t connect_timeout_ms = 3000;
  int64_t io_timeout_ms = 10000;
  TlsFiles tls;  // enabled: connections are TLS, presenting cert, verifying the owner's by ca
};

class TcpTransport final : public DataTransport {
 public:
  // Errors: INVALID_ARGUMENT (TLS files that cannot be loaded).
  static Result<std::unique_ptr<TcpTransport>> Create(TcpTransportOptions options);
  ~TcpTransport() override;

  using DataTransport::Read;
  Status Read(const std::string& endpoint, const ReadRequest& req, uint8_t* dest,
              uint64_t* checksum) override;
  // AUTHORIZE on a connection of the same pool.
  Result<std::string> Authorize(const std::string& endpoint, uint64_t ticket,
                                std::string_view request, int64_t timeout_ms) override;
  // Both requests go out in one write on one of the endpoint's authorization
  // connections; the READ's bytes come back on it.
  Result<std::string> AuthorizeAndRead(const std::string& endpoint, uint64_t ticket,
                                       std::string_view request, int64_t timeout_ms,
                                       const ReadRequest& first, uint8_t* dest, uint64_t* checksum,
                                       Status* read_status) override;
  void Forget(const std::string& endpoint) override;

 private:
  explicit TcpTransport(TcpTransportOptions options);
  struct Conn;
  struct Pool {
    std::vector<std::unique_ptr<Conn>> idle;
    size_t open = 0;  // idle + in use
  };
  // A connection to `endpoint` from the pool `pool_key` (READs: the endpoint).
  Result<std::unique_ptr<Conn>> Acquire(const std::string& endpoint, const std::string& pool_key);
  void Return(const std::string& pool_key, std::unique_ptr<Conn> conn, bool reusable);

  const TcpTransportOptions options_;
  std::unique_ptr<asio::ssl::context> tls_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Pool> pools_;
};

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_TCP_TRANSPORT_H_
