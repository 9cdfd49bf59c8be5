#include "client/connection.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/prefault.h"
#include "protocol/codec.h"

namespace tierkv {

Connection::Connection(proto::Address address, ClientOptions options)
    : address_(std::move(address)), options_(std::move(options)), spin_(options_.spin_us) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (pool_ != nullptr) munmap(pool_, pool_size_);
  pool_ = nullptr;
  pool_size_ = 0;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  reader_.Clear();
  broken_ = true;
  for (const Posted& p : posted_) {
    NoteUnknown(p, Code::kUnavailable,
                "the connection to " + address_.ToString() + " was lost before its reply");
  }
  posted_.clear();
}

void Connection::NoteUnknown(const Posted& p, Code code, const std::string& why) {
  if (p.what.empty() || !deferred_.ok()) return;
  deferred_ = Status(code, "the outcome of " + p.what + " is unknown: " + why);
}

bool Connection::HasCheckedUnread() const {
  return std::any_of(posted_.begin(), posted_.end(),
                     [](const Posted& p) { return !p.what.empty(); });
}

Status Connection::Open() {
  Close();
  Result<int> fd = proto::Connect(address_);
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  std::string body;
  proto::Writer w(&body);
  proto::HelloRequest req{options_.rank, options_.client_name, options_.name_space};
  req.Encode(w);
  std::string reply;
  if (Status st = Exchange(proto::Opcode::kHello, body, &reply, /*hello=*/true); !st.ok()) {
    Close();
    return st;
  }
  broken_ = false;
  return Status::Ok();
}

Status Connection::Call(proto::Opcode op, std::string_view body, std::string* reply) {
  if (HasCheckedUnread()) {
    if (Status st = Settle(); !st.ok()) return st;
  }
  return CallOverlapped(op, body, reply);
}

Status Connection::CallOverlapped(proto::Opcode op, std::string_view body, std::string* reply) {
  if (!deferred_.ok()) return TakeDeferred();
  if (broken_) {
    if (Status st = Open(); !st.ok()) return st;
  }
  send_failed_ = false;
  Status st = Exchange(op, body, reply, /*hello=*/false);
  if (!st.ok() && send_failed_) {
    // The request never left: the connection had died while idle (the manager
    // restarted, say). Retrying on a fresh connection cannot run it twice.
    if (Open().ok()) return Exchange(op, body, reply, /*hello=*/false);
  }
  return st;
}

Status Connection::Post(proto::Opcode op, std::string_view body) {
  if (broken_) return Status(Code::kUnavailable, "not connected");
  uint64_t id = 0;
  if (Status st = SendFrame(op, body, &id); !st.ok()) return st;
  posted_.push_back({id, op, {}});
  return Status::Ok();
}

Status Connection::PostChecked(proto::Opcode op, std::string_view body, std::string what) {
  if (!deferred_.ok()) return TakeDeferred();
  if (broken_) return Status(Code::kUnavailable, "not connected");
  uint64_t id = 0;
  if (Status st = SendFrame(op, body, &id); !st.ok()) return st;
  posted_.push_back({id, op, std::move(what)});
  return Status::Ok();
}

Status Connection::TakeDeferred() { return std::exchange(deferred_, Status::Ok()); }

Status Connection::Settle() {
  if (!posted_.empty() && !broken_) (void)ReadPosted();  // a lost connection is deferred
  return TakeDeferred();
}

Status Connection::ReadPosted() {
  proto::FrameHeader rh;
  int received_fd = -1;
  while (!posted_.empty()) {
    // Off the list before the read: a read that fails closes the connection,
    // and Close() reports the checked posts still on it as unknown.
    const Posted p = std::move(posted_.front());
    posted_.pop_front();
    if (Status st = ReadReply(&rh, &scratch_, false, &received_fd,
                              spin_.WindowUs(static_cast<uint16_t>(p.op)));
        !st.ok()) {
      NoteUnknown(p, Code::kUnavailable, st.message());
      return st;
    }
    if (rh.request_id != p.request_id) {
      NoteUnknown(p, Code::kProtocolError, "a reply came out of order");
      Close();
      return Status(Code::kProtocolError, "reply out of order (request id mismatch)");
    }
    if (!p.what.empty() && rh.status != 0 && deferred_.ok()) {
      proto::Reader r(scratch_);
      const Code code = static_cast<Code>(std::min<uint16_t>(rh.status, kMaxCode));
      deferred_ = Status(code, p.what + " failed: " + std::string(r.Str()));
    }
  }
  return Status::Ok();
}

