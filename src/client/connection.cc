#include "client/connection.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol/codec.h"

namespace tierkv {

Connection::Connection(proto::Address address, ClientOptions options)
    : address_(std::move(address)), options_(std::move(options)) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (pool_ != nullptr) munmap(pool_, pool_size_);
  pool_ = nullptr;
  pool_size_ = 0;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  broken_ = true;
}

Status Connection::Open() {
  Close();
  Result<int> fd = proto::Connect(address_);
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  std::string body;
  proto::Writer w(&body);
  proto::HelloRequest req{options_.rank, options_.client_name};
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
  if (broken_) {
    if (Status st = Open(); !st.ok()) return st;
  }
  return Exchange(op, body, reply, /*hello=*/false);
}

Status Connection::Exchange(proto::Opcode op, std::string_view body, std::string* reply,
                            bool hello) {
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(op);
  h.request_id = next_request_++;
  frame_.clear();
  proto::AppendFrame(&frame_, h, body);
  auto fail = [this](Status st) {
    Close();
    if (st.code() == Code::kUnavailable || st.code() == Code::kIoError) {
      return Status(Code::kUnavailable, "lost the connection to " + address_.ToString() + " (" +
                                            st.message() + "); the next call reconnects");
    }
    return st;
  };
  if (Status st = proto::WriteFull(fd_, frame_.data(), frame_.size(), options_.io_timeout_ms);
      !st.ok()) {
    return fail(st);
  }
  uint8_t hdr[proto::kHeaderSize];
  int received_fd = -1;
  Status st = hello && address_.kind == proto::Address::Kind::kUnix
                  ? proto::ReadWithFd(fd_, hdr, sizeof(hdr), &received_fd)
                  : proto::ReadFull(fd_, hdr, sizeof(hdr), options_.io_timeout_ms);
  if (!st.ok()) return fail(st);
  const proto::FrameHeader rh = proto::DecodeHeader(hdr);
  if (Status hs = proto::CheckHeader(rh, UINT32_MAX); !hs.ok()) {
    if (received_fd >= 0) close(received_fd);
    return fail(hs);
  }
  reply->resize(rh.body_len);
  if (rh.body_len > 0) {
    st = proto::ReadFull(fd_, reply->data(), rh.body_len, options_.io_timeout_ms);
    if (!st.ok()) {
      if (received_fd >= 0) close(received_fd);
      return fail(st);
    }
  }
  const bool fatal = rh.opcode == static_cast<uint16_t>(proto::Opcode::kFatal);
  if (fatal || rh.request_id != h.request_id || (rh.flags & proto::kFlagResponse) == 0 ||
      rh.status > kMaxCode) {
    if (received_fd >= 0) close(received_fd);
    proto::Reader r(*reply);
    std::string msg(r.Str());
    if (!fatal) msg = "reply does not match the request (id or flags)";
    Close();
    return Status(
        fatal ? static_cast<Code>(std::min<uint16_t>(rh.status, kMaxCode)) : Code::kProtocolError,
        "manager closed the connection: " + msg);
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
    void* base = mmap(nullptr, hello_.pool_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | (options_.prefault_pool ? MAP_POPULATE : 0), received_fd, 0);
    const int err = errno;
    close(received_fd);
    if (base == MAP_FAILED) {
      return Status(Code::kIoError, std::string("mmap of the manager's pool: ") + strerror(err));
    }
    pool_ = static_cast<uint8_t*>(base);
    pool_size_ = hello_.pool_size;
  } else if (received_fd >= 0) {
    close(received_fd);
  }
  return Status::Ok();
}

}  // namespace tierkv
