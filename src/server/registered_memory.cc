#include "server/registered_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/prefault.h"

namespace tierkv {
namespace {

constexpr MetricFamily kRegions{"tierkv_registered_regions", "gauge",
                                "Client memory regions registered now (all sessions)"};
constexpr MetricFamily kBytes{"tierkv_registered_bytes", "gauge",
                              "Bytes of client memory registered now (all sessions)"};
constexpr MetricFamily kRegistrations{"tierkv_registrations_total", "counter",
                                      "Client memory regions registered"};
constexpr MetricFamily kRefused{
    "tierkv_registrations_refused_total", "counter",
    "REGISTER requests refused: no descriptor, not a sealed writable memfd, over a budget"};
constexpr MetricFamily kGets{"tierkv_registered_gets_total", "counter",
                             "Values written into registered memory by gets, by where they "
                             "were: in this manager's store (local) or read from an owner"};
constexpr MetricFamily kGetBytes{"tierkv_registered_get_bytes_total", "counter",
                                 "Bytes written into registered memory by gets, by where"};

// Closes a descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<RegisteredRegion>> RegisteredMemory::Map(int fd, uint64_t size,
                                                                uint64_t session_bytes) {
  FdCloser closer{fd};
  auto refuse = [this](Code code, std::string why) {
    CountRefused();
    return Status(code, std::move(why));
  };
  if (fd < 0) {
    return refuse(Code::kInvalidArgument,
                  "register: no descriptor came with the request (send the region's memfd "
                  "with it)");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return refuse(Code::kInvalidArgument, "register: the descriptor is not a memfd");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return refuse(Code::kInvalidArgument,
                  "register: the descriptor is not a memfd that allows sealing");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return refuse(Code::kInvalidArgument,
                  "register: the memfd must be sealed against shrinking (F_SEAL_SHRINK)");
  }
  if ((seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0 ||
      (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR) {
    return refuse(Code::kInvalidArgument, "register: the memfd is not writable");
  }
  for (const auto& [dev, ino] : refused_files_) {
    if (static_cast<uint64_t>(st.st_dev) == dev && static_cast<uint64_t>(st.st_ino) == ino) {
      return refuse(Code::kInvalidArgument, "register: that is the manager's own shared memory");
    }
  }
  if (size == 0 || static_cast<uint64_t>(st.st_size) != size) {
    return refuse(Code::kInvalidArgument, "register: the memfd holds " +
                                              std::to_string(st.st_size) + " bytes, not the " +
                                              std::to_string(size) + " named");
  }
  if (session_bytes + size > limits_.session_bytes) {
    return refuse(Code::kNoSpace, "register: over this connection's budget of " +
                                      std::to_string(limits_.session_bytes) +
                                      " registered bytes (--max-registered-bytes-per-client)");
  }
  uint64_t used = bytes_.load(std::memory_order_relaxed);
  do {
    if (used + size > limits_.total_bytes) {
      return refuse(Code::kNoSpace, "register: over the manager's budget of " +
                                        std::to_string(limits_.total_bytes) +
                                        " registered bytes (--max-registered-bytes)");
    }
  } while (!bytes_.compare_exchange_weak(used, used + size, std::memory_order_relaxed));
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    bytes_.fetch_sub(size, std::memory_order_relaxed);
    return refuse(Code::kIoError, std::string("register: mmap: ") + std::strerror(err));
  }
  // Page-table entries now, not a fault per page on the first gets (the
  // pages are the client's, most already touched by it).
  (void)PrefaultWritable(base, size);
  regions_.fetch_add(1, std::memory_order_relaxed);
  registrations_.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<RegisteredRegion>(this, static_cast<uint8_t*>(base), size);
}

void RegisteredMemory::RefuseFilesOf(std::span<const int> fds) {
  for (int fd : fds) {
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0) {
      refused_files_.emplace_back(static_cast<uint64_t>(st.st_dev),
                                  static_cast<uint64_t>(st.st_ino));
    }
  }
}

RegisteredRegion::~RegisteredRegion() {
  munmap(base_, size_);
  owner_->bytes_.fetch_sub(size_, std::memory_order_relaxed);
  owner_->regions_.fetch_sub(1, std::memory_order_relaxed);
}

void RegisteredMemory::CountGet(bool remote, uint64_t bytes) {
  (remote ? remote_gets_ : local_gets_).fetch_add(1, std::memory_order_relaxed);
  (remote ? remote_bytes_ : local_bytes_).fetch_add(bytes, std::memory_order_relaxed);
}

void RegisteredMemory::ReportMetrics(MetricSink& sink) const {
  const auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  sink.One(kRegions, get(regions_));
  sink.One(kBytes, get(bytes_));
  sink.One(kRegistrations, get(registrations_));
  sink.One(kRefused, get(refused_));
  sink.ByLabel(kGets, "where", {{"local", get(local_gets_)}, {"remote", get(remote_gets_)}});
  sink.ByLabel(kGetBytes, "where", {{"local", get(local_bytes_)}, {"remote", get(remote_bytes_)}});
}

Result<uint64_t> SessionRegions::Register(int fd, uint64_t size) {
  if (regions_.size() >= shared_->limits().session_regions) {
    if (fd >= 0) close(fd);
    shared_->CountRefused();
    return Status(Code::kNoSpace, "register: this connection holds " +
                                      std::to_string(regions_.size()) +
                                      " regions already, the most one may");
  }
  Result<std::unique_ptr<RegisteredRegion>> r = shared_->Map(fd, size, bytes_);
  if (!r.ok()) return r.status();
  const uint64_t id = next_id_++;
  bytes_ += size;
  regions_.emplace(id, std::move(*r));
  return id;
}

Status SessionRegions::Unregister(uint64_t id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return NotFound("unregister: no registered region " + std::to_string(id) +
                    " on this connection");
  }
  bytes_ -= it->second->size();
  regions_.erase(it);
  return Status::Ok();
}

Result<MemoryPiece> SessionRegions::Resolve(uint64_t id, uint64_t offset, uint64_t length) const {
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return NotFound("no registered region " + std::to_string(id) + " on this connection");
  }
  const uint64_t size = it->second->size();
  if (offset > size || length > size - offset) {
    return InvalidArgument("bytes [" + std::to_string(offset) + ", +" + std::to_string(length) +
                           ") lie outside registered region " + std::to_string(id) + " of " +
                           std::to_string(size) + " bytes");
  }
  return MemoryPiece{it->second->base() + offset, length};
}

}  // namespace tierkv
