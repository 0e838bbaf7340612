#include "transport/matcher.h"

namespace tictac::transport {

std::optional<RequestId> Matcher::on_message(PeerId from, Tag tag, std::uint64_t msg_id) {
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (it->tag == tag && (it->peer == kAnyPeer || it->peer == from)) {
      const RequestId id = it->id;
      recvs_.erase(it);
      return id;
    }
  }
  messages_.push_back(Message{from, msg_id, tag});
  return std::nullopt;
}

std::optional<Matcher::Message> Matcher::on_recv(RequestId id, PeerId from_or_any, Tag tag) {
  for (auto it = messages_.begin(); it != messages_.end(); ++it) {
    if (it->tag == tag && (from_or_any == kAnyPeer || it->peer == from_or_any)) {
      Message m = *it;
      messages_.erase(it);
      return m;
    }
  }
  recvs_.push_back(Recv{id, from_or_any, tag});
  return std::nullopt;
}

bool Matcher::has_unexpected(PeerId from_or_any, Tag tag) const {
  for (const Message& m : messages_) {
    if (m.tag == tag && (from_or_any == kAnyPeer || m.peer == from_or_any)) return true;
  }
  return false;
}

bool Matcher::cancel_recv(RequestId id) {
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (it->id == id) {
      recvs_.erase(it);
      return true;
    }
  }
  return false;
}

bool Matcher::drop_message(PeerId peer, std::uint64_t msg_id) {
  for (auto it = messages_.begin(); it != messages_.end(); ++it) {
    if (it->peer == peer && it->msg_id == msg_id) {
      messages_.erase(it);
      return true;
    }
  }
  return false;
}

std::vector<RequestId> Matcher::drop_peer(PeerId peer) {
  messages_.remove_if([&](const Message& m) { return m.peer == peer; });
  std::vector<RequestId> out;
  for (auto it = recvs_.begin(); it != recvs_.end();) {
    if (it->peer == peer) {
      out.push_back(it->id);
      it = recvs_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<RequestId> Matcher::take_all_recvs() {
  std::vector<RequestId> out;
  for (const Recv& r : recvs_) out.push_back(r.id);
  recvs_.clear();
  return out;
}

}  // namespace tictac::transport
