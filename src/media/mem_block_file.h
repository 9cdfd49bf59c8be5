// MemBlockFile: an in-memory BlockFile for tests. Its bytes can be shared
// between instances (a "restart" reopens the same bytes), and hooks can fail
// reads or writes on demand or hold reads at a gate.
#ifndef TIERKV_MEDIA_MEM_BLOCK_FILE_H_
#define TIERKV_MEDIA_MEM_BLOCK_FILE_H_

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "media/block_file.h"

namespace tierkv {

class MemBlockFile : public BlockFile {
 public:
  explicit MemBlockFile(uint64_t size) : bytes_(std::make_shared<std::string>(size, '\0')) {}
  explicit MemBlockFile(std::shared_ptr<std::string> bytes) : bytes_(std::move(bytes)) {}

  Status Write(uint64_t off, const void* data, size_t len) override {
    Transfer transfer(this);
    std::lock_guard<std::mutex> lock(mu_);
    ++writes_;
    if (fail_write && fail_write(writes_, off)) return Status(Code::kIoError, "injected");
    if (off + len > bytes_->size()) return Status(Code::kIoError, "past end");
    std::memcpy(bytes_->data() + off, data, len);
    return Status::Ok();
  }
  Status Read(uint64_t off, void* data, size_t len) override {
    Transfer transfer(this);
    {
      std::unique_lock<std::mutex> lock(gate_mu_);
      ++reads_started;
      gate_cv_.wait(lock, [this] { return !gate_closed_; });
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_read && fail_read(off)) return Status(Code::kIoError, "injected");
    if (off + len > bytes_->size()) return Status(Code::kIoError, "past end");
    std::memcpy(data, bytes_->data() + off, len);
    return Status::Ok();
  }
  // The worst case a real device allows: the trailer is written even when
  // the value's write failed (on a device it may land before the value).
  Status WriteOverlapped(uint64_t off, const void* data, size_t len, size_t /*piece*/,
                         const std::function<void()>& work, const Trailer* then) override {
    Status st = Write(off, data, len);
    work();
    if (then != nullptr) {
      Status tail = Write(then->offset, then->data, then->len);
      if (st.ok()) st = std::move(tail);
    }
    return st;
  }
  Status Sync() override { return Status::Ok(); }
  uint64_t size() const override { return bytes_->size(); }
  std::string_view engine() const override { return "memory"; }
  bool direct() const override { return false; }

  std::shared_ptr<std::string> bytes() const { return bytes_; }
  // Reads wait while the gate is closed.
  void CloseGate() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    gate_closed_ = true;
  }
  void OpenGate() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    gate_closed_ = false;
    gate_cv_.notify_all();
  }

  // Set before the file is shared with other threads.
  std::function<bool(int call, uint64_t off)> fail_write;
  std::function<bool(uint64_t off)> fail_read;
  std::atomic<int> reads_started{0};
  // Called outside the file's lock when a Write or Read starts and when it
  // ends (tests count the transfers in flight).
  std::function<void()> on_start, on_end;

 private:
  struct Transfer {
    explicit Transfer(MemBlockFile* f) : file(f) {
      if (file->on_start) file->on_start();
    }
    ~Transfer() {
      if (file->on_end) file->on_end();
    }
    MemBlockFile* file;
  };

  std::mutex mu_;
  std::shared_ptr<std::string> bytes_;
  int writes_ = 0;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool gate_closed_ = false;
};

}  // namespace tierkv

#endif  // TIERKV_MEDIA_MEM_BLOCK_FILE_H_
