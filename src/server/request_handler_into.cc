// RequestHandler's registered memory: REGISTER, UNREGISTER and BATCH_GET_INTO
// (docs/protocol.md, "Registered memory").
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/messages.h"
#include "protocol/socket_io.h"
#include "server/request_handler.h"
#include "server/server.h"

namespace tierkv {

using proto::Opcode;
using proto::Reader;
using proto::Writer;

namespace {

// The most pieces of memory one BATCH_GET_INTO may name, all items together.
constexpr uint32_t kMaxIntoPieces = 1u << 16;

// The descriptor of the file `inode` among those passed (oldest first): the
// others before it are closed (the client passed them for requests that
// never came). -1 when none is.
int TakeFdOf(proto::FdQueue* fds, uint64_t inode) {
  if (fds == nullptr) return -1;
  for (int fd = fds->Take(); fd >= 0; fd = fds->Take()) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == inode) return fd;
    close(fd);
  }
  return -1;
}

}  // namespace

Status RequestHandler::RequireRegistration(std::string_view op) const {
  if (Status st = RequireShm(op); !st.ok()) return st;
  if (regions_ == nullptr) {
    return Status(Code::kNotSupported, std::string(op) +
                                           ": this manager takes no registered memory "
                                           "(--max-registered-bytes 0)");
  }
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kRegister>(std::string_view body) {
  if (Status st = RequireRegistration("register"); !st.ok()) return st;
  Reader r(body);
  const uint64_t size = r.U64();
  const uint64_t inode = r.U64();
  if (Status st = r.Finish("register"); !st.ok()) return st;
  // The descriptor came with the request's bytes (or with bytes before
  // them): the one of the file the request names.
  Result<uint64_t> id = regions_->Register(TakeFdOf(fds_, inode), size);
  if (!id.ok()) return id.status();
  Writer(reply_).U64(*id);
  return Status::Ok();
}

template <>
Status RequestHandler::On<Opcode::kUnregister>(std::string_view body) {
  if (Status st = RequireRegistration("unregister"); !st.ok()) return st;
  Reader r(body);
  proto::IdRequest req;
  if (Status st = req.Decode(r, "unregister"); !st.ok()) return st;
  return regions_->Unregister(req.id);
}

template <>
Status RequestHandler::On<Opcode::kBatchGetInto>(std::string_view body) {
  if (Status st = RequireRegistration("batch_get_into"); !st.ok()) return st;
  Reader r(body);
  proto::GetIntoRequest req;
  if (Status st = req.Decode(r, ctx_.options->max_batch, kMaxIntoPieces); !st.ok()) return st;
  const size_t n = req.items.size();
  std::vector<Result<uint64_t>> out(n, Status(Code::kInternal, "not answered"));
  // Every item's memory is resolved before anything is read: an item that
  // names memory outside this session's regions is refused whole.
  std::vector<MemoryPiece> pieces(req.pieces.size());
  std::vector<IntoDest> dests(n);
  std::vector<std::string_view> keys;
  std::vector<size_t> idx;
  for (size_t i = 0; i < n; ++i) {
    const proto::GetIntoRequest::Item& it = req.items[i];
    Status bad;
    uint64_t total = 0;
    for (uint32_t p = 0; p < it.piece_count && bad.ok(); ++p) {
      const proto::GetIntoRequest::Piece& piece = req.pieces[it.first_piece + p];
      Result<MemoryPiece> m = regions_->Resolve(piece.region, piece.offset, piece.length);
      if (!m.ok()) {
        bad = m.status();
        break;
      }
      pieces[it.first_piece + p] = *m;
      total += m->size;
    }
    if (!bad.ok()) {
      out[i] = std::move(bad);
      continue;
    }
    dests[i] = {std::span<const MemoryPiece>(pieces).subspan(it.first_piece, it.piece_count), total,
                (it.flags & proto::kIntoExact) != 0};
    keys.push_back(it.key);
    idx.push_back(i);
  }
  GetIntoLocal(req.tenant, keys, idx, dests, out);
  Writer w(reply_);
  w.U32(static_cast<uint32_t>(n));
  for (const Result<uint64_t>& got : out) {
    w.ItemStatus(got.status());
    if (got.ok()) w.U64(*got);
  }
  return Status::Ok();
}

void RequestHandler::GetIntoLocal(std::string_view tenant, std::span<const std::string_view> keys,
                                  std::span<const size_t> idx, std::span<const IntoDest> dests,
                                  std::vector<Result<uint64_t>>& out) {
  Store* store = ctx_.store;
  RegisteredMemory& registered = regions_->shared();
  std::vector<Result<LeaseGrant>> grants =
      store->BatchLease(caller_, tenant, keys, ReadHold::kLease);
  std::vector<uint64_t> leases;
  std::vector<size_t> leased;  // the item of each lease
  std::vector<std::string_view> missed;
  std::vector<IntoDest> missed_dests;
  std::vector<size_t> missed_idx;
  for (size_t j = 0; j < keys.size(); ++j) {
    const size_t i = idx[j];
    const IntoDest& dest = dests[i];
    if (!grants[j].ok()) {
      if (grants[j].status().code() == Code::kNotFound && ctx_.catalog != nullptr) {
        missed.push_back(keys[j]);
        missed_dests.push_back(dest);
        missed_idx.push_back(i);
      } else {
        out[i] = grants[j].status();
      }
      continue;
    }
    const LeaseGrant& g = *grants[j];
    leases.push_back(g.lease_id);
    leased.push_back(i);
    if (Status fits = dest.Fits(g.size); !fits.ok()) {
      out[i] = std::move(fits);
      continue;
    }
    ScatterInto(dest.pieces, g.data, g.size);
    out[i] = g.size;
  }
  // A copy is the value's only when its lease held to the end: one that
  // expired meanwhile (LEASE_EXPIRED) may have been reused under it.
  if (!leases.empty()) {
    const std::vector<Status> released = store->BatchRelease(caller_, leases);
    for (size_t k = 0; k < leases.size(); ++k) {
      Result<uint64_t>& got = out[leased[k]];
      if (!got.ok()) continue;
      if (!released[k].ok()) {
        got = released[k];
        continue;
      }
      registered.CountGet(/*remote=*/false, *got);
    }
  }
  if (missed.empty()) return;
  std::vector<Result<uint64_t>> fetched =
      ctx_.catalog->FetchInto(tenant, missed, caller_.name_space, missed_dests);
  for (size_t j = 0; j < missed.size(); ++j) {
    if (fetched[j].ok()) registered.CountGet(/*remote=*/true, *fetched[j]);
    out[missed_idx[j]] = std::move(fetched[j]);
  }
}

}  // namespace tierkv
