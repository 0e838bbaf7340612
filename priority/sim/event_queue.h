// EventQueue<E>: the simulator's binary-heap event queue. Events pop in order of time, then of
// insertion (a sequence number), so equal-time events are handled deterministically in the
// order they were scheduled. Not thread-safe; owns copies of the events.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace tictac::priority::sim {

template <typename E>
class EventQueue {
 public:
  void push(double time, E event) { heap_.push(Entry{time, next_seq_++, std::move(event)}); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // Time of the earliest event; the queue must not be empty.
  double next_time() const { return heap_.top().time; }
  // Removes and returns the earliest event; the queue must not be empty.
  E pop() {
    E e = heap_.top().event;
    heap_.pop();
    return e;
  }
  void clear() {
    heap_ = {};
    next_seq_ = 0;
  }

 private:
  struct Entry {
    double time;
    std::uint64_t seq;
    E event;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace tictac::priority::sim
