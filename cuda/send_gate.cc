#include "cuda/send_gate.h"

#include <algorithm>

namespace tictac::cuda {

SendGate::~SendGate() {
  for (const Entry& e : entries_) events_.release(e.event);
}

Result<std::uint64_t> SendGate::after_producer(Stream producer) {
  Result<Event> event = events_.acquire();
  if (!event.ok()) return event.status();
  Status s = events_.api().use_device(events_.device());
  if (s.ok()) s = events_.api().record_event(*event, producer);
  if (!s.ok()) {
    events_.release(*event);
    return s.with_context("recording the producer event of a send");
  }
  entries_.push_back(Entry{next_id_, producer, *event, false});
  return next_id_++;
}

std::vector<GateRelease> SendGate::poll() {
  std::vector<GateRelease> out;
  std::vector<Stream> blocked;  // streams whose oldest pending event has not fired yet
  std::size_t keep = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    bool done = false;
    if (std::find(blocked.begin(), blocked.end(), e.stream) == blocked.end()) {
      Result<bool> fired = events_.api().event_fired(e.event);
      if (!fired.ok()) {
        done = true;
        if (!e.cancelled) out.push_back(GateRelease{e.id, fired.status().with_context("waiting for the producer stream")});
      } else if (*fired) {
        done = true;
        if (!e.cancelled) out.push_back(GateRelease{e.id, Status::Ok()});
      } else {
        blocked.push_back(e.stream);
      }
    }
    if (done) {
      events_.release(e.event);
    } else {
      entries_[keep++] = e;
    }
  }
  entries_.resize(keep);
  return out;
}

Status SendGate::cancel(std::uint64_t id) {
  for (Entry& e : entries_) {
    if (e.id == id && !e.cancelled) {
      e.cancelled = true;
      return Status::Ok();
    }
  }
  return invalid_argument("send gate " + std::to_string(id) + " is not pending (released or cancelled already)");
}

}  // namespace tictac::cuda
