#include "media/block_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace tierkv {
namespace {

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

// One ring shared by all callers; each transfer is submitted and waited for
// under the mutex (the SSD tier issues large sequential transfers, so queue
// depth 1 per call keeps the code simple without losing bandwidth).
class UringFile final : public FileBase {
 public:
  UringFile(int fd, uint64_t size, bool direct, io_uring ring)
      : FileBase(fd, size, direct), ring_(ring) {}
  ~UringFile() override { io_uring_queue_exit(&ring_); }
  std::string_view engine() const override { return "io_uring"; }
  Status Write(uint64_t offset, const void* data, size_t len) override {
    return Transfer(true, offset, const_cast<void*>(data), len);
  }
  Status Read(uint64_t offset, void* data, size_t len) override {
    return Transfer(false, offset, data, len);
  }

 private:
  Status Transfer(bool write, uint64_t offset, void* data, size_t len) {
    if (Status st = Check(offset, len); !st.ok()) return st;
    std::lock_guard<std::mutex> lock(mu_);
    auto* p = static_cast<char*>(data);
    while (len > 0) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return Status(Code::kIoError, "io_uring: no submission entry");
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(len, 1u << 30));
      if (write) {
        io_uring_prep_write(sqe, fd_, p, chunk, offset);
      } else {
        io_uring_prep_read(sqe, fd_, p, chunk, offset);
      }
      int rc = io_uring_submit(&ring_);
      if (rc < 0) return IoError("io_uring_submit", -rc);
      io_uring_cqe* cqe = nullptr;
      do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
      } while (rc == -EINTR);
      if (rc < 0) return IoError("io_uring_wait_cqe", -rc);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (res <= 0) {
        return IoError(std::string(write ? "write" : "read") + " at " + std::to_string(offset),
                       res < 0 ? -res : EIO);
      }
      p += res;
      offset += static_cast<uint64_t>(res);
      len -= static_cast<size_t>(res);
    }
    return Status::Ok();
  }
  std::mutex mu_;
  io_uring ring_;
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
  // Two managers on one file would overwrite each other's blobs.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
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
    const int rc = io_uring_queue_init(8, &ring, 0);
    if (rc == 0) return std::unique_ptr<BlockFile>(new UringFile(fd, size, direct, ring));
    if (options.require_io_uring) {
      close(fd);
      return IoError("io_uring_queue_init", -rc);
    }
  }
  return std::unique_ptr<BlockFile>(new PosixFile(fd, size, direct));
}

}  // namespace tierkv
