#include "soak_misbehave.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/socket_io.h"

namespace tierkv::soak {
namespace {

using bench::NowSeconds;
using proto::Opcode;

// A hand-driven protocol connection (blocking, with timeouts).
class Raw {
 public:
  explicit Raw(const std::string& address) {
    auto a = proto::ParseAddress(address);
    auto fd = a.ok() ? proto::Connect(*a) : Result<int>(a.status());
    fd_ = fd.ok() ? *fd : -1;
  }
  ~Raw() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Sends one request and reads its reply; false when the connection broke.
  bool Call(Opcode op, const std::string& body, Code* code, std::string* reply = nullptr) {
    proto::FrameHeader h;
    h.opcode = static_cast<uint16_t>(op);
    h.request_id = ++id_;
    std::string frame;
    proto::AppendFrame(&frame, h, body);
    if (!proto::WriteFull(fd_, frame.data(), frame.size(), 5000).ok()) return false;
    uint8_t hdr[proto::kHeaderSize];
    int passed = -1;
    if (!proto::ReadWithFd(fd_, hdr, sizeof(hdr), &passed).ok()) return false;
    if (passed >= 0) close(passed);
    const proto::FrameHeader r = proto::DecodeHeader(hdr);
    std::string b(r.body_len, '\0');
    if (r.body_len > 0 && !proto::ReadFull(fd_, b.data(), b.size(), 5000).ok()) return false;
    *code = static_cast<Code>(r.status);
    if (reply != nullptr) *reply = std::move(b);
    return true;
  }
  bool Hello(uint32_t rank) {
    std::string body;
    proto::Writer w(&body);
    proto::HelloRequest{rank, "misbehave", {}}.Encode(w);
    Code c;
    return Call(Opcode::kHello, body, &c) && c == Code::kOk;
  }

 private:
  int fd_ = -1;
  uint64_t id_ = 0;
};

std::string IdBody(uint64_t id) {
  std::string b;
  proto::Writer(&b).U64(id);
  return b;
}

// Foreign ids (random, as a guesser would send) and its own stale ones
// (released twice, committed after abort), over the Unix socket.
void ForeignIds(const std::string& uds, double deadline, MisbehaveTally* t) {
  std::mt19937_64 rng(42);
  while (NowSeconds() < deadline) {
    Raw c(uds);
    if (!c.ok() || !c.Hello(0)) {
      ++t->errors;
      return;
    }
    for (int i = 0; i < 200 && NowSeconds() < deadline; ++i) {
      const Opcode op = i % 3 == 0   ? Opcode::kCommit
                        : i % 3 == 1 ? Opcode::kAbort
                                     : Opcode::kRelease;
      Code code;
      if (!c.Call(op, IdBody(rng()), &code)) break;
      ++t->foreign_ids;
      if (code != Code::kNotFound) ++t->foreign_accepted;
    }
    // Stale ids of its own: an alloc aborted, then committed and aborted again.
    std::string body, reply;
    proto::Writer w(&body);
    proto::AllocRequest{"soak-misbehave", "stale", 4096, "", proto::kPutUpsert}.Encode(w);
    Code code;
    if (c.Call(Opcode::kAlloc, body, &code, &reply) && code == Code::kOk) {
      proto::Reader r(reply);
      const uint64_t id = proto::DecodeAllocReply(r).alloc_id;
      (void)c.Call(Opcode::kAbort, IdBody(id), &code);
      for (Opcode op : {Opcode::kCommit, Opcode::kAbort}) {
        if (!c.Call(op, IdBody(id), &code)) break;
        ++t->foreign_ids;
        if (code != Code::kNotFound) ++t->foreign_accepted;
      }
    }
  }
}

// Metric reports for ever new ranks, and with NaN values.
void MetricFlood(const std::string& tcp, double deadline, MisbehaveTally* t) {
  uint32_t rank = 1000;
  while (NowSeconds() < deadline) {
    Raw c(tcp);
    if (!c.ok() || !c.Hello(0)) {
      ++t->errors;
      return;
    }
    for (int i = 0; i < 500 && NowSeconds() < deadline; ++i) {
      proto::ReportMetricsRequest req;
      req.rank = rank++;
      proto::OpWindow o;
      o.op = 1;
      o.p99_s = i % 2 == 0 ? std::nan("") : 0.001;
      req.ops = {o};
      std::string body;
      proto::Writer w(&body);
      req.Encode(w);
      Code code;
      if (!c.Call(Opcode::kReportMetrics, body, &code)) break;
      ++t->reports;
    }
  }
}

// Connections that never say HELLO (the manager closes them at its handshake
// deadline) and sessions that say it and then sit idle, reopened in rounds.
void IdleConnections(const std::string& tcp, double deadline, MisbehaveTally* t) {
  while (NowSeconds() < deadline) {
    std::vector<std::unique_ptr<Raw>> conns;
    for (int i = 0; i < 200; ++i) {
      conns.push_back(std::make_unique<Raw>(tcp));
      if (i % 2 == 1 && conns.back()->ok()) (void)conns.back()->Hello(0);
      ++t->idle_conns;
    }
    for (int s = 0; s < 30 && NowSeconds() < deadline; ++s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // sitting idle is the point
    }
  }
}

// HTTP clients that send one header line a second and never finish.
void Trickle(const std::string& rest, double deadline, MisbehaveTally* t) {
  auto addr = proto::ParseAddress(rest.substr(std::string("http://").size()));
  if (!addr.ok()) return;
  std::vector<int> fds;
  for (int i = 0; i < 50; ++i) {
    auto fd = proto::Connect(*addr);
    if (fd.ok()) fds.push_back(*fd);
  }
  for (int fd : fds) (void)proto::WriteFull(fd, "GET /metrics HTTP/1.1\r\n", 23, 1000);
  for (int line = 0; NowSeconds() < deadline; ++line) {
    for (int fd : fds) {
      const std::string h = "X-Slow-" + std::to_string(line) + ": 1\r\n";
      if (send(fd, h.data(), h.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0) ++t->trickle_lines;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the trickle's pace
  }
  for (int fd : fds) close(fd);
}

}  // namespace

void Misbehave(const std::string& uds, const std::string& tcp, const std::string& rest,
               double deadline, MisbehaveTally* tally) {
  std::vector<std::thread> threads;
  threads.emplace_back(ForeignIds, uds, deadline, tally);
  threads.emplace_back(MetricFlood, tcp, deadline, tally);
  threads.emplace_back(IdleConnections, tcp, deadline, tally);
  threads.emplace_back(Trickle, rest, deadline, tally);
  for (auto& t : threads) t.join();
}

}  // namespace tierkv::soak
