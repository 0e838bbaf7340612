#include "transport/matcher.h"

#include <algorithm>

namespace tictac::transport {

const Matcher::Entry* Matcher::live_recv_head(Queue& q) const {
  while (!q.empty()) {
    auto it = recvs_.find(q.front().id);
    if (it != recvs_.end() && it->second.seq == q.front().seq) return &q.front();
    q.pop_front();
  }
  return nullptr;
}

const Matcher::Entry* Matcher::live_msg_head(Queue& q) const {
  while (!q.empty()) {
    if (messages_.count(q.front().id) != 0) return &q.front();
    q.pop_front();
  }
  return nullptr;
}

void Matcher::forget_recv(RequestId id) {
  auto it = recvs_.find(id);
  if (it == recvs_.end()) return;
  const RecvInfo r = it->second;
  recvs_nodes_.erase(recvs_, it);
  if (r.peer != kAnyPeer) {
    auto c = recv_count_.find(Key{r.peer, r.tag});
    if (c != recv_count_.end() && --c->second == 0) key_count_nodes_.erase(recv_count_, c);
    auto q = recv_by_key_.find(Key{r.peer, r.tag});
    if (q != recv_by_key_.end() && live_recv_head(q->second) == nullptr)
      key_queue_nodes_.erase(recv_by_key_, q);
  } else {
    auto q = recv_any_.find(r.tag);
    if (q != recv_any_.end() && live_recv_head(q->second) == nullptr)
      tag_queue_nodes_.erase(recv_any_, q);
  }
}

void Matcher::forget_msg(std::uint64_t seq) {
  auto it = messages_.find(seq);
  if (it == messages_.end()) return;
  const MsgInfo m = it->second;
  messages_nodes_.erase(messages_, it);
  if (auto s = msg_seq_.find(Key{m.peer, m.msg_id}); s != msg_seq_.end())
    msg_seq_nodes_.erase(msg_seq_, s);
  auto c = msg_count_.find(m.peer);
  if (c != msg_count_.end() && --c->second == 0) msg_count_nodes_.erase(msg_count_, c);
  auto k = msg_by_key_.find(Key{m.peer, m.tag});
  if (k != msg_by_key_.end() && live_msg_head(k->second) == nullptr)
    key_queue_nodes_.erase(msg_by_key_, k);
  auto t = msg_by_tag_.find(m.tag);
  if (t != msg_by_tag_.end() && live_msg_head(t->second) == nullptr)
    tag_queue_nodes_.erase(msg_by_tag_, t);
}

std::optional<RequestId> Matcher::on_message(PeerId from, Tag tag, std::uint64_t msg_id) {
  const Entry* specific = nullptr;
  const Entry* any = nullptr;
  if (auto q = recv_by_key_.find(Key{from, tag}); q != recv_by_key_.end())
    specific = live_recv_head(q->second);
  if (auto q = recv_any_.find(tag); q != recv_any_.end()) any = live_recv_head(q->second);
  const Entry* take = specific;
  if (take == nullptr || (any != nullptr && any->seq < take->seq)) take = any;
  if (take != nullptr) {
    const RequestId id = take->id;
    forget_recv(id);
    return id;
  }
  const std::uint64_t seq = next_seq_++;
  messages_nodes_.try_emplace(messages_, seq).first->second = MsgInfo{from, tag, msg_id};
  key_queue_nodes_.try_emplace(msg_by_key_, Key{from, tag}, clear_queue)
      .first->second.push_back(Entry{seq, seq});
  tag_queue_nodes_.try_emplace(msg_by_tag_, tag, clear_queue)
      .first->second.push_back(Entry{seq, seq});
  msg_seq_nodes_.try_emplace(msg_seq_, Key{from, msg_id}).first->second = seq;
  ++msg_count_nodes_.try_emplace(msg_count_, from).first->second;
  return std::nullopt;
}

std::optional<Matcher::Message> Matcher::on_recv(RequestId id, PeerId from_or_any, Tag tag) {
  const Entry* head = nullptr;
  if (from_or_any == kAnyPeer) {
    if (auto q = msg_by_tag_.find(tag); q != msg_by_tag_.end()) head = live_msg_head(q->second);
  } else if (auto q = msg_by_key_.find(Key{from_or_any, tag}); q != msg_by_key_.end()) {
    head = live_msg_head(q->second);
  }
  if (head != nullptr) {
    const std::uint64_t seq = head->id;
    const MsgInfo m = messages_.at(seq);
    forget_msg(seq);
    return Message{m.peer, m.msg_id, m.tag};
  }
  const std::uint64_t seq = next_seq_++;
  recvs_nodes_.try_emplace(recvs_, id).first->second = RecvInfo{seq, from_or_any, tag};
  if (from_or_any == kAnyPeer) {
    tag_queue_nodes_.try_emplace(recv_any_, tag, clear_queue)
        .first->second.push_back(Entry{seq, id});
  } else {
    key_queue_nodes_.try_emplace(recv_by_key_, Key{from_or_any, tag}, clear_queue)
        .first->second.push_back(Entry{seq, id});
    ++key_count_nodes_.try_emplace(recv_count_, Key{from_or_any, tag}).first->second;
  }
  return std::nullopt;
}

bool Matcher::has_unexpected(PeerId from_or_any, Tag tag) const {
  if (from_or_any == kAnyPeer) {
    auto q = msg_by_tag_.find(tag);
    return q != msg_by_tag_.end() && live_msg_head(q->second) != nullptr;
  }
  auto q = msg_by_key_.find(Key{from_or_any, tag});
  return q != msg_by_key_.end() && live_msg_head(q->second) != nullptr;
}

bool Matcher::any_source_waiting(Tag tag) const {
  auto q = recv_any_.find(tag);
  return q != recv_any_.end() && live_recv_head(q->second) != nullptr;
}

std::size_t Matcher::waiting_for(PeerId peer, Tag tag) const {
  auto c = recv_count_.find(Key{peer, tag});
  return c == recv_count_.end() ? 0 : c->second;
}

std::size_t Matcher::unexpected_from(PeerId peer) const {
  auto c = msg_count_.find(peer);
  return c == msg_count_.end() ? 0 : c->second;
}

bool Matcher::cancel_recv(RequestId id) {
  if (recvs_.count(id) == 0) return false;
  forget_recv(id);
  return true;
}

bool Matcher::drop_message(PeerId peer, std::uint64_t msg_id) {
  auto it = msg_seq_.find(Key{peer, msg_id});
  if (it == msg_seq_.end()) return false;
  forget_msg(it->second);
  return true;
}

std::vector<RequestId> Matcher::drop_peer(PeerId peer,
                                          const std::function<bool(std::uint64_t)>& keep) {
  std::vector<std::uint64_t> msgs;
  for (const auto& [seq, m] : messages_) {
    if (m.peer == peer && !(keep && keep(m.msg_id))) msgs.push_back(seq);
  }
  for (std::uint64_t seq : msgs) forget_msg(seq);
  std::vector<std::pair<std::uint64_t, RequestId>> mine;
  for (const auto& [id, r] : recvs_) {
    if (r.peer == peer) mine.emplace_back(r.seq, id);
  }
  std::sort(mine.begin(), mine.end());
  std::vector<RequestId> out;
  for (const auto& [seq, id] : mine) {
    forget_recv(id);
    out.push_back(id);
  }
  return out;
}

std::vector<RequestId> Matcher::take_all_recvs() {
  std::vector<std::pair<std::uint64_t, RequestId>> all;
  for (const auto& [id, r] : recvs_) all.emplace_back(r.seq, id);
  std::sort(all.begin(), all.end());
  recvs_.clear();
  recv_by_key_.clear();
  recv_any_.clear();
  recv_count_.clear();
  std::vector<RequestId> out;
  for (const auto& [seq, id] : all) out.push_back(id);
  return out;
}

}  // namespace tictac::transport
