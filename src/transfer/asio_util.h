// asio helpers shared by the data channel's two sides (transfer box only).
#ifndef TIERKV_TRANSFER_ASIO_UTIL_H_
#define TIERKV_TRANSFER_ASIO_UTIL_H_

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "tierkv/status.h"
#include "transfer/tls.h"

namespace tierkv::transfer {

// Completion token: co_await yields a tuple (error_code first), never throws.
inline constexpr auto kAwaitTuple = asio::experimental::as_tuple(asio::use_awaitable);

// Completion condition for asio::async_read / async_write: the whole rest of
// the buffers is offered to each system call. asio::transfer_all() offers at
// most 64 KiB per call, which splits a megabyte answer into 16 sends, each one
// more trip through the io_context.
struct WholeRest {
  size_t operator()(const asio::error_code& ec, size_t) const { return ec ? 0 : kMaxCall; }
  static constexpr size_t kMaxCall = size_t{1} << 30;
};
inline constexpr WholeRest kWholeRest{};

// "HOST:PORT" (HOST a name or an address; "[v6]:PORT" too) resolved to one
// TCP endpoint. INVALID_ARGUMENT / UNAVAILABLE (cannot resolve).
Result<asio::ip::tcp::endpoint> ResolveEndpoint(asio::io_context& io, const std::string& hostport);

// A TLS 1.2+ context that presents `files.cert` and requires the peer's
// certificate, verified against `files.ca`. INVALID_ARGUMENT naming the file
// that cannot be loaded.
Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const TlsFiles& files, bool server);

// How long moving `bytes` may take: the base timeout plus one second per 64 MiB.
inline std::chrono::milliseconds IoBudget(int64_t base_ms, uint64_t bytes) {
  return std::chrono::milliseconds(base_ms + static_cast<int64_t>(bytes >> 26) * 1000);
}

// The body of a READ answer moves in pieces of this size, and each side
// hashes a piece while the next one is in flight (the sender after handing it
// to the socket, the receiver after it arrived), instead of one hash pass over
// the whole value before sending and another after receiving.
inline constexpr size_t kHashPiece = 256 << 10;

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_ASIO_UTIL_H_
