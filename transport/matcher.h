// Matcher: pairs announced messages with posted receives by (source, tag).
//
// Receives match in the order they were posted; messages in the order they were announced (per
// connection that is the sender's submission order, because announcements travel on the control
// lane in FIFO order). A receive from kAnyPeer accepts a message from any peer. Equal keys are
// first in, first out on both sides. Pure, single-threaded (the Context's loop thread).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <vector>

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
  // Forgets a posted receive; false if it was not waiting.
  bool cancel_recv(RequestId id);
  // Forgets an unexpected message; false if it was not waiting.
  bool drop_message(PeerId peer, std::uint64_t msg_id);
  // A peer failed: forgets its unexpected messages and returns (and forgets) the receives posted
  // for that peer specifically. Any-source receives stay.
  std::vector<RequestId> drop_peer(PeerId peer);
  // All posted receives in posting order, forgotten (context close).
  std::vector<RequestId> take_all_recvs();

  std::size_t posted() const { return recvs_.size(); }
  std::size_t unexpected() const { return messages_.size(); }

 private:
  struct Recv {
    RequestId id;
    PeerId peer;
    Tag tag;
  };
  std::list<Recv> recvs_;
  std::list<Message> messages_;
};

}  // namespace tictac::transport
