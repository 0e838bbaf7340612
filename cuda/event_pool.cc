#include "cuda/event_pool.h"

#include "common/check.h"
#include "common/log.h"
#include "common/tunables.h"

namespace tictac::cuda {
namespace {

const IntTunable kEvents{"TICTAC_CUDA_EVENTS", 1024, "CUDA events pre-created per device for stream ordering"};

}  // namespace

Result<std::size_t> EventPool::capacity_from_env() {
  Result<std::int64_t> n = kEvents.get();
  if (!n.ok()) return n.status();
  if (*n <= 0 || *n > 65536) {
    return invalid_argument("TICTAC_CUDA_EVENTS must be in 1..65536, got " + std::to_string(*n));
  }
  return static_cast<std::size_t>(*n);
}

Result<std::unique_ptr<EventPool>> EventPool::create(Api& api, int device, std::size_t capacity) {
  TICTAC_RETURN_IF_ERROR(api.viability());
  if (capacity == 0 || capacity > 65536) {
    return invalid_argument("CUDA event pool capacity " + std::to_string(capacity) +
                            " is out of range (1 .. 65536; see TICTAC_CUDA_EVENTS)");
  }
  TICTAC_RETURN_IF_ERROR(api.use_device(device));
  std::unique_ptr<EventPool> pool(new EventPool(api, device));
  pool->all_.reserve(capacity);
  for (std::size_t i = 0; i < capacity; ++i) {
    Result<Event> e = api.create_event();
    if (!e.ok()) return e.status().with_context("creating event " + std::to_string(i) + " of the event pool");
    pool->all_.push_back(*e);  // the destructor destroys the ones created so far
  }
  pool->free_ = pool->all_;
  return pool;
}

EventPool::~EventPool() {
  for (Event e : all_) {
    if (Status s = api_.destroy_event(e); !s.ok()) {
      TICTAC_LOG(warn) << "destroying a pooled event: " << s.to_string();
    }
  }
}

Result<Event> EventPool::acquire() {
  if (free_.empty()) {
    return Status(StatusCode::resource_exhausted,
                  "all " + std::to_string(all_.size()) +
                      " pooled CUDA events are in flight; poll completions first or raise TICTAC_CUDA_EVENTS");
  }
  Event e = free_.back();
  free_.pop_back();
  return e;
}

void EventPool::release(Event event) {
  TICTAC_CHECK(event != nullptr, "released a null event");
  TICTAC_CHECK(free_.size() < all_.size(), "event pool released more events than it holds");
  free_.push_back(event);
}

}  // namespace tictac::cuda
