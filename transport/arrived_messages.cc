#include "transport/arrived_messages.h"

#include <algorithm>

#include "common/log.h"

namespace tictac::transport {

std::vector<ArrivedMessages::Dropped> ArrivedMessages::keep(PeerId peer, std::uint64_t msg_id,
                                                            Message m) {
  auto [it, fresh] = by_peer_.try_emplace(peer);
  if (fresh) order_.push_back(peer);
  bytes_ += m.total;
  it->second.emplace(msg_id, std::move(m));
  std::vector<Dropped> dropped;
  while (bytes_ > max_bytes_ && !order_.empty()) {
    const PeerId oldest = order_.front();
    order_.pop_front();
    std::vector<std::uint64_t> ids = forget(oldest);
    TICTAC_LOG(warn) << "forgot " << ids.size() << " message(s) that arrived from peer " << oldest
                     << " before its connection ended and were never received: more than "
                     << max_bytes_ << " bytes of such messages are kept (post the receives sooner)";
    for (std::uint64_t id : ids) dropped.emplace_back(oldest, id);
  }
  return dropped;
}

bool ArrivedMessages::holds(PeerId peer, std::uint64_t msg_id) const {
  auto it = by_peer_.find(peer);
  return it != by_peer_.end() && it->second.count(msg_id) != 0;
}

std::optional<ArrivedMessages::Message> ArrivedMessages::take(PeerId peer, std::uint64_t msg_id) {
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return std::nullopt;
  auto m = it->second.find(msg_id);
  if (m == it->second.end()) return std::nullopt;
  Message out = std::move(m->second);
  it->second.erase(m);
  bytes_ -= out.total;
  if (it->second.empty()) {
    by_peer_.erase(it);
    order_.erase(std::find(order_.begin(), order_.end(), peer));
  }
  return out;
}

std::vector<std::uint64_t> ArrivedMessages::drop_peer(PeerId peer) {
  if (by_peer_.count(peer) == 0) return {};
  order_.erase(std::find(order_.begin(), order_.end(), peer));
  return forget(peer);
}

std::vector<std::uint64_t> ArrivedMessages::forget(PeerId peer) {
  std::vector<std::uint64_t> ids;
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return ids;
  for (auto& [id, m] : it->second) {
    ids.push_back(id);
    bytes_ -= m.total;
  }
  by_peer_.erase(it);
  return ids;
}

std::size_t ArrivedMessages::count() const {
  std::size_t n = 0;
  for (const auto& [peer, msgs] : by_peer_) n += msgs.size();
  return n;
}

}  // namespace tictac::transport
