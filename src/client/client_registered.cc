// tierkv::Client's registered memory: buffers the manager writes gets into
// (REGISTER, BATCH_GET_INTO; docs/protocol.md, "Registered memory").
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>

#include "client/client_impl.h"
#include "common/prefault.h"
#include "common/shared_memory.h"

namespace tierkv {

namespace {

// The most pieces of memory one BATCH_GET_INTO names (the manager's limit).
constexpr size_t kMaxPiecesPerCall = 1u << 16;
// Bytes one item adds to a BATCH_GET_INTO beyond its key, and one piece.
constexpr size_t kIntoItemBytes = 4 + 1 + 4;
constexpr size_t kIntoPieceBytes = 24;

}  // namespace

Result<RegisteredBuffer> Client::RegisterBuffer(size_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (bytes == 0) return InvalidArgument("register_buffer: 0 bytes");
  if (Status st = impl_->conn.EnsureOpen(); !st.ok()) return st;
  if (!impl_->conn.shared_memory()) {
    return Status(Code::kNotSupported,
                  "register_buffer needs a Unix-socket connection (the manager maps the memory)");
  }
  Impl::Registration r;
  void* base =
      MapNewMemfd("tierkv-registered", bytes, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &r.fd);
  if (base == nullptr) {
    return Status(Code::kIoError, std::string("register_buffer: memfd: ") + std::strerror(errno));
  }
  struct stat st {};
  (void)fstat(r.fd, &st);
  (void)PrefaultWritable(base, bytes);
  // Unique in the process: a buffer of another client is never this one's.
  static std::atomic<uint64_t> next_handle{1};
  r.handle = next_handle.fetch_add(1, std::memory_order_relaxed);
  r.inode = static_cast<uint64_t>(st.st_ino);
  r.data = static_cast<uint8_t*>(base);
  r.size = bytes;
  r.mapping = std::shared_ptr<void>(base, [bytes](void* p) { munmap(p, bytes); });
  // Registered now, so that a refusal is this call's answer.
  if (Status reg = impl_->Register(r); !reg.ok()) {
    close(r.fd);
    return reg;
  }
  RegisteredBuffer out{r.handle, r.data, r.size, r.mapping};
  impl_->registrations.emplace(reinterpret_cast<uintptr_t>(base), std::move(r));
  return out;
}

Status Client::UnregisterBuffer(uint64_t id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = std::find_if(impl_->registrations.begin(), impl_->registrations.end(),
                         [id](const auto& e) { return e.second.handle == id; });
  if (it == impl_->registrations.end()) {
    return NotFound("unregister_buffer: no registered buffer " + std::to_string(id));
  }
  Impl::Registration& r = it->second;
  Status st;
  if (r.incarnation == impl_->conn.incarnation() && !r.refused) {
    Writer w = impl_->Begin();
    w.U64(r.region);
    st = impl_->Call(Opcode::kUnregister);
    // A connection lost meanwhile took the registration with it.
    if (st.code() == Code::kUnavailable) st = Status::Ok();
  }
  close(r.fd);
  impl_->registrations.erase(it);
  return st;
}

Status Client::Impl::Register(Registration& r) {
  Writer w = Begin();
  w.U64(r.size);
  w.U64(r.inode);
  const Status st = conn.CallPassing(Opcode::kRegister, body, r.fd, &reply);
  if (st.code() == Code::kUnavailable) {
    r.incarnation.reset();  // no answer: asked again on the next connection
    return st;
  }
  r.incarnation = conn.incarnation();
  r.refused = !st.ok();
  if (!st.ok()) return st;
  Reader rr(reply);
  r.region = rr.U64();
  if (!rr.done()) {
    r.refused = true;
    return Status(Code::kProtocolError, "malformed register reply");
  }
  return Status::Ok();
}

bool Client::Impl::EnsureRegistered(Registration& r) {
  if (r.incarnation == conn.incarnation()) return !r.refused;
  return Register(r).ok();
}

Client::Impl::Registration* Client::Impl::RegisteredAt(const void* p, size_t n) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = registrations.upper_bound(addr);
  if (it == registrations.begin()) return nullptr;
  --it;
  Registration& r = it->second;
  if (addr - it->first > r.size || n > r.size - (addr - it->first)) return nullptr;
  return &r;
}

