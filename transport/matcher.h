// Matcher: pairs announced messages with posted receives by (source, tag).
//
// Receives match in the order they were posted; messages in the order they were announced (per
// connection that is the sender's submission order, because announcements travel on the control
// lane in FIFO order). A receive from kAnyPeer accepts a message from any peer. Equal keys are
// first in, first out on both sides. Pure, single-threaded (the Context's loop thread).
//
// Cost: O(1) amortised per operation (hash-indexed FIFO queues per (peer, tag) and per tag for
// any-source receives, with lazily dropped entries for cancelled receives and forgotten
// messages); drop_peer and take_all_recvs are linear in what they return plus the stale entries.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/node_recycler.h"
#include "transport/types.h"

namespace tictac::transport {

class Matcher {
 public:
  struct Message {
    PeerId peer = 0;
    std::uint64_t msg_id = 0;
    Tag tag = 0;
  };

  // A message was announced: returns the oldest posted receive that accepts it (and forgets that
  // receive), or nullopt after remembering the message as unexpected.
  std::optional<RequestId> on_message(PeerId from, Tag tag, std::uint64_t msg_id);
  // A receive was posted: returns the oldest unexpected message it accepts (and forgets it), or
  // nullopt after remembering the receive.
  std::optional<Message> on_recv(RequestId id, PeerId from_or_any, Tag tag);

  // Whether a receive posted now for (from_or_any, tag) would match an unexpected message.
  bool has_unexpected(PeerId from_or_any, Tag tag) const;
  // Whether an any-source receive for `tag` is waiting (it would take the next message with that
  // tag from any peer before a receive posted now).
  bool any_source_waiting(Tag tag) const;
  // How many receives posted for exactly (peer, tag) are waiting.
  std::size_t waiting_for(PeerId peer, Tag tag) const;
  // Forgets a posted receive; false if it was not waiting.
  bool cancel_recv(RequestId id);
  // Forgets an unexpected message; false if it was not waiting.
  bool drop_message(PeerId peer, std::uint64_t msg_id);
  // A peer failed: forgets its unexpected messages (except those `keep` accepts: they stay
  // matchable) and returns (and forgets) the receives posted for that peer specifically, in
  // posting order. Any-source receives stay.
  std::vector<RequestId> drop_peer(PeerId peer,
                                   const std::function<bool(std::uint64_t msg_id)>& keep = {});
  // All posted receives in posting order, forgotten (context close).
  std::vector<RequestId> take_all_recvs();

  std::size_t posted() const { return recvs_.size(); }
  std::size_t unexpected() const { return messages_.size(); }
  // Unexpected messages of one peer (a bound on per-peer state).
  std::size_t unexpected_from(PeerId peer) const;

 private:
  struct Key {
    PeerId peer;
    Tag tag;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.peer * 0x9E3779B97F4A7C15ULL ^ k.tag);
    }
  };
  struct Entry {
    std::uint64_t seq;  // posting / arrival order
    std::uint64_t id;   // RequestId, or the message's seq for messages
  };
  struct RecvInfo {
    std::uint64_t seq;
    PeerId peer;
    Tag tag;
  };
  struct MsgInfo {
    PeerId peer;
    Tag tag;
    std::uint64_t msg_id;
  };
  using Queue = std::deque<Entry>;

  // Drops stale heads; returns the live head or nullptr.
  const Entry* live_recv_head(Queue& q) const;
  const Entry* live_msg_head(Queue& q) const;
  void forget_recv(RequestId id);
  void forget_msg(std::uint64_t seq);

  std::uint64_t next_seq_ = 1;
  // Receives: live ones by id; FIFO queues (possibly holding stale entries) per key.
  std::unordered_map<RequestId, RecvInfo> recvs_;
  // mutable: const queries drop stale heads (no observable change).
  mutable std::unordered_map<Key, Queue, KeyHash> recv_by_key_;
  mutable std::unordered_map<Tag, Queue> recv_any_;  // kAnyPeer receives by tag
  std::unordered_map<Key, std::size_t, KeyHash> recv_count_;
  // Unexpected messages: live ones by seq; FIFO queues per key and per tag.
  std::unordered_map<std::uint64_t, MsgInfo> messages_;
  mutable std::unordered_map<Key, Queue, KeyHash> msg_by_key_;
  mutable std::unordered_map<Tag, Queue> msg_by_tag_;
  std::unordered_map<Key, std::uint64_t, KeyHash> msg_seq_;  // (peer, msg_id) -> seq
  std::unordered_map<PeerId, std::size_t> msg_count_;

  // Erased nodes kept for reuse (common/node_recycler.h): a (peer, tag) that recurs, the usual
  // case, costs no allocation per message. The queue maps share theirs.
  template <class M>
  using Recycler = NodeRecycler<M, 256>;
  Recycler<decltype(recvs_)> recvs_nodes_;
  Recycler<decltype(recv_by_key_)> key_queue_nodes_;
  Recycler<decltype(recv_any_)> tag_queue_nodes_;
  Recycler<decltype(recv_count_)> key_count_nodes_;
  Recycler<decltype(messages_)> messages_nodes_;
  Recycler<decltype(msg_seq_)> msg_seq_nodes_;
  Recycler<decltype(msg_count_)> msg_count_nodes_;
  static void clear_queue(Queue& q) { q.clear(); }
};

}  // namespace tictac::transport
