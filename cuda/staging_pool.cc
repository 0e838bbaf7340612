#include "cuda/staging_pool.h"

#include "common/log.h"
#include "common/tunables.h"

namespace tictac::cuda {
namespace {

const IntTunable kStagingBuffers{"TICTAC_CUDA_STAGING_BUFFERS", 8,
                                 "pinned host buffers for staging GPU data over TCP/UCX"};
const SizeTunable kStagingBytes{"TICTAC_CUDA_STAGING_BYTES", 4u << 20,
                                "bytes per staging buffer (the largest chunk a staged copy moves)"};

}  // namespace

Result<StagingOptions> StagingOptions::from_env(int device) {
  StagingOptions o;
  o.device = device;
  Result<std::int64_t> n = kStagingBuffers.get();
  if (!n.ok()) return n.status();
  if (*n <= 0) return invalid_argument("TICTAC_CUDA_STAGING_BUFFERS must be positive, got " + std::to_string(*n));
  o.buffers = static_cast<std::size_t>(*n);
  Result<std::uint64_t> bytes = kStagingBytes.get();
  if (!bytes.ok()) return bytes.status();
  o.buffer_bytes = *bytes;
  TICTAC_LOG(debug) << "CUDA staging: " << o.buffers << " buffers of " << o.buffer_bytes << " bytes";
  return o;
}

Result<std::unique_ptr<StagingPool>> StagingPool::create(Api& api, EventPool& events, const StagingOptions& options) {
  TICTAC_RETURN_IF_ERROR(api.viability());
  if (options.buffers == 0 || options.buffers > 4096 || options.buffer_bytes == 0 ||
      options.buffer_bytes > (std::size_t{1} << 32)) {
    return invalid_argument("staging pool of " + std::to_string(options.buffers) + " buffers of " +
                            std::to_string(options.buffer_bytes) +
                            " bytes is out of range (1..4096 buffers of 1 byte..4 GiB; see TICTAC_CUDA_STAGING_*)");
  }
  if (events.device() != options.device) {
    return invalid_argument("the event pool belongs to device " + std::to_string(events.device()) +
                            ", the staging pool to device " + std::to_string(options.device));
  }
  TICTAC_RETURN_IF_ERROR(api.use_device(options.device));
  Result<HostMapping> slab = api.alloc_pinned(options.buffers * options.buffer_bytes, /*mapped=*/false);
  if (!slab.ok()) return slab.status().with_context("allocating the staging pool");
  Result<Stream> side = api.create_stream();
  if (!side.ok()) {
    (void)api.free_pinned(slab->host);
    return side.status().with_context("creating the staging side stream");
  }
  std::unique_ptr<StagingPool> pool(new StagingPool(api, events, options));
  pool->slab_ = *slab;
  pool->side_ = *side;
  pool->state_.assign(options.buffers, State::free);
  for (std::size_t i = options.buffers; i-- > 0;) pool->free_.push_back(static_cast<std::uint32_t>(i));
  return pool;
}

StagingPool::~StagingPool() {
  for (const Copy& c : copies_) events_.release(c.event);
  if (!copies_.empty()) {
    TICTAC_LOG(warn) << "staging pool destroyed with " << copies_.size() << " copies in flight";
  }
  if (Status s = api_.destroy_stream(side_); !s.ok()) {
    TICTAC_LOG(warn) << s.to_string();
  }
  if (Status s = api_.free_pinned(slab_.host); !s.ok()) {
    TICTAC_LOG(warn) << s.to_string();
  }
}

StagingBuffer StagingPool::buffer(std::uint32_t index) const {
  return StagingBuffer{index, static_cast<unsigned char*>(slab_.host) + std::size_t{index} * options_.buffer_bytes,
                       options_.buffer_bytes};
}

Status StagingPool::check_size(std::size_t bytes) const {
  if (bytes == 0) return invalid_argument("staged copy of zero bytes");
  if (bytes > options_.buffer_bytes) {
    return invalid_argument("staged copy of " + std::to_string(bytes) + " bytes exceeds the staging buffer size " +
                            std::to_string(options_.buffer_bytes) +
                            "; cut the transfer into chunks of at most that size or raise TICTAC_CUDA_STAGING_BYTES");
  }
  return Status::Ok();
}

Status StagingPool::check_lent(const StagingBuffer& b) const {
  if (b.index >= state_.size() || state_[b.index] != State::lent || b.host != buffer(b.index).host) {
    return invalid_argument("staging buffer " + std::to_string(b.index) + " is not lent to the caller");
  }
  return Status::Ok();
}

Result<StagingBuffer> StagingPool::acquire() {
  if (free_.empty()) {
    return Status(StatusCode::resource_exhausted,
                  "all " + std::to_string(state_.size()) +
                      " staging buffers are in use; retry after completions or raise TICTAC_CUDA_STAGING_BUFFERS");
  }
  const std::uint32_t index = free_.back();
  free_.pop_back();
  state_[index] = State::lent;
  return buffer(index);
}

Status StagingPool::release(const StagingBuffer& b) {
  TICTAC_RETURN_IF_ERROR(check_lent(b));
  state_[b.index] = State::free;
  free_.push_back(b.index);
  return Status::Ok();
}

Result<std::uint64_t> StagingPool::copy_to_host(const void* src, std::size_t bytes, Stream producer) {
  return stage_to_host(src, bytes, &producer);
}

Result<std::uint64_t> StagingPool::copy_to_host_after_gate(const void* src, std::size_t bytes) {
  return stage_to_host(src, bytes, nullptr);
}

Result<std::uint64_t> StagingPool::stage_to_host(const void* src, std::size_t bytes, const Stream* producer) {
  TICTAC_RETURN_IF_ERROR(check_size(bytes));
  if (src == nullptr) return invalid_argument("staged copy from a null device address");
  const std::size_t events_needed = producer != nullptr ? 2 : 1;
  if (free_.empty() || events_.available() < events_needed) {
    return Status(StatusCode::resource_exhausted,
                  free_.empty() ? "no free staging buffer; retry after completions or raise TICTAC_CUDA_STAGING_BUFFERS"
                                : "no free CUDA event for a staged copy; retry after a poll or raise TICTAC_CUDA_EVENTS");
  }
  Result<StagingBuffer> buf = acquire();
  if (!buf.ok()) return buf.status();
  Event done = *events_.acquire();
  Status s = api_.use_device(options_.device);
  if (producer != nullptr) {
    Event after_producer = *events_.acquire();
    if (s.ok()) s = api_.record_event(after_producer, *producer);
    if (s.ok()) s = api_.stream_wait_event(side_, after_producer);
    events_.release(after_producer);  // the side stream's wait captured the record
  }
  if (s.ok()) s = api_.memcpy_async(buf->host, src, bytes, side_);
  if (!s.ok()) {
    events_.release(done);
    (void)release(*buf);
    return s.with_context("staging a device buffer to the host");
  }
  if (Status r = api_.record_event(done, side_); !r.ok()) {
    events_.release(done);
    state_[buf->index] = State::retired;  // the copy may still write into it
    return r.with_context("staging a device buffer to the host");
  }
  state_[buf->index] = State::copying;
  copies_.push_back(Copy{next_id_, StagingDone::Kind::to_host, buf->index, bytes, done, true});
  return next_id_++;
}

Result<std::uint64_t> StagingPool::copy_to_device(const StagingBuffer& b, std::size_t bytes, void* dst, Stream consumer) {
  TICTAC_RETURN_IF_ERROR(check_lent(b));
  TICTAC_RETURN_IF_ERROR(check_size(bytes));
  if (dst == nullptr) return invalid_argument("staged copy to a null device address");
  Result<Event> done = events_.acquire();
  if (!done.ok()) return done.status();
  Status s = api_.use_device(options_.device);
  if (s.ok()) s = api_.memcpy_async(dst, b.host, bytes, side_);
  if (!s.ok()) {
    events_.release(*done);
    return s.with_context("staging received bytes to the device");  // the buffer stays lent
  }
  if (Status r = api_.record_event(*done, side_); !r.ok()) {
    events_.release(*done);
    state_[b.index] = State::retired;
    return r.with_context("staging received bytes to the device");
  }
  state_[b.index] = State::copying;
  const std::uint64_t id = next_id_++;
  const Status wait = api_.stream_wait_event(consumer, *done);
  // Without the consumer's wait the copy still has to finish before the buffer is reused.
  copies_.push_back(Copy{id, StagingDone::Kind::to_device, b.index, bytes, *done, wait.ok()});
  if (!wait.ok()) return wait.with_context("ordering the consumer stream after a staged copy");
  return id;
}

std::vector<StagingDone> StagingPool::poll() {
  std::vector<StagingDone> out;
  std::size_t done = 0;
  // All copies run on the side stream, so their events fire in order: stop at the first pending.
  for (; done < copies_.size(); ++done) {
    const Copy& c = copies_[done];
    Result<bool> fired = api_.event_fired(c.event);
    if (fired.ok() && !*fired) break;
    events_.release(c.event);
    StagingDone d{c.id, c.kind, buffer(c.buffer), c.bytes,
                  fired.ok() ? Status::Ok() : fired.status().with_context("staged copy")};
    if (c.kind == StagingDone::Kind::to_host && d.status.ok()) {
      state_[c.buffer] = State::lent;  // handed to the caller, who sends and then releases it
    } else {
      state_[c.buffer] = State::free;
      free_.push_back(c.buffer);
    }
    if (c.report) out.push_back(std::move(d));
  }
  copies_.erase(copies_.begin(), copies_.begin() + static_cast<std::ptrdiff_t>(done));
  return out;
}

}  // namespace tictac::cuda