std::vector<Status> Client::Impl::BatchGetRegistered(
    std::span<const std::string_view> keys, std::string_view tenant,
    const std::function<std::span<const Region>(size_t)>& parts_of, const std::vector<bool>& exact,
    const ValueSink& sink, std::vector<size_t>& sizes, uint64_t* bytes) {
  std::vector<Status> out(keys.size());
  const int64_t start = MonoNanos();
  const std::vector<size_t> rest =
      GetIntoRegistered(keys, tenant, parts_of, exact, out, sizes, bytes);
  if (rest.size() == keys.size()) return BatchGetAll(keys, tenant, sink, bytes);
  Account(TransferStats::kBatchGet, *bytes, start);
  if (rest.empty()) return out;
  std::vector<std::string_view> rest_keys;
  for (size_t i : rest) rest_keys.push_back(keys[i]);
  const std::vector<Status> got = BatchGetAll(
      rest_keys, tenant,
      [&](size_t j, const char* data, size_t size) { return sink(rest[j], data, size); }, bytes);
  for (size_t j = 0; j < rest.size(); ++j) out[rest[j]] = got[j];
  return out;
}

std::vector<size_t> Client::Impl::GetIntoRegistered(
    std::span<const std::string_view> keys, std::string_view tenant,
    const std::function<std::span<const Region>(size_t)>& parts_of, const std::vector<bool>& exact,
    std::vector<Status>& out, std::vector<size_t>& sizes, uint64_t* bytes) {
  std::vector<size_t> rest;
  if (registrations.empty() || !conn.EnsureOpen().ok() || !conn.shared_memory()) {
    for (size_t i = 0; i < keys.size(); ++i) rest.push_back(i);
    return rest;
  }
  std::vector<size_t> idx;
  std::vector<proto::GetIntoRequest::Piece> pieces;
  std::vector<uint32_t> counts;
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t start = pieces.size();
    bool registered = true;
    for (const Region& part : parts_of(i)) {
      if (part.size == 0) continue;
      Registration* r = RegisteredAt(part.data, part.size);
      if (r == nullptr || !EnsureRegistered(*r)) {
        registered = false;
        break;
      }
      pieces.push_back({r->region,
                        static_cast<uint64_t>(static_cast<uint8_t*>(part.data) - r->data),
                        part.size});
    }
    if (!registered || pieces.size() == start || pieces.size() - start > kMaxPiecesPerCall) {
      pieces.resize(start);
      rest.push_back(i);
      continue;
    }
    idx.push_back(i);
    counts.push_back(static_cast<uint32_t>(pieces.size() - start));
  }
  // Chunks within the batch, piece and frame limits.
  size_t item = 0, piece = 0;
  while (item < idx.size()) {
    size_t n = 0, np = 0, frame = kFrameOverhead + tenant.size();
    while (item + n < idx.size() && n < MaxBatch()) {
      const size_t more = counts[item + n];
      const size_t grow = kIntoItemBytes + keys[idx[item + n]].size() + more * kIntoPieceBytes;
      if (n > 0 && (np + more > kMaxPiecesPerCall || frame + grow > MaxFrame())) break;
      frame += grow;
      np += more;
      ++n;
    }
    GetIntoChunk(keys, tenant, std::span<const size_t>(idx).subspan(item, n), exact,
                 std::span<const proto::GetIntoRequest::Piece>(pieces).subspan(piece, np),
                 std::span<const uint32_t>(counts).subspan(item, n), out, sizes, bytes);
    item += n;
    piece += np;
  }
  return rest;
}

void Client::Impl::GetIntoChunk(std::span<const std::string_view> keys, std::string_view tenant,
                                std::span<const size_t> idx, const std::vector<bool>& exact,
                                std::span<const proto::GetIntoRequest::Piece> pieces,
                                std::span<const uint32_t> counts, std::vector<Status>& out,
                                std::vector<size_t>& sizes, uint64_t* bytes) {
  proto::GetIntoRequest req;
  req.tenant = tenant;
  req.pieces.assign(pieces.begin(), pieces.end());
  uint32_t first = 0;
  for (size_t j = 0; j < idx.size(); ++j) {
    req.items.push_back({keys[idx[j]], static_cast<uint8_t>(exact[idx[j]] ? proto::kIntoExact : 0),
                         first, counts[j]});
    first += counts[j];
  }
  Writer w = Begin();
  req.Encode(w);
  if (Status st = Call(Opcode::kBatchGetInto); !st.ok()) {
    for (size_t i : idx) out[i] = st;
    return;
  }
  Reader r(reply);
  const uint32_t n = r.U32();
  for (uint32_t j = 0; j < n && j < idx.size(); ++j) {
    Status st = r.ItemStatus();
    if (!st.ok()) {
      out[idx[j]] = std::move(st);
      continue;
    }
    sizes[idx[j]] = r.U64();
    out[idx[j]] = Status::Ok();
    *bytes += sizes[idx[j]];
  }
  if (!r.done() || n != idx.size()) {
    for (size_t i : idx) out[i] = Status(Code::kProtocolError, "malformed batch_get_into reply");
  }
}

}  // namespace tierkv
