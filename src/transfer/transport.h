// The data channel seen by the read path: the requester's DataTransport and
// the owner's GrantSource. The TCP implementation (tcp_transport.h,
// data_server.h) is one; an RDMA-capable transport can implement the same two
// interfaces without touching the read path (cluster/fetcher.h) or the grants
// (cluster/grants.h).
#ifndef TIERKV_TRANSFER_TRANSPORT_H_
#define TIERKV_TRANSFER_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/memory_piece.h"
#include "tierkv/status.h"
#include "transfer/data_frame.h"

namespace tierkv {
class ValueDigests;  // media/checksum.h
}  // namespace tierkv

namespace tierkv::transfer {

// Requester side.
class DataTransport {
 public:
  virtual ~DataTransport() = default;
  // Reads req.length bytes of a granted item from the owner at `endpoint`
  // ("HOST:PORT") straight into `dest` (pieces filled in order, req.length
  // bytes in all), and verifies their checksum as they arrive. On any error
  // `dest` may hold part of the bytes and must not be used. Errors: the
  // owner's refusal (its status code and text: NOT_FOUND for an unknown or
  // released ticket, INVALID_ARGUMENT for a range outside the item, ...),
  // UNAVAILABLE (cannot connect, connection lost, timed out), IO_ERROR
  // (checksum mismatch), PROTOCOL_ERROR (an unusable reply). Thread-safe:
  // concurrent reads use separate connections. `checksum`, when not null,
  // receives the verified xxh3-64 of the bytes (on success only).
  virtual Status Read(const std::string& endpoint, const ReadRequest& req,
                      std::span<const MemoryPiece> dest, uint64_t* checksum) = 0;
  // Into one piece of req.length bytes.
  Status Read(const std::string& endpoint, const ReadRequest& req, uint8_t* dest,
              uint64_t* checksum = nullptr) {
    const MemoryPiece piece{dest, req.length};
    return Read(endpoint, req, std::span<const MemoryPiece>(&piece, 1), checksum);
  }
  // Sends an authorization (`request`, bytes the transport does not read:
  // an encoded tierkv.peer.AuthorizeRequest) for `ticket` to the owner at
  // `endpoint` and returns its encoded answer, within `timeout_ms`. Errors:
  // the owner's refusal (its status code and text), UNAVAILABLE (no answer:
  // the grant may exist all the same), PROTOCOL_ERROR (an unusable reply).
  // Thread-safe.
  virtual Result<std::string> Authorize(const std::string& endpoint, uint64_t ticket,
                                        std::string_view request, int64_t timeout_ms) = 0;
  // An authorization with a READ of one of its items behind it, without
  // waiting for the answer in between: `request` as for Authorize, then
  // `first` (of the same ticket) into `dest` as for Read. The owner answers
  // them in order; a READ of an item it did not grant is refused NOT_FOUND and
  // leaves `dest` untouched. Returns the authorization's answer as Authorize
  // does; *read_status gets the READ's outcome as Read would (meaningless
  // unless the authorization succeeded; untouched `dest` unless it is OK).
  // The default sends them one after the other. Thread-safe.
  virtual Result<std::string> AuthorizeAndRead(const std::string& endpoint, uint64_t ticket,
                                               std::string_view request, int64_t timeout_ms,
                                               const ReadRequest& first,
                                               std::span<const MemoryPiece> dest,
                                               uint64_t* checksum, Status* read_status) {
    Result<std::string> answer = Authorize(endpoint, ticket, request, timeout_ms);
    *read_status = answer.ok() ? Read(endpoint, first, dest, checksum)
                               : Status(Code::kUnavailable, "no READ: the authorization failed");
    return answer;
  }
  // Closes the idle connections to `endpoint` (its member left).
  virtual void Forget(const std::string& endpoint) = 0;
};

// What a READ may send: `size` bytes at `data`, valid while `hold` is held.
// `digests`, when not null, holds the checksums known of the value: a READ
// of a range found there sends its checksum instead of hashing the bytes
// again, and one that had to hash them records the result. Same lifetime as
// `data`.
struct GrantSpan {
  std::shared_ptr<const void> hold;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  ValueDigests* digests = nullptr;
};

// Owner side: resolves a READ against the grants. Thread-safe.
class GrantSource {
 public:
  virtual ~GrantSource() = default;
  // Errors: NOT_FOUND (no such live grant or item, or the item was refused),
  // INVALID_ARGUMENT (generation differs from the grant's).
  virtual Result<GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) = 0;
  // Decides an AUTHORIZE sent over the data channel: `request` is the
  // requester's encoded authorization for `ticket` (the frame's), the answer
  // the encoded reply. May
  // block (an SSD rewarm, the budget wait); the data server calls it off its
  // event loops. Errors: the refusal of the whole call (INVALID_ARGUMENT for
  // bytes that do not decode, or name another ticket). Default: NOT_SUPPORTED.
  virtual Result<std::string> Authorize(uint64_t ticket, std::string_view request) {
    (void)ticket;
    (void)request;
    return Status(Code::kNotSupported, "this owner does not authorize over the data channel");
  }
  // Decides an AUTHORIZE as Authorize does, at once: never blocks, so the
  // data server calls it on its event loop first. Nothing (and nothing done)
  // when deciding needs a wait; the data server then calls Authorize off its
  // event loops. Default: nothing.
  virtual std::optional<Result<std::string>> TryAuthorize(uint64_t ticket,
                                                          std::string_view request) {
    (void)ticket;
    (void)request;
    return std::nullopt;
  }
};

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_TRANSPORT_H_
