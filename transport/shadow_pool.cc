#include "transport/shadow_pool.h"

#include <iterator>
#include <utility>

#include "common/tunables.h"

namespace tictac::transport {
namespace {

const SizeTunable kShadowCache{
    "TICTAC_CUDA_SHADOW_CACHE", std::uint64_t{256} << 20,
    "host shadows of staged device transfers kept for reuse (bytes; 0: none)"};

}  // namespace

Result<std::size_t> ShadowPool::cache_bytes_from_env() {
  Result<std::uint64_t> v = kShadowCache.get();
  if (!v.ok()) return v.status();
  return static_cast<std::size_t>(*v);
}

Shadow& Shadow::operator=(Shadow&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::move(other.data_);
    capacity_ = std::exchange(other.capacity_, 0);
    pool_ = std::exchange(other.pool_, nullptr);
  }
  return *this;
}

void Shadow::reset() {
  if (data_ && pool_ != nullptr) pool_->give(std::move(data_), capacity_);
  data_.reset();
  capacity_ = 0;
  pool_ = nullptr;
}

Shadow ShadowPool::take(std::size_t bytes) {
  Shadow s;
  s.pool_ = this;
  auto it = free_.lower_bound(bytes);
  if (it != free_.end() && it->first / 2 <= bytes) {
    s.capacity_ = it->first;
    s.data_ = std::move(it->second);
    cached_ -= it->first;
    free_.erase(it);
    ++reused_;
    return s;
  }
  s.capacity_ = bytes;
  s.data_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
  ++allocated_;
  return s;
}

void ShadowPool::give(std::unique_ptr<std::byte[]> data, std::size_t capacity) {
  if (capacity > max_cached_) return;  // freed
  free_.emplace(capacity, std::move(data));
  cached_ += capacity;
  while (cached_ > max_cached_) {  // drop the largest first
    auto last = std::prev(free_.end());
    cached_ -= last->first;
    free_.erase(last);
  }
}

}  // namespace tictac::transport
