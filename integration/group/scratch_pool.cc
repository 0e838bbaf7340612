#include "integration/group/scratch_pool.h"

#include <utility>

namespace tictac::group {

ScratchPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), buffer_(std::move(other.buffer_)) {}

ScratchPool::Lease& ScratchPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    give_back();
    pool_ = std::exchange(other.pool_, nullptr);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

ScratchPool::Lease::~Lease() { give_back(); }

void ScratchPool::Lease::give_back() {
  if (pool_ != nullptr && buffer_.data) pool_->release(std::move(buffer_));
  pool_ = nullptr;
  buffer_ = Buffer{};
}

ScratchPool::Lease ScratchPool::acquire(std::size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes))
        best = i;
    }
    if (best != free_.size()) {
      Buffer b = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      free_bytes_ -= b.bytes;
      return Lease(this, std::move(b));
    }
    ++allocations_;
  }
  // Not zeroed: a collective reads only bytes it received first. Allocated outside the lock.
  Buffer b{std::unique_ptr<std::byte[]>(new std::byte[bytes == 0 ? 1 : bytes]), bytes};
  return Lease(this, std::move(b));
}

void ScratchPool::release(Buffer buffer) {
  Buffer dropped;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() >= kMaxFree || free_bytes_ + buffer.bytes > kMaxFreeBytes) {
    // Keep the larger buffers: drop the smallest free one if the returned one is larger.
    if (free_.empty()) return;
    std::size_t smallest = 0;
    for (std::size_t i = 1; i < free_.size(); ++i)
      if (free_[i].bytes < free_[smallest].bytes) smallest = i;
    if (free_[smallest].bytes >= buffer.bytes ||
        free_bytes_ - free_[smallest].bytes + buffer.bytes > kMaxFreeBytes)
      return;  // `buffer` is freed on return
    free_bytes_ -= free_[smallest].bytes;
    dropped = std::move(free_[smallest]);
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(smallest));
  }
  free_bytes_ += buffer.bytes;
  free_.push_back(std::move(buffer));
}

std::size_t ScratchPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

std::size_t ScratchPool::free_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace tictac::group
