// Connection: one socket to a manager, its handshake, and request/reply calls.
//
// Owns the descriptor and, over a Unix socket, the client's mapping of the
// manager's DRAM pool. A transport failure marks the connection broken; the
// next Call reconnects first.
//
// Thread-safety: none; the Client serialises access.
#ifndef TIERKV_CLIENT_CONNECTION_H_
#define TIERKV_CLIENT_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/reply_spin.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/socket_io.h"
#include "tierkv/client.h"

namespace tierkv {

class Connection {
 public:
  Connection(proto::Address address, ClientOptions options);
  ~Connection();

  // Connects (or reconnects) and handshakes.
  Status Open();
  // Open() when the connection is not up (lost, or never opened); OK when it is.
  Status EnsureOpen() { return broken_ ? Open() : Status::Ok(); }
  // Sends one request and waits for its reply. On OK `reply` holds the reply
  // body; a non-OK reply status is returned with the manager's message.
  // Outcomes of checked posts still unread are read first: if one failed, its
  // failure is returned and this request is not sent.
  Status Call(proto::Opcode op, std::string_view body, std::string* reply);
  // As Call, but sent before the unread outcomes of checked posts are read
  // (they arrive first, replies come in request order). A failed one is kept:
  // the caller takes it with TakeDeferred() and undoes this request's effect.
  Status CallOverlapped(proto::Opcode op, std::string_view body, std::string* reply);
  // As Call, with `fd` (not taken) passed along with the request's bytes
  // (SCM_RIGHTS; a Unix socket only): REGISTER.
  Status CallPassing(proto::Opcode op, std::string_view body, int fd, std::string* reply);
  // Sends one request without waiting; its reply is read and dropped before
  // the next call's reply (replies come in request order). For releases whose
  // outcome the client already knows.
  Status Post(proto::Opcode op, std::string_view body);
  // As Post, but the frame is held back and written together with the next
  // request (one write for both), or by Settle; at most kMaxHeldFrames wait.
  // For releases that need not reach the manager before the client's next
  // call.
  Status PostLater(proto::Opcode op, std::string_view body);
  static constexpr size_t kMaxHeldFrames = 64;
  // Sends one request without waiting whose outcome matters: a failure reply
  // (or losing the connection before it is read) becomes the deferred status,
  // described as the outcome of `what`.
  Status PostChecked(proto::Opcode op, std::string_view body, std::string what);
  // Reads every unread reply and returns (and clears) the deferred status.
  Status Settle();
  // Returns and clears the deferred status (OK when there is none).
  Status TakeDeferred();

  bool shared_memory() const { return pool_ != nullptr; }
  uint8_t* pool() const { return pool_; }
  // The pool's mapping, kept while any holder needs it (zero-copy views
  // outlive a reconnect or the connection: their bytes stay mapped).
  std::shared_ptr<const void> pool_mapping() const { return pool_map_; }
  // Changes whenever a connection ends: a pin belongs to the connection of
  // the incarnation it was granted on, and ends with it.
  uint64_t incarnation() const { return incarnation_.load(std::memory_order_acquire); }
  uint64_t pool_size() const { return pool_size_; }
  const proto::HelloReply& limits() const { return hello_; }
  // Whether the manager's generation table is mapped (ClientOptions::
  // lease_free_reads over a Unix socket): LOCATE answers can then be used.
  bool generations() const { return generations_ != nullptr; }
  // After a copy of the range at pool offset `offset` that a LOCATE answered
  // with `generation`: true when the range was not freed since, so the copy
  // is the value's. Call after the copy; orders the check after it.
  bool CopyIntact(uint64_t offset, uint32_t generation) const;

 private:
  void Close();
  Status Exchange(proto::Opcode op, std::string_view body, std::string* reply, bool hello);
  Status SendFrame(proto::Opcode op, std::string_view body, uint64_t* request_id);
  // Writes frame_, then `tail` (closing the connection when that fails);
  // WriteHeld the held-back frames.
  Status WriteFrames(std::string_view tail = {});
  // Bodies from this size on are written from where they are, not copied
  // behind their header.
  static constexpr size_t kJoinBelow = 64 << 10;
  Status WriteHeld();
  // Reads one reply frame into *header / *body (and the descriptors passed
  // with it into `fds`, when not empty), busy-polling for its header up to
  // `spin_us` first. Transport errors close the connection (and `fds`).
  Status ReadReply(proto::FrameHeader* header, std::string* body, std::span<int> fds, int spin_us);
  // Maps the pool (and the generation table) passed with the HELLO reply;
  // takes the descriptors.
  Status MapShared(int pool_fd, int generations_fd);
  // Reads the replies of posted requests, recording a checked one's failure.
  Status ReadPosted();
  bool HasCheckedUnread() const;

  struct Posted {
    uint64_t request_id = 0;
    proto::Opcode op = proto::Opcode::kHello;
    std::string what;  // empty: the reply is dropped; else whose outcome it is
  };
  // A checked post whose reply will never be read: its outcome is unknown.
  void NoteUnknown(const Posted& p, Code code, const std::string& why);

  const proto::Address address_;
  const ClientOptions options_;
  int fd_ = -1;
  proto::BufferedReader reader_;  // every read of fd_ after the HELLO header goes through it
  bool broken_ = true;
  bool send_failed_ = false;  // the last request could not be written at all
  uint64_t next_request_ = 1;
  std::deque<Posted> posted_;  // requests whose replies are still unread
  std::string held_;           // PostLater frames not written yet (their replies are in posted_)
  size_t held_frames_ = 0;
  Status deferred_;  // a checked post's failure, not yet returned
  std::string scratch_;
  uint8_t* pool_ = nullptr;
  uint64_t pool_size_ = 0;
  std::shared_ptr<void> pool_map_;  // owns the pool mapping (munmap when the last holder goes)
  std::atomic<uint64_t> incarnation_{0};
  const uint32_t* generations_ = nullptr;  // read-only mapping
  uint64_t generations_bytes_ = 0;
  proto::HelloReply hello_;
  std::string frame_;
  int pass_fd_ = -1;  // passed with the next frame written (CallPassing)
  ReplySpin spin_;    // how long replies are polled for, per request kind
};

}  // namespace tierkv

#endif  // TIERKV_CLIENT_CONNECTION_H_
