#include "server/session.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "protocol/codec.h"

namespace tierkv {

using proto::Opcode;

Session::Session(Server* server, Store* store, int fd, bool unix_socket, uint64_t id,
                 int64_t handshake_deadline_ns)
    : server_(server),
      store_(store),
      fd_(fd),
      unix_socket_(unix_socket),
      handshake_deadline_ns_(handshake_deadline_ns),
      clock_(RealClock()),
      handler_({&server->options(), store, &server->client_metrics(), server->catalog(),
                &server->registered()},
               unix_socket, id),
      pacer_(server->options().spin_us) {
  if (unix_socket) {
    reader_.CollectFds(&fds_);
    handler_.SetFdQueue(&fds_);
  }
}

namespace {

// Waits up to `ms` (< 0: forever) for `fd` to become readable (or to end).
bool WaitReadable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int rc = poll(&p, 1, ms);
    if (rc >= 0) return rc > 0;
    if (errno != EINTR) return true;  // let the read report the error
  }
}

}  // namespace

bool Session::WaitForRequest(int ms) {
  if (reader_.buffered() > 0) return true;  // the next request is already here
  // In slices, so that a connection waiting for a worker while all are busy
  // makes an idle one give its worker up at once.
  constexpr int kSliceMs = 5;
  for (int waited = 0; ms < 0 || waited < ms; waited += kSliceMs) {
    const int slice = ms < 0 ? kSliceMs : std::min(kSliceMs, ms - waited);
    if (WaitReadable(fd_, slice)) return true;
    if (hello_done() && server_->Saturated()) return false;
  }
  return false;
}

std::optional<RequestWait> Session::AwaitPaced(int gap_us, int spin_us) {
  if (reader_.buffered() > 0) return RequestWait::kPolled;
  const int sleep_us = gap_us - spin_us / 2;
  const timespec ts{sleep_us / 1'000'000, static_cast<long>(sleep_us % 1'000'000) * 1000};
  pollfd p{fd_, POLLIN, 0};
  const int rc = ppoll(&p, 1, &ts, nullptr);
  if (rc > 0) return RequestWait::kSlept;  // came early (or an end the read reports)
  if (rc < 0) return std::nullopt;         // interrupted: the ordinary wait follows
  if (reader_.SpinFill(fd_, spin_us)) return RequestWait::kPaced;
  return std::nullopt;
}

void Session::Run() {
  while (Serve(-1)) {
  }
}

bool Session::Serve(int park_ms) {
  const ServerOptions& opt = server_->options();
  for (;;) {
    RequestPacer::Plan plan = pacer_.Next(park_ms, hello_done());
    // Before HELLO every wait is bounded by the handshake deadline.
    int io_timeout = opt.io_timeout_ms;
    if (!hello_done()) {
      const int64_t left_ms = (handshake_deadline_ns_ - clock_->NowNanos()) / 1'000'000;
      if (left_ms <= 0) {
        server_->CountHandshakeTimeout();
        return false;
      }
      io_timeout = static_cast<int>(std::min<int64_t>(io_timeout, left_ms));
      plan.wait_ms = plan.wait_ms < 0 ? io_timeout : std::min(plan.wait_ms, io_timeout);
    }
    const int64_t wait_start = clock_->NowNanos();
    std::optional<RequestWait> how =
        plan.paced_gap_us > 0
            ? AwaitPaced(plan.paced_gap_us, opt.spin_us)
            : (reader_.SpinFill(fd_, plan.spin_us) ? std::optional(RequestWait::kPolled)
                                                   : std::nullopt);
    if (!how && WaitForRequest(plan.wait_ms)) how = RequestWait::kSlept;
    if (!how) {
      if (hello_done()) {  // idle: park, without a read buffer (nothing is in it)
        reader_.Release();
        return true;
      }
      continue;  // the handshake deadline is checked above
    }
    proto::FrameHeader h;
    if (!ReadRequest(io_timeout, &h)) return false;
    pacer_.Record((clock_->NowNanos() - wait_start) / 1000, h.opcode);
    server_->CountRequest(*how);
    reply_.assign(proto::kHeaderSize, '\0');
    const Status st = handler_.Handle(h, body_, &reply_);
    if (!SendReply(h, st).ok()) return false;
  }
}

bool Session::ReadRequest(int io_timeout_ms, proto::FrameHeader* h) {
  uint8_t hdr[proto::kHeaderSize];
  if (!reader_.Read(fd_, hdr, sizeof(hdr), io_timeout_ms).ok()) return false;  // closed
  *h = proto::DecodeHeader(hdr);
  if (Status st = proto::CheckHeader(*h, server_->options().max_frame_bytes); !st.ok()) {
    server_->CountProtocolError();
    SendFatal(st);
    return false;
  }
  if (!hello_done() && h->opcode != static_cast<uint16_t>(Opcode::kHello)) {
    server_->CountProtocolError();
    SendFatal(Status(Code::kProtocolError, "the first request must be HELLO"));
    return false;
  }
  body_.resize(h->body_len);
  return h->body_len == 0 || reader_.Read(fd_, body_.data(), h->body_len, io_timeout_ms).ok();
}

Status Session::SendReply(const proto::FrameHeader& request, const Status& status) {
  if (!status.ok()) {
    reply_.resize(proto::kHeaderSize);
    proto::Writer(&reply_).Str(status.message());
  }
  const auto body_len = static_cast<uint32_t>(reply_.size() - proto::kHeaderSize);
  proto::EncodeHeader(proto::ResponseHeader(request, status.code(), body_len),
                      reinterpret_cast<uint8_t*>(reply_.data()));
  const bool hello_with_fd =
      unix_socket_ && status.ok() && request.opcode == static_cast<uint16_t>(Opcode::kHello);
  if (hello_with_fd) {
    const int fds[] = {store_->pool().fd(), store_->pool().generations_fd()};
    return proto::WriteWithFds(fd_, reply_.data(), reply_.size(),
                               std::span<const int>(fds, handler_.send_generations() ? 2 : 1));
  }
  return proto::WriteFull(fd_, reply_.data(), reply_.size(), server_->options().io_timeout_ms);
}

void Session::SendFatal(const Status& status) {
  const std::string frame = proto::FatalFrame(status);
  (void)proto::WriteFull(fd_, frame.data(), frame.size(), 1000);
}

}  // namespace tierkv
