#include "media/block_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace tierkv {

Status BlockFile::WriteOverlapped(uint64_t offset, const void* data, size_t len, size_t /*piece*/,
                                  const std::function<void()>& work, const Trailer* then) {
  Status st = Write(offset, data, len);
  work();
  if (st.ok() && then != nullptr) st = Write(then->offset, then->data, then->len);
  return st;
}

Status BlockFile::ReadPieces(uint64_t offset, void* data, size_t len, size_t piece,
                             const std::function<void(const char*, size_t)>& consume) {
  if (Status st = Read(offset, data, len); !st.ok()) return st;
  const char* p = static_cast<const char*>(data);
  for (size_t at = 0; at < len; at += piece) consume(p + at, std::min(piece, len - at));
  return Status::Ok();
}

namespace {

constexpr int kLockRetries = 60;  // x 50 ms: 3 s
constexpr int kLockRetryMs = 50;

Status IoError(const std::string& what, int err) {
  return Status(Code::kIoError, what + ": " + std::strerror(err));
}

class FileBase : public BlockFile {
 public:
  FileBase(int fd, uint64_t size, bool direct) : fd_(fd), size_(size), direct_(direct) {}
  ~FileBase() override { close(fd_); }
  Status Sync() override {
    if (fdatasync(fd_) != 0) return IoError("fdatasync", errno);
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }
  bool direct() const override { return direct_; }

 protected:
  Status Check(uint64_t offset, size_t len) const {
    if (offset + len > size_ || offset + len < offset) {
      return Status(Code::kIoError, "I/O past the end of the SSD file (offset " +
                                        std::to_string(offset) + ", length " + std::to_string(len) +
                                        ")");
    }
    return Status::Ok();
  }
  const int fd_;
  const uint64_t size_;
  const bool direct_;
};

class PosixFile final : public FileBase {
 public:
  using FileBase::FileBase;
  std::string_view engine() const override { return "pread"; }
  Status Write(uint64_t offset, const void* data, size_t len) override {
    if (Status st = Check(offset, len); !st.ok()) return st;
    const auto* p = static_cast<const char*>(data);
    while (len > 0) {
      const ssize_t n = pwrite(fd_, p, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("pwrite at " + std::to_string(offset), n < 0 ? errno : EIO);
      p += n;
      offset += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* data, size_t len) override {
    if (Status st = Check(offset, len); !st.ok()) return st;
    auto* p = static_cast<char*>(data);
    while (len > 0) {
      const ssize_t n = pread(fd_, p, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("pread at " + std::to_string(offset), n < 0 ? errno : EIO);
      p += n;
      offset += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return Status::Ok();
  }
};

// io_uring: each transfer takes a ring from a small pool (created on demand, so
// concurrent flushes and rewarms do not queue behind each other) and issues its
// pieces together. WriteOverlapped runs the caller's work while the write is in
// flight; ReadPieces hands pieces over in order as they complete.
class UringFile final : public FileBase {
 public:
  UringFile(int fd, uint64_t size, bool direct, io_uring ring) : FileBase(fd, size, direct) {
    free_.push_back(std::make_unique<Ring>(ring));
  }
  std::string_view engine() const override { return "io_uring"; }
  Status Write(uint64_t offset, const void* data, size_t len) override {
    return Transfer(true, offset, const_cast<void*>(data), len, len, nullptr, nullptr, nullptr);
  }
  Status Read(uint64_t offset, void* data, size_t len) override {
    return Transfer(false, offset, data, len, len, nullptr, nullptr, nullptr);
  }
  Status WriteOverlapped(uint64_t offset, const void* data, size_t len, size_t piece,
                         const std::function<void()>& work, const Trailer* then) override {
    return Transfer(true, offset, const_cast<void*>(data), len, piece, &work, then, nullptr);
  }
  Status ReadPieces(uint64_t offset, void* data, size_t len, size_t piece,
                    const std::function<void(const char*, size_t)>& consume) override {
    return Transfer(false, offset, data, len, piece, nullptr, nullptr, &consume);
  }

 private:
  static constexpr unsigned kDepth = 16;  // pieces in flight per transfer
  struct Ring {
    explicit Ring(io_uring r) : ring(r) {}
    ~Ring() { io_uring_queue_exit(&ring); }
    io_uring ring;
  };

  std::unique_ptr<Ring> TakeRing() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        std::unique_ptr<Ring> r = std::move(free_.back());
        free_.pop_back();
        return r;
      }
    }
    io_uring ring;
    if (io_uring_queue_init(kDepth, &ring, 0) != 0) return nullptr;
    return std::make_unique<Ring>(ring);
  }
  void GiveBack(std::unique_ptr<Ring> r) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(r));
  }

  // One transfer in flight: where its bytes are, where they go, how many moved.
  struct Segment {
    char* p;
    uint64_t at;
    size_t len;
    size_t done;
  };

