// SendQueue: the priority policy of the transport, as a plain single-threaded structure.
//
// One SendQueue serves one backend device (all peers reached through it share its lanes and its
// window, as a parameter server's uplink is shared by all workers). Policy:
//  - Control lane first: control messages (one chunk each) of every peer go before any data and
//    do not count in the window.
//  - Strict priority between data levels: smaller Priority value first. A lower level is served
//    only when no peer that can send (see pop()) has data at a higher level.
//  - Within a level: each peer's messages in FIFO order of their sequence number (assigned by
//    push); between peers of the same level, round-robin one chunk at a time.
//  - Messages are cut into chunks of `chunk_bytes`; at most `window_chunks` data chunks are in
//    flight (popped and not yet done). Each completion frees a slot, and the next pop() takes the
//    head of the highest non-empty level: a new high-priority message preempts a long
//    low-priority one at the next chunk boundary.
//  - Starvation: strict priority starves lower levels while higher ones have data. That is the
//    point (TicTac's order is a total order per iteration and every level drains when the
//    iteration's higher transfers are done); within a level nobody starves (FIFO + round-robin).
//  - Chunk size and window come from a ChunkTuner (transport/chunk_tuner.h): fixed, or with
//    auto_chunk / auto_window derived online from the completions (on_chunk_done) and applied to
//    the next pop(). A message pushed `whole` always leaves as one chunk (an inline ANNOUNCE).
//  - Solo chunks (auto_chunk only): a chunk boundary is where a higher-priority message can
//    pre-empt, which matters only where more than one priority level is in use. While every data
//    message pushed during the last `solo_after` had the same priority (as given, also with
//    enforce_priority = false, so FIFO runs cut the same chunks) and no other level is queued,
//    pop() cuts chunks of the tuner's solo size (rate x solo_chunk_target, 1 ms by default instead
//    of 100 us): fewer chunks, frames, system calls and wake-ups for single-level traffic such as
//    a plain allreduce. While solo, the window is the tuner's solo window (one chunk in flight
//    where a solo chunk's time covers the backend's delay, as on TCP). A push of another level
//    ends it at once; only the chunks already popped (at most the solo window) are of the solo
//    size, so a new level waits at most solo window x solo target once after a single-level
//    stretch. The queue starts in the normal (small-chunk) mode.
//  - With enforce_priority = false every message is treated as one level (plain FIFO), for
//    comparisons.
// Not thread-safe: owned by the loop thread of its Context. Never blocks. Broken invariants (a
// chunk completed twice) are TICTAC_CHECK failures.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/node_recycler.h"
#include "transport/chunk_tuner.h"
#include "transport/types.h"

namespace tictac::transport {

struct SendQueueConfig {
  std::uint64_t chunk_bytes = 1 << 20;  // fixed, or the initial value when auto_chunk
  std::uint32_t window_chunks = 4;      // fixed, or the initial value when auto_window
  bool enforce_priority = true;
  bool auto_chunk = false;
  bool auto_window = false;
  std::chrono::nanoseconds chunk_target{std::chrono::microseconds(100)};  // auto_chunk's aim
  // Solo chunks (see above): their target, and how long a single level must last first. A solo
  // target equal to chunk_target turns solo chunks off.
  std::chrono::nanoseconds solo_chunk_target{std::chrono::milliseconds(1)};
  std::uint64_t solo_chunk_max = kDefaultSoloChunkMax;  // solo chunks never above this
  std::chrono::nanoseconds solo_after{std::chrono::milliseconds(50)};
  // Time source for the tuner (tests inject one); empty = steady_clock.
  std::function<std::chrono::nanoseconds()> clock;
};

// One unit handed to a backend. `message` is the caller's id for the message.
struct Chunk {
  PeerId peer = 0;
  std::uint64_t message = 0;
  std::uint64_t seq = 0;
  Priority priority = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool control = false;
  bool last = false;  // the message's final chunk
  std::chrono::nanoseconds popped{0};  // when pop() handed it out (the tuner's clock)
  std::uint64_t ahead_bytes = 0;       // data bytes in flight on the device when it was popped
};

class SendQueue {
 public:
  explicit SendQueue(SendQueueConfig config);

  const SendQueueConfig& config() const { return config_; }

  // Queues a data message of `bytes` (0 is one empty chunk). Returns its sequence number.
  // `whole`: never cut, one chunk whatever the chunk size (the caller keeps it <= the maximum
  // chunk size of the wire).
  std::uint64_t push(PeerId peer, std::uint64_t message, Priority priority, std::uint64_t bytes,
                     bool whole = false);
  // Queues one control message (a single chunk on the control lane). Message ids must be unique
  // per peer across both lanes (remove() looks them up by id).
  std::uint64_t push_control(PeerId peer, std::uint64_t message);

