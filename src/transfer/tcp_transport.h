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
// Waiting for the owner's bytes (an answer, the next piece of a value), a call
// first busy-polls the socket for about twice the connection's usual wait, at
// most spin_us, and sleeps only then (proto::WaitAverage, as a client waits
// for its manager's reply); the thread's proto::SpinBackoff stops the polling
// while other tasks keep taking its core.
//
// Thread-safety: thread-safe.
#ifndef TIERKV_TRANSFER_TCP_TRANSPORT_H_
#define TIERKV_TRANSFER_TCP_TRANSPORT_H_

#include <atomic>
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
  int spin_us = 0;  // cap of the poll before a wait sleeps (0: sleeps at once); --spin-us
  TlsFiles tls;     // enabled: connections are TLS, presenting cert, verifying the owner's by ca
};

// How a transport's calls waited for owners' bytes, since it was created.
struct TcpTransportWaits {
  uint64_t polled = 0;  // waits that busy-polled first
  uint64_t caught = 0;  // of those, the bytes came while polling
  uint64_t slept = 0;   // waits that slept (the poll ran out, or none was made)
};

class TcpTransport final : public DataTransport {
 public:
  // The transport's wait counters (internal: calls share them).
  struct WaitCounters {
    std::atomic<int> pollers{0};  // calls polling now
    std::atomic<uint64_t> polled{0}, caught{0}, slept{0};
  };

  // Errors: INVALID_ARGUMENT (TLS files that cannot be loaded).
  static Result<std::unique_ptr<TcpTransport>> Create(TcpTransportOptions options);
  ~TcpTransport() override;

  using DataTransport::Read;
  Status Read(const std::string& endpoint, const ReadRequest& req,
              std::span<const MemoryPiece> dest, uint64_t* checksum) override;
  // AUTHORIZE on a connection of the same pool.
  Result<std::string> Authorize(const std::string& endpoint, uint64_t ticket,
                                std::string_view request, int64_t timeout_ms) override;
  // Both requests go out in one write on one of the endpoint's authorization
  // connections; the READ's bytes come back on it.
  Result<std::string> AuthorizeAndRead(const std::string& endpoint, uint64_t ticket,
                                       std::string_view request, int64_t timeout_ms,
                                       const ReadRequest& first, std::span<const MemoryPiece> dest,
                                       uint64_t* checksum, Status* read_status) override;
  void Forget(const std::string& endpoint) override;
  TcpTransportWaits Waits() const;

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
  WaitCounters waits_;
};

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_TCP_TRANSPORT_H_
