// ArrivedMessages: messages that fully arrived from a peer whose connection then ended, before a
// receive took them. They stay deliverable, as the bytes of a closed socket stay readable: a peer
// that sends and exits loses nothing that reached us. A receive matching one completes with its
// bytes; one matching none fails with the peer's terminal status (Core).
//
// Bounded: past `max_bytes` in all, the messages of the peer that died first are forgotten (and
// returned, so the Matcher forgets them too), with a warning naming the peer. Single-threaded
// (the Context's loop thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/types.h"

namespace tictac::transport {

class ArrivedMessages {
 public:
  struct Message {
    Tag tag = 0;
    std::uint64_t total = 0;
    std::unique_ptr<std::byte[]> bytes;  // null when total is 0
  };
  // A dropped message: the Matcher must forget (peer, msg_id).
  using Dropped = std::pair<PeerId, std::uint64_t>;

  explicit ArrivedMessages(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps a message of `peer`; returns the messages dropped to stay within the bound (possibly
  // this one, when it alone is larger than the bound).
  std::vector<Dropped> keep(PeerId peer, std::uint64_t msg_id, Message m);
  bool holds(PeerId peer, std::uint64_t msg_id) const;
  // Takes a kept message out (nullopt if not kept).
  std::optional<Message> take(PeerId peer, std::uint64_t msg_id);
  // Forgets every message of `peer`; returns their ids.
  std::vector<std::uint64_t> drop_peer(PeerId peer);

  std::size_t bytes() const { return bytes_; }
  std::size_t count() const;

 private:
  // Removes the peer's messages (not its place in order_, which the caller handles).
  std::vector<std::uint64_t> forget(PeerId peer);

  const std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  std::unordered_map<PeerId, std::unordered_map<std::uint64_t, Message>> by_peer_;
  std::deque<PeerId> order_;  // peers in the order their first message was kept
};

}  // namespace tictac::transport
