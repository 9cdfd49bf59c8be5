// BoundedCount: at most `max` holders at once, taken without waiting (for
// example requests that may park a worker thread in a long wait). A holder is
// a Slot; it leaves when the Slot goes.
//
// Thread-safety: thread-safe. The BoundedCount must outlive its Slots.
#ifndef TIERKV_COMMON_BOUNDED_COUNT_H_
#define TIERKV_COMMON_BOUNDED_COUNT_H_

#include <atomic>
#include <optional>

namespace tierkv {

class BoundedCount {
 public:
  class Slot {
   public:
    Slot(Slot&& other) noexcept : count_(other.count_) { other.count_ = nullptr; }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (count_ != nullptr) count_->fetch_sub(1, std::memory_order_relaxed);
    }

   private:
    friend class BoundedCount;
    explicit Slot(std::atomic<int>* count) : count_(count) {}
    std::atomic<int>* count_;
  };

  explicit BoundedCount(int max) : max_(max) {}
  int max() const { return max_; }
  // A slot, or nullopt when `max` are held now.
  std::optional<Slot> TryEnter() {
    if (count_.fetch_add(1, std::memory_order_relaxed) >= max_) {
      count_.fetch_sub(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    return Slot(&count_);
  }

 private:
  const int max_;
  std::atomic<int> count_{0};
};

}  // namespace tierkv

#endif  // TIERKV_COMMON_BOUNDED_COUNT_H_
