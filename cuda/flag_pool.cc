#include "cuda/flag_pool.h"

#include <atomic>
#include <cstdint>

#include "common/check.h"
#include "common/log.h"

namespace tictac::cuda {

Result<std::unique_ptr<FlagPool>> FlagPool::create(Api& api, std::size_t capacity, std::uint32_t initial_sequence) {
  TICTAC_RETURN_IF_ERROR(api.viability());
  if (capacity == 0 || capacity > (1u << 20)) {
    return invalid_argument("stream flag pool capacity " + std::to_string(capacity) +
                            " is out of range (1 .. 1048576; see TICTAC_CUDA_STREAM_FLAGS)");
  }
  Result<HostMapping> slab = api.alloc_pinned(capacity * kFlagLineBytes, /*mapped=*/true);
  if (!slab.ok()) return slab.status().with_context("allocating the stream flag pool");
  if (reinterpret_cast<std::uintptr_t>(slab->host) % kFlagLineBytes != 0 || slab->device == 0 ||
      slab->device % kFlagLineBytes != 0) {
    (void)api.free_pinned(slab->host);
    return internal_error("pinned flag slab is not 64-byte aligned or not mapped into the device");
  }
  return std::unique_ptr<FlagPool>(new FlagPool(api, *slab, capacity, initial_sequence));
}

FlagPool::FlagPool(Api& api, HostMapping slab, std::size_t capacity, std::uint32_t initial)
    : api_(api), slab_(slab), state_(capacity, State::free), issued_(capacity, initial) {
  free_.reserve(capacity);
  for (std::size_t i = capacity; i-- > 0;) {
    free_.push_back(static_cast<std::uint32_t>(i));
    store_error(static_cast<std::uint32_t>(i), 0);
    store_sequence(static_cast<std::uint32_t>(i), initial);
  }
}

FlagPool::~FlagPool() {
  if (Status s = api_.free_pinned(slab_.host); !s.ok()) {
    TICTAC_LOG(warn) << "freeing the stream flag pool: " << s.to_string();
  }
}

Result<std::uint32_t> FlagPool::acquire() {
  if (free_.empty()) {
    return Status(StatusCode::resource_exhausted,
                  "all " + std::to_string(capacity()) + " stream flags are in use (" + std::to_string(retired_) +
                      " retired after failures); complete outstanding receives or raise TICTAC_CUDA_STREAM_FLAGS");
  }
  const std::uint32_t index = free_.back();
  free_.pop_back();
  state_[index] = State::in_use;
  return index;
}

void FlagPool::release(std::uint32_t index) {
  TICTAC_CHECK(index < state_.size() && state_[index] == State::in_use, "release of flag " << index << " not in use");
  state_[index] = State::free;
  free_.push_back(index);
}

void FlagPool::retire(std::uint32_t index) {
  TICTAC_CHECK(index < state_.size() && state_[index] == State::in_use, "retire of flag " << index << " not in use");
  state_[index] = State::retired;
  ++retired_;
}

std::uint32_t FlagPool::issue(std::uint32_t index) {
  TICTAC_CHECK(index < state_.size() && state_[index] == State::in_use, "issue on flag " << index << " not in use");
  return ++issued_[index];  // unsigned: wraps modulo 2^32 by definition
}

std::uint32_t* FlagPool::word(std::uint32_t index, int which) const {
  TICTAC_CHECK(index < state_.size(), "flag index " << index << " out of range");
  auto* base = static_cast<unsigned char*>(slab_.host) + std::size_t{index} * kFlagLineBytes;
  return reinterpret_cast<std::uint32_t*>(base) + which;
}

void FlagPool::store_sequence(std::uint32_t index, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(*word(index, 0)).store(value, std::memory_order_release);
}

void FlagPool::store_error(std::uint32_t index, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(*word(index, 1)).store(value, std::memory_order_release);
}

std::uint32_t FlagPool::load_sequence(std::uint32_t index) const {
  return std::atomic_ref<std::uint32_t>(*word(index, 0)).load(std::memory_order_acquire);
}

std::uint32_t FlagPool::load_error(std::uint32_t index) const {
  return std::atomic_ref<std::uint32_t>(*word(index, 1)).load(std::memory_order_acquire);
}

DevicePtr FlagPool::device_sequence_address(std::uint32_t index) const {
  TICTAC_CHECK(index < state_.size(), "flag index " << index << " out of range");
  return slab_.device + std::uint64_t{index} * kFlagLineBytes;
}

DevicePtr FlagPool::device_error_address(std::uint32_t index) const {
  return device_sequence_address(index) + sizeof(std::uint32_t);
}

std::size_t FlagPool::in_use() const { return state_.size() - free_.size() - retired_; }

}  // namespace tictac::cuda
