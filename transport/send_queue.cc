#include "transport/send_queue.h"

#include <algorithm>
#include <utility>

#include "common/check.h"
#include "common/log.h"

namespace tictac::transport {

namespace {
ChunkTunerConfig tuner_config(const SendQueueConfig& c) {
  TICTAC_CHECK(c.chunk_bytes > 0, "chunk_bytes must be positive");
  TICTAC_CHECK(c.window_chunks > 0, "window_chunks must be positive");
  ChunkTunerConfig t;
  t.auto_chunk = c.auto_chunk;
  t.auto_window = c.auto_window;
  t.chunk_bytes = c.chunk_bytes;
  t.window_chunks = c.window_chunks;
  t.target = c.chunk_target;
  t.solo_target = std::max(c.solo_chunk_target, c.chunk_target);
  t.max_solo_chunk = c.solo_chunk_max;
  return t;
}
}  // namespace

SendQueue::SendQueue(SendQueueConfig config)
    : config_(std::move(config)), tuner_(tuner_config(config_)), last_mixed_(now()) {}

std::chrono::nanoseconds SendQueue::now() const {
  if (config_.clock) return config_.clock();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

void SendQueue::enqueue(Level& level, PeerId peer, Message m) {
  auto& lane = lane_nodes_.try_emplace(level.lanes, peer, [](std::deque<Message>& q) { q.clear(); })
                   .first->second;
  if (lane.empty()) level.ring.push_back(peer);
  lane.push_back(m);
  ++queued_;
}

std::uint64_t SendQueue::push(PeerId peer, std::uint64_t message, Priority priority,
                              std::uint64_t bytes, bool whole) {
  Message m{message, next_seq_++, priority, bytes, 0, false, whole};
  // Solo chunks follow the priorities the application gave, also in FIFO mode, so that FIFO and
  // priority runs of the same traffic cut the same chunks and differ only in the order.
  if (config_.auto_chunk && last_priority_ != priority) {
    if (last_priority_) last_mixed_ = now();
    last_priority_ = priority;
  }
  Level& level = level_nodes_
                     .try_emplace(levels_, config_.enforce_priority ? priority : 0,
                                  [](Level& l) {
                                    l.ring.clear();
                                    l.lanes.clear();
                                  })
                     .first->second;
  enqueue(level, peer, m);
  return m.seq;
}

std::uint64_t SendQueue::push_control(PeerId peer, std::uint64_t message) {
  Message m{message, next_seq_++, 0, 0, 0, true};
  enqueue(control_, peer, m);
  return m.seq;
}

std::optional<Chunk> SendQueue::take(Level& level, const std::function<bool(PeerId)>& can_send) {
  for (std::size_t i = 0; i < level.ring.size(); ++i) {
    const PeerId peer = level.ring[i];
    if (can_send && !can_send(peer)) continue;
    auto lane_it = level.lanes.find(peer);
    TICTAC_CHECK(lane_it != level.lanes.end() && !lane_it->second.empty(),
                 "peer in the ring without queued messages");
    Message& m = lane_it->second.front();
    Chunk c;
    c.peer = peer;
    c.message = m.id;
    c.seq = m.seq;
    c.priority = m.priority;
    c.control = m.control;
    c.offset = m.next_offset;
    const std::uint64_t left = m.bytes - m.next_offset;
    c.length = m.control ? 0 : m.whole ? left : std::min(pop_chunk_, left);
    m.next_offset += c.length;
    c.last = m.control || m.next_offset >= m.bytes;
    level.ring.erase(level.ring.begin() + static_cast<std::ptrdiff_t>(i));
    if (c.last) {
      lane_it->second.pop_front();
      --queued_;
    }
    if (lane_it->second.empty()) {
      lane_nodes_.erase(level.lanes, lane_it);
    } else {
      level.ring.push_back(peer);  // round-robin: this peer's next turn comes after the others
    }
    return c;
  }
  return std::nullopt;
}

std::optional<Chunk> SendQueue::pop(const std::function<bool(PeerId)>& can_send,
                                    const std::function<bool(PeerId, Priority)>& can_preempt) {
  if (auto c = take(control_, can_send)) return c;
  const std::chrono::nanoseconds t = config_.auto_chunk || config_.auto_window ? now() : std::chrono::nanoseconds{0};
  const bool solo = config_.auto_chunk && solo_at(t);
  pop_chunk_ = solo ? tuner_.solo_chunk_bytes() : tuner_.chunk_bytes();
  if (in_flight_ < (solo ? tuner_.solo_window_chunks() : tuner_.window_chunks())) {
    if (auto c = pop_level(t, can_send, false)) return c;
  }
  if (!can_preempt || !config_.enforce_priority || levels_.empty()) return std::nullopt;
  return pop_level(t, nullptr, true, &can_preempt);
}

std::optional<Chunk> SendQueue::pop_level(std::chrono::nanoseconds t,
                                          const std::function<bool(PeerId)>& can_send, bool preempt,
                                          const std::function<bool(PeerId, Priority)>* can_preempt) {
  for (auto it = levels_.begin(); it != levels_.end();) {
    std::optional<Chunk> c;
    if (preempt) {
      const Priority level = it->first;
      // Never ahead of the peer's own control frames (its ANNOUNCEs go before its data).
      c = take(it->second, [&](PeerId p) { return control_.lanes.count(p) == 0 && (*can_preempt)(p, level); });
    } else {
      c = take(it->second, can_send);
    }
    if (it->second.ring.empty()) {
      auto next = std::next(it);
      level_nodes_.erase(levels_, it);
      it = next;
    } else {
      ++it;
    }
    if (c) {
      c->popped = t;
      c->ahead_bytes = preempt ? 0 : in_flight_bytes_;
      ++in_flight_;
      in_flight_bytes_ += c->length;
      InFlight& f = in_flight_nodes_.try_emplace(in_flight_by_peer_, c->peer).first->second;
      ++f.chunks;
      f.bytes += c->length;
      return c;
    }
  }
  return std::nullopt;
}

bool SendQueue::solo_at(std::chrono::nanoseconds t) const {
  return config_.auto_chunk && levels_.size() <= 1 && t - last_mixed_ >= config_.solo_after;
}

bool SendQueue::solo() const { return solo_at(now()); }

void SendQueue::on_chunk_done(const Chunk& chunk) {
  if (chunk.control) return;
  auto it = in_flight_by_peer_.find(chunk.peer);
  if (it == in_flight_by_peer_.end()) return;  // peer removed since the chunk was popped
  TICTAC_CHECK(it->second.chunks > 0 && in_flight_ > 0 && it->second.bytes >= chunk.length,
               "chunk completed more often than popped");
  --in_flight_;
  in_flight_bytes_ -= chunk.length;
  it->second.bytes -= chunk.length;
  if (--it->second.chunks == 0) in_flight_nodes_.erase(in_flight_by_peer_, it);
  if (config_.auto_chunk || config_.auto_window) {
    const std::uint64_t samples = tuner_.samples();
    const std::uint64_t chunk_before = tuner_.chunk_bytes();
    const std::uint32_t window_before = tuner_.window_chunks();
    tuner_.on_done(chunk.length, chunk.ahead_bytes, chunk.popped, now(), in_flight_ > 0 || queued_ > 0);
    if (tuner_.samples() != samples &&
        (tuner_.chunk_bytes() != chunk_before || tuner_.window_chunks() != window_before)) {
      TICTAC_LOG(debug) << "send queue tuned: rate " << tuner_.rate_bytes_per_s() / 1e6 << " MB/s, backend delay "
                        << tuner_.backend_delay().count() / 1000 << " us -> chunk " << tuner_.chunk_bytes()
                        << " B, window " << tuner_.window_chunks();
    }
  }
}

SendQueue::Removed SendQueue::remove_from(Level& level, PeerId peer, std::uint64_t message) {
  Removed r;
  auto lane_it = level.lanes.find(peer);
  if (lane_it == level.lanes.end()) return r;
  auto& lane = lane_it->second;
  auto m = std::find_if(lane.begin(), lane.end(),
                        [&](const Message& x) { return x.id == message; });
  if (m == lane.end()) return r;
  r.found = true;
  r.popped_bytes = m->next_offset;
  lane.erase(m);
  --queued_;
  if (lane.empty()) {
    level.lanes.erase(lane_it);
    level.ring.erase(std::find(level.ring.begin(), level.ring.end(), peer));
  }
  return r;
}

SendQueue::Removed SendQueue::remove(PeerId peer, std::uint64_t message) {
  Removed r = remove_from(control_, peer, message);
  if (r.found) return r;
  for (auto it = levels_.begin(); it != levels_.end(); ++it) {
    r = remove_from(it->second, peer, message);
    if (r.found) {
      if (it->second.ring.empty()) levels_.erase(it);
      return r;
    }
  }
  return r;
}

void SendQueue::remove_peer(PeerId peer) {
  auto drop = [&](Level& level) {
    auto lane_it = level.lanes.find(peer);
    if (lane_it == level.lanes.end()) return;
    queued_ -= lane_it->second.size();
    level.lanes.erase(lane_it);
    level.ring.erase(std::find(level.ring.begin(), level.ring.end(), peer));
  };
  drop(control_);
  for (auto it = levels_.begin(); it != levels_.end();) {
    drop(it->second);
    it = it->second.ring.empty() ? levels_.erase(it) : std::next(it);
  }
  auto f = in_flight_by_peer_.find(peer);
  if (f != in_flight_by_peer_.end()) {
    in_flight_ -= f->second.chunks;
    in_flight_bytes_ -= f->second.bytes;
    in_flight_by_peer_.erase(f);
  }
}

}  // namespace tictac::transport
