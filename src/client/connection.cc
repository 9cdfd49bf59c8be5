#include "client/connection.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/prefault.h"
#include "protocol/codec.h"

namespace tierkv {
namespace {

void CloseAll(std::span<int> fds) {
  for (int& fd : fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

}  // namespace

Connection::Connection(proto::Address address, ClientOptions options)
    : address_(std::move(address)), options_(std::move(options)), spin_(options_.spin_us) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  pool_map_.reset();
  incarnation_.fetch_add(
      1, std::memory_order_release);  // the pins of the connection that ends end with it
  pool_ = nullptr;
  pool_size_ = 0;
  if (generations_ != nullptr) munmap(const_cast<uint32_t*>(generations_), generations_bytes_);
  generations_ = nullptr;
  generations_bytes_ = 0;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  reader_.Clear();
  held_.clear();
  held_frames_ = 0;
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
  if (options_.lease_free_reads && address_.kind == proto::Address::Kind::kUnix) {
    req.flags = proto::kHelloGenerations;
  }
  if (!options_.device_copies.empty() && address_.kind == proto::Address::Kind::kUnix) {
    req.flags |= proto::kHelloHbm;  // the HBM pools, for GPU-to-GPU copies
  }
  req.Encode(w);
  std::string reply;
  Status st = Exchange(proto::Opcode::kHello, body, &reply, /*hello=*/true);
  if (st.code() == Code::kProtocolError && req.flags != 0 && fd_ >= 0) {
    // A manager that predates HELLO flags refuses the trailing byte and keeps
    // the connection open: greet it without them (gets then take leases).
    body.clear();
    req.flags = 0;
    req.Encode(w);
    st = Exchange(proto::Opcode::kHello, body, &reply, /*hello=*/true);
  }
  if (!st.ok()) {
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

Status Connection::CallPassing(proto::Opcode op, std::string_view body, int fd,
                               std::string* reply) {
  if (broken_) return Status(Code::kUnavailable, "not connected");
  pass_fd_ = fd;
  Status st = Call(op, body, reply);
  pass_fd_ = -1;  // not sent (an earlier failure came first): nothing passed
  return st;
}

Status Connection::Post(proto::Opcode op, std::string_view body) {
  if (broken_) return Status(Code::kUnavailable, "not connected");
  uint64_t id = 0;
  if (Status st = SendFrame(op, body, &id); !st.ok()) return st;
  posted_.push_back({id, op, {}});
  return Status::Ok();
}

Status Connection::PostLater(proto::Opcode op, std::string_view body) {
  if (broken_) return Status(Code::kUnavailable, "not connected");
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(op);
  h.request_id = next_request_++;
  proto::AppendFrame(&held_, h, body);
  posted_.push_back({h.request_id, op, {}});
  if (++held_frames_ < kMaxHeldFrames) return Status::Ok();
  return WriteHeld();
}

Status Connection::WriteHeld() {
  if (held_.empty()) return Status::Ok();
  frame_.swap(held_);
  held_.clear();
  held_frames_ = 0;
  return WriteFrames();
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
  if (!broken_) (void)WriteHeld();  // a lost connection is deferred
  if (!posted_.empty() && !broken_) (void)ReadPosted();
  return TakeDeferred();
}

Status Connection::ReadPosted() {
  proto::FrameHeader rh;
  while (!posted_.empty()) {
    // Off the list before the read: a read that fails closes the connection,
    // and Close() reports the checked posts still on it as unknown.
    const Posted p = std::move(posted_.front());
    posted_.pop_front();
    if (Status st = ReadReply(&rh, &scratch_, {}, spin_.WindowUs(static_cast<uint16_t>(p.op)));
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
  frame_.swap(held_);  // held-back posts go first, in the same write
  held_frames_ = 0;
  if (body.size() < kJoinBelow) {
    proto::AppendFrame(&frame_, h, body);
    return WriteFrames();
  }
  // A large body (a value inline) is not copied next to its header.
  h.body_len = static_cast<uint32_t>(body.size());
  uint8_t header[proto::kHeaderSize];
  proto::EncodeHeader(h, header);
  frame_.append(reinterpret_cast<const char*>(header), sizeof(header));
  return WriteFrames(body);
}

Status Connection::WriteFrames(std::string_view tail) {
  Status st;
  if (pass_fd_ >= 0 && tail.empty()) {
    const int fds[] = {std::exchange(pass_fd_, -1)};
    st = proto::WriteWithFds(fd_, frame_.data(), frame_.size(), fds);
  } else {
    st = tail.empty() ? proto::WriteFull(fd_, frame_.data(), frame_.size(), options_.io_timeout_ms)
                      : proto::WriteFull2(fd_, frame_, tail, options_.io_timeout_ms);
  }
  if (!st.ok()) {
    send_failed_ = true;
    Close();
    return Status(Code::kUnavailable, "lost the connection to " + address_.ToString() + " (" +
                                          st.message() + "); the next call reconnects");
  }
  return Status::Ok();
}

Status Connection::ReadReply(proto::FrameHeader* header, std::string* body, std::span<int> fds,
                             int spin_us) {
  uint8_t hdr[proto::kHeaderSize];
  // The HELLO reply carries the pool's descriptors with its first byte, so
  // that header is read unbuffered (nothing else is in flight then).
  Status st = !fds.empty() ? proto::ReadWithFds(fd_, hdr, sizeof(hdr), fds)
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
    CloseAll(fds);
    Close();
    if (st.code() == Code::kUnavailable || st.code() == Code::kIoError) {
      return Status(Code::kUnavailable, "lost the connection to " + address_.ToString() + " (" +
                                            st.message() + "); the next call reconnects");
    }
    return st;
  }
  if (header->opcode == static_cast<uint16_t>(proto::Opcode::kFatal)) {
    CloseAll(fds);
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
  // The pool's descriptor, then the generation table's.
  int fds[proto::kMaxPassedFds] = {-1, -1};
  const bool with_fds = hello && address_.kind == proto::Address::Kind::kUnix;
  // Replies to posted requests come first.
  if (Status st = ReadPosted(); !st.ok()) return st;
  const auto kind = static_cast<uint16_t>(op);
  if (Status st = ReadReply(&rh, reply, with_fds ? std::span<int>(fds) : std::span<int>(),
                            spin_.WindowUs(kind));
      !st.ok()) {
    return st;
  }
  spin_.Record(kind, std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - sent)
                         .count());
  if (rh.request_id != id || (rh.flags & proto::kFlagResponse) == 0 || rh.status > kMaxCode) {
    CloseAll(fds);
    Close();
    return Status(Code::kProtocolError, "reply does not match the request (id, flags or status)");
  }
  if (rh.status != 0) {
    CloseAll(fds);
    proto::Reader r(*reply);
    return Status(static_cast<Code>(rh.status), std::string(r.Str()));
  }
  if (!hello) return Status::Ok();
  proto::Reader r(*reply);
  if (Status ds = hello_.Decode(r); !ds.ok()) {
    CloseAll(fds);
    return ds;
  }
  return MapShared(fds[0], fds[1]);
}

Status Connection::MapShared(int pool_fd, int generations_fd) {
  if (!hello_.shm || pool_fd < 0) {
    int both[] = {pool_fd, generations_fd};
    CloseAll(both);
    return Status::Ok();
  }
  void* base = mmap(nullptr, hello_.pool_size, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd, 0);
  const int err = errno;
  close(pool_fd);
  if (base == MAP_FAILED) {
    if (generations_fd >= 0) close(generations_fd);
    return Status(Code::kIoError, std::string("mmap of the manager's pool: ") + strerror(err));
  }
  // Where the manager's pool has huge pages, this mapping uses them too
  // (with the kernel's "advise" policy a mapping must ask for itself).
  (void)madvise(base, hello_.pool_size, MADV_HUGEPAGE);
  if (options_.prefault_pool) PrefaultWritable(base, hello_.pool_size);
  pool_ = static_cast<uint8_t*>(base);
  pool_size_ = hello_.pool_size;
  pool_map_ = std::shared_ptr<void>(base, [size = pool_size_](void* p) { munmap(p, size); });
  if (generations_fd < 0) return Status::Ok();
  // Without a usable table the client reads under leases, as before.
  const uint32_t page = hello_.generation_page_bytes;
  if (hello_.generations == 1 && page != 0 && pool_size_ % page == 0) {
    const uint64_t bytes = pool_size_ / page * sizeof(uint32_t);
    void* table = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, generations_fd, 0);
    if (table != MAP_FAILED) {
      generations_ = static_cast<const uint32_t*>(table);
      generations_bytes_ = bytes;
    }
  }
  close(generations_fd);
  return Status::Ok();
}

bool Connection::CopyIntact(uint64_t offset, uint32_t generation) const {
  // The copy's loads complete before the generation is read (a seqlock
  // reader's fence): a range freed during the copy shows a newer generation.
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t page = offset / hello_.generation_page_bytes;
  if (page >= generations_bytes_ / sizeof(uint32_t)) return false;
  return __atomic_load_n(generations_ + page, __ATOMIC_ACQUIRE) == generation;
}

}  // namespace tierkv