  // The next chunk to hand to the backend now, or nullopt (nothing queued for a peer that can
  // send, or the window is full and no control message waits). `can_send(peer)` reports the
  // backend's capacity for that peer; peers that cannot send are skipped without losing their
  // round-robin turn.
  // `can_preempt(peer, priority)` (optional; enforce_priority only): when nothing else can go,
  // a chunk of a level the backend can send past everything already handed over (its own lane)
  // goes even beyond the window or the backend's capacity for ordinary chunks (never ahead of a
  // control message queued for the same peer); such a chunk counts as in flight with nothing
  // ahead of it.
  std::optional<Chunk> pop(const std::function<bool(PeerId)>& can_send,
                           const std::function<bool(PeerId, Priority)>& can_preempt = {});

  // A popped data chunk left the host (the backend completed it): frees its window slot.
  void on_chunk_done(const Chunk& chunk);

  // Drops the not-yet-popped chunks of `message` (cancel). `found` is false if nothing of it was
  // queued; `popped_bytes` is how much of it had already been popped.
  struct Removed {
    bool found = false;
    std::uint64_t popped_bytes = 0;
  };
  Removed remove(PeerId peer, std::uint64_t message);

  // Forgets a peer entirely (its connection failed): drops its queued messages and releases its
  // window slots, so later on_chunk_done() calls for it are ignored.
  void remove_peer(PeerId peer);

  std::uint32_t in_flight() const { return in_flight_; }
  // The chunk size and window the next pop() uses (fixed, or the tuner's current choice).
  std::uint64_t chunk_bytes() const { return tuner_.chunk_bytes(); }
  std::uint32_t window_chunks() const { return tuner_.window_chunks(); }
  const ChunkTuner& tuner() const { return tuner_; }
  // Whether a pop() now would cut solo chunks (auto_chunk, one level for solo_after).
  bool solo() const;
  std::size_t queued_messages() const { return queued_; }
  bool empty() const { return queued_ == 0; }

 private:
  struct Message {
    std::uint64_t id = 0;
    std::uint64_t seq = 0;
    Priority priority = 0;
    std::uint64_t bytes = 0;
    std::uint64_t next_offset = 0;
    bool control = false;
    bool whole = false;
  };
  struct Level {
    std::deque<PeerId> ring;  // peers with queued messages, in round-robin order
    std::unordered_map<PeerId, std::deque<Message>> lanes;
  };

  void enqueue(Level& level, PeerId peer, Message m);
  // Takes one chunk from the first peer in `level` that can send; moves that peer to the back.
  std::optional<Chunk> take(Level& level, const std::function<bool(PeerId)>& can_send);
  // The next data chunk by level (pop()'s second half); `preempt` asks can_preempt per level.
  std::optional<Chunk> pop_level(std::chrono::nanoseconds t, const std::function<bool(PeerId)>& can_send,
                                 bool preempt,
                                 const std::function<bool(PeerId, Priority)>* can_preempt = nullptr);
  Removed remove_from(Level& level, PeerId peer, std::uint64_t message);

  std::chrono::nanoseconds now() const;
  bool solo_at(std::chrono::nanoseconds t) const;

  SendQueueConfig config_;
  ChunkTuner tuner_;
  Level control_;
  std::map<Priority, Level> levels_;  // ascending: begin() is the highest priority
  struct InFlight {
    std::uint32_t chunks = 0;
    std::uint64_t bytes = 0;
  };
  std::unordered_map<PeerId, InFlight> in_flight_by_peer_;
  std::uint32_t in_flight_ = 0;
  std::uint64_t in_flight_bytes_ = 0;
  std::uint64_t next_seq_ = 1;
  std::size_t queued_ = 0;
  // Solo-chunk state: the priority of the last data push, and when the last push of a different
  // priority (or the queue's creation) happened.
  std::optional<Priority> last_priority_;
  std::chrono::nanoseconds last_mixed_{0};
  std::uint64_t pop_chunk_ = 0;  // the data chunk size of the pop() in progress

  // Erased levels, lanes and in-flight entries kept for reuse (common/node_recycler.h): a send to
  // a peer and priority seen before allocates nothing here.
  NodeRecycler<std::map<Priority, Level>, 16> level_nodes_;
  NodeRecycler<decltype(Level::lanes), 256> lane_nodes_;
  NodeRecycler<decltype(in_flight_by_peer_), 256> in_flight_nodes_;
};

}  // namespace tictac::transport
