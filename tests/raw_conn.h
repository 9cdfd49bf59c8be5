// RawConn: a hand-driven protocol connection for tests that send frames a real
// client never would.
#ifndef TIERKV_TESTS_RAW_CONN_H_
#define TIERKV_TESTS_RAW_CONN_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/socket_io.h"

namespace tierkv::testing {

struct RawReply {
  proto::FrameHeader header;
  std::string body;
  Code code() const { return static_cast<Code>(header.status); }
  std::string message() const {
    proto::Reader r(body);
    return std::string(r.Str());
  }
};

class RawConn {
 public:
  // Connects and, unless `hello` is false, completes the handshake (the manager
  // answers nothing but HELLO first).
  explicit RawConn(const std::string& address, bool hello = true) {
    auto fd = proto::Connect(*proto::ParseAddress(address));
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    fd_ = fd.ok() ? *fd : -1;
    if (hello && fd_ >= 0) {
      EXPECT_EQ(Hello().code(), Code::kOk);
    }
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
    if (pool_fd_ >= 0) close(pool_fd_);
    if (generations_fd_ >= 0) close(generations_fd_);
  }
  int fd() const { return fd_; }
  // The DRAM pool's memfd from the last hello reply over a Unix socket, or -1.
  int pool_fd() const { return pool_fd_; }
  // The generation table's memfd passed with it (HELLO flag), or -1.
  int generations_fd() const { return generations_fd_; }
  // Sends hello (with `flags`) and keeps the descriptors; returns the reply.
  RawReply Hello(uint32_t rank = 0, uint8_t flags = 0) {
    std::string body;
    proto::Writer w(&body);
    proto::HelloRequest req{rank, "raw", {}};
    req.flags = flags;
    req.Encode(w);
    return Call(proto::Opcode::kHello, body);
  }

  void SendBytes(std::string_view bytes) {
    ASSERT_TRUE(proto::WriteFull(fd_, bytes.data(), bytes.size(), 5000).ok());
  }
  void Send(proto::Opcode op, std::string_view body, uint64_t id = 1) {
    proto::FrameHeader h;
    h.opcode = static_cast<uint16_t>(op);
    h.request_id = id;
    std::string frame;
    proto::AppendFrame(&frame, h, body);
    SendBytes(frame);
  }
  // Reads one frame; descriptors passed with it replace pool_fd() and
  // generations_fd().
  bool Read(RawReply* out) {
    uint8_t hdr[proto::kHeaderSize];
    int passed[proto::kMaxPassedFds] = {-1, -1};
    if (!proto::ReadWithFds(fd_, hdr, sizeof(hdr), passed).ok()) return false;
    if (passed[0] >= 0) {
      if (pool_fd_ >= 0) close(pool_fd_);
      if (generations_fd_ >= 0) close(generations_fd_);
      pool_fd_ = passed[0];
      generations_fd_ = passed[1];
    }
    out->header = proto::DecodeHeader(hdr);
    out->body.resize(out->header.body_len);
    return out->header.body_len == 0 ||
           proto::ReadFull(fd_, out->body.data(), out->body.size(), 5000).ok();
  }
  // Read, when a frame starts within `ms`; false otherwise.
  bool ReadWithin(RawReply* out, int ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, ms) > 0 && Read(out);
  }
  RawReply Call(proto::Opcode op, std::string_view body, uint64_t id = 1) {
    Send(op, body, id);
    RawReply r;
    EXPECT_TRUE(Read(&r));
    EXPECT_EQ(r.header.request_id, id);
    return r;
  }
  // True when the manager has closed the connection (EOF within `ms`).
  bool ClosedWithin(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return false;
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  int pool_fd_ = -1;
  int generations_fd_ = -1;
};

inline std::string IdBody(uint64_t id) {
  std::string body;
  proto::Writer(&body).U64(id);
  return body;
}

inline std::string KeyBody(std::string_view tenant, std::string_view key) {
  std::string body;
  proto::Writer w(&body);
  proto::KeyRequest{tenant, key}.Encode(w);
  return body;
}

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_RAW_CONN_H_