  // Moves `len` bytes in pieces of `piece` bytes, at most kDepth in flight.
  // `work` runs once the first pieces are submitted; `then` (a write) is
  // submitted after `work` and after every piece; `consume` gets pieces in
  // order as they complete. Short transfers are resubmitted for the rest. On an
  // error it still waits for everything submitted (the buffers are the
  // caller's), and submits nothing more.
  Status Transfer(bool write, uint64_t offset, void* data, size_t len, size_t piece,
                  const std::function<void()>* work, const Trailer* then,
                  const std::function<void(const char*, size_t)>* consume) {
    if (Status st = Check(offset, len); !st.ok()) return st;
    if (then != nullptr) {
      if (Status st = Check(then->offset, then->len); !st.ok()) return st;
    }
    std::unique_ptr<Ring> ring = TakeRing();
    if (!ring) return Status(Code::kIoError, "io_uring: cannot create a ring");
    io_uring* r = &ring->ring;
    piece = std::max<size_t>(kBlockAlign, std::min(piece, size_t{1} << 30));
    auto* base = static_cast<char*>(data);
    std::vector<Segment> segs;
    segs.reserve(len / piece + 2);
    for (size_t at = 0; at < len; at += piece) {
      segs.push_back({base + at, offset + at, std::min(piece, len - at), 0});
    }
    const size_t pieces = segs.size();
    if (then != nullptr) {
      segs.push_back(
          {static_cast<char*>(const_cast<void*>(then->data)), then->offset, then->len, 0});
    }
    size_t next_prepare = 0, next_consume = 0, prepared = 0, in_flight = 0;
    bool reusable = true;  // false once the ring holds entries of unknown fate
    Status status;
    auto prepare = [&](size_t i) {
      io_uring_sqe* sqe = io_uring_get_sqe(r);
      Segment& s = segs[i];
      const auto n = static_cast<unsigned>(s.len - s.done);
      if (write) {
        io_uring_prep_write(sqe, fd_, s.p + s.done, n, s.at + s.done);
      } else {
        io_uring_prep_read(sqe, fd_, s.p + s.done, n, s.at + s.done);
      }
      io_uring_sqe_set_data64(sqe, i);
      ++prepared;
    };
    auto fail = [&](Status st) {
      if (status.ok()) status = std::move(st);
    };
    bool worked = work == nullptr;
    for (;;) {
      // The trailer may be submitted only once `work` has run.
      const size_t ready = worked ? segs.size() : pieces;
      while (status.ok() && next_prepare < ready && prepared + in_flight < kDepth) {
        prepare(next_prepare++);
      }
      if (status.ok() && prepared > 0) {
        const int rc = io_uring_submit(r);
        if (rc < 0) {
          fail(IoError("io_uring_submit", -rc));
          reusable = false;  // prepared entries stay queued: never hand this ring out again
        } else {
          in_flight += static_cast<size_t>(rc);
          prepared -= static_cast<size_t>(rc);
        }
      }
      if (!worked) {
        (*work)();
        worked = true;
        if (segs.size() > pieces) continue;  // submit the trailer before waiting
      }
      if (in_flight == 0) break;
      io_uring_cqe* cqe = nullptr;
      int rc;
      do {
        rc = io_uring_wait_cqe(r, &cqe);
      } while (rc == -EINTR);
      if (rc < 0) {  // cannot learn the fate of what is in flight
        fail(IoError("io_uring_wait_cqe", -rc));
        reusable = false;
        break;
      }
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(r, cqe);
      --in_flight;
      Segment& s = segs[i];
      if (res <= 0) {
        fail(IoError(std::string(write ? "write" : "read") + " at " + std::to_string(s.at + s.done),
                     res < 0 ? -res : EIO));
        continue;  // wait for the rest
      }
      s.done += static_cast<size_t>(res);
      if (s.done < s.len) {
        if (status.ok()) prepare(i);  // short transfer: the rest of the piece
        continue;
      }
      while (next_consume < pieces && segs[next_consume].done == segs[next_consume].len) {
        if (status.ok() && consume != nullptr) {
          (*consume)(segs[next_consume].p, segs[next_consume].len);
        }
        ++next_consume;
      }
    }
    if (status.ok() &&
        std::any_of(segs.begin(), segs.end(), [](const Segment& s) { return s.done < s.len; })) {
      fail(Status(Code::kIoError, "io_uring: lost a piece"));
    }
    if (reusable && prepared == 0) GiveBack(std::move(ring));
    return status;
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<Ring>> free_;
};

}  // namespace

Result<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                 const BlockFileOptions& options) {
  size = size / kBlockAlign * kBlockAlign;
  if (size == 0) return InvalidArgument("SSD file size must be at least 4 KiB");
  bool direct = options.use_direct;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0 && direct && errno == EINVAL) {  // the file system refuses O_DIRECT
    direct = false;
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) return IoError("open " + path, errno);
  // Two managers on one file would overwrite each other's blobs. A manager
  // that just died may still hold the lock for a moment (its io_uring is torn
  // down after the process exits), so a restart waits a little for it.
  int locked = flock(fd, LOCK_EX | LOCK_NB);
  for (int i = 0; locked != 0 && errno == EWOULDBLOCK && i < kLockRetries; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kLockRetryMs));
    locked = flock(fd, LOCK_EX | LOCK_NB);
  }
  if (locked != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return Status(Code::kIoError, path + " is in use by another process");
    }
    return IoError("lock " + path, err);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(size)); rc != 0) {
      close(fd);
      return IoError("preallocate " + path + " to " + std::to_string(size) + " bytes", rc);
    }
  }
  if (options.use_io_uring) {
    io_uring ring;
    const int rc = io_uring_queue_init(16, &ring, 0);
    if (rc == 0) return std::unique_ptr<BlockFile>(new UringFile(fd, size, direct, ring));
    if (options.require_io_uring) {
      close(fd);
      return IoError("io_uring_queue_init", -rc);
    }
  }
  return std::unique_ptr<BlockFile>(new PosixFile(fd, size, direct));
}

}  // namespace tierkv