Status Connection::SendFrame(proto::Opcode op, std::string_view body, uint64_t* request_id) {
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(op);
  h.request_id = next_request_++;
  *request_id = h.request_id;
  frame_.clear();
  proto::AppendFrame(&frame_, h, body);
  Status st = proto::WriteFull(fd_, frame_.data(), frame_.size(), options_.io_timeout_ms);
  if (!st.ok()) {
    send_failed_ = true;
    Close();
    return Status(Code::kUnavailable, "lost the connection to " + address_.ToString() + " (" +
                                          st.message() + "); the next call reconnects");
  }
  return Status::Ok();
}

Status Connection::ReadReply(proto::FrameHeader* header, std::string* body, bool with_fd, int* fd,
                             int spin_us) {
  uint8_t hdr[proto::kHeaderSize];
  *fd = -1;
  // The HELLO reply carries the pool's descriptor with its first byte, so
  // that header is read unbuffered (nothing else is in flight then).
  Status st = with_fd ? proto::ReadWithFd(fd_, hdr, sizeof(hdr), fd)
                      : reader_.Read(fd_, hdr, sizeof(hdr), options_.io_timeout_ms, spin_us);
  if (st.ok()) {
    *header = proto::DecodeHeader(hdr);
    st = proto::CheckHeader(*header, UINT32_MAX);
  }
  if (st.ok()) {
    body->resize(header->body_len);
    if (header->body_len > 0) {
      st = reader_.Read(fd_, body->data(), header->body_len, options_.io_timeout_ms);
    }
  }
  if (!st.ok()) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    Close();
    if (st.code() == Code::kUnavailable || st.code() == Code::kIoError) {
      return Status(Code::kUnavailable, "lost the connection to " + address_.ToString() + " (" +
                                            st.message() + "); the next call reconnects");
    }
    return st;
  }
  if (header->opcode == static_cast<uint16_t>(proto::Opcode::kFatal)) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    proto::Reader r(*body);
    const std::string msg(r.Str());
    Close();
    return Status(static_cast<Code>(std::min<uint16_t>(header->status, kMaxCode)),
                  "manager closed the connection: " + msg);
  }
  return Status::Ok();
}

Status Connection::Exchange(proto::Opcode op, std::string_view body, std::string* reply,
                            bool hello) {
  uint64_t id = 0;
  if (Status st = SendFrame(op, body, &id); !st.ok()) return st;
  const auto sent = std::chrono::steady_clock::now();
  proto::FrameHeader rh;
  int received_fd = -1;
  // Replies to posted requests come first.
  if (Status st = ReadPosted(); !st.ok()) return st;
  const bool with_fd = hello && address_.kind == proto::Address::Kind::kUnix;
  const auto kind = static_cast<uint16_t>(op);
  if (Status st = ReadReply(&rh, reply, with_fd, &received_fd, spin_.WindowUs(kind)); !st.ok()) {
    return st;
  }
  spin_.Record(kind, std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - sent)
                         .count());
  if (rh.request_id != id || (rh.flags & proto::kFlagResponse) == 0 || rh.status > kMaxCode) {
    if (received_fd >= 0) close(received_fd);
    Close();
    return Status(Code::kProtocolError, "reply does not match the request (id, flags or status)");
  }
  if (rh.status != 0) {
    if (received_fd >= 0) close(received_fd);
    proto::Reader r(*reply);
    return Status(static_cast<Code>(rh.status), std::string(r.Str()));
  }
  if (!hello) return Status::Ok();
  proto::Reader r(*reply);
  if (Status ds = hello_.Decode(r); !ds.ok()) {
    if (received_fd >= 0) close(received_fd);
    return ds;
  }
  if (hello_.shm && received_fd >= 0) {
    void* base =
        mmap(nullptr, hello_.pool_size, PROT_READ | PROT_WRITE, MAP_SHARED, received_fd, 0);
    const int err = errno;
    close(received_fd);
    if (base == MAP_FAILED) {
      return Status(Code::kIoError, std::string("mmap of the manager's pool: ") + strerror(err));
    }
    // Where the manager's pool has huge pages, this mapping uses them too
    // (with the kernel's "advise" policy a mapping must ask for itself).
    (void)madvise(base, hello_.pool_size, MADV_HUGEPAGE);
    if (options_.prefault_pool) PrefaultWritable(base, hello_.pool_size);
    pool_ = static_cast<uint8_t*>(base);
    pool_size_ = hello_.pool_size;
  } else if (received_fd >= 0) {
    close(received_fd);
  }
  return Status::Ok();
}

}  // namespace tierkv
