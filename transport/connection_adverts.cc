// Connection: receiver-advertised buffers (ADVERT frames, claimed ANNOUNCEs; see connection.h).
#include "transport/connection.h"

#include <string>

namespace tictac::transport {

using wire::FrameType;
using wire::Header;

void Connection::advertise(const Request* req, std::uint64_t ahead) {
  check_loop_thread("advertise");
  if (state_ != State::established || config_.max_adverts == 0 ||
      adverts_out_count_ >= config_.max_adverts || req->length() <= kAdvertMinBytes) {
    return;
  }
  const std::uint64_t id = next_advert_id_++;
  adverts_out_[req->tag()].push_back(AdvertOut{id, ahead, req->length()});
  ++adverts_out_count_;
  Header a;
  a.type = FrameType::advert;
  a.tag = req->tag();
  a.msg_id = id;
  a.offset = last_in_msg_id_;
  a.total = req->length();
  a.priority = static_cast<Priority>(ahead);
  push_control(a);
}

void Connection::count_announce(Tag tag) {
  auto it = adverts_out_.find(tag);
  if (it == adverts_out_.end()) return;
  std::vector<AdvertOut>& v = it->second;
  for (auto a = v.begin(); a != v.end();) {
    if (a->countdown == 0) {  // this message is its target: claimed (validated) or lapsed
      a = v.erase(a);
      --adverts_out_count_;
    } else {
      --a->countdown;
      ++a;
    }
  }
  if (v.empty()) adverts_out_.erase(it);
}

Status Connection::validate_claim(const Header& h) {
  auto it = adverts_out_.find(h.tag);
  if (it != adverts_out_.end()) {
    for (const AdvertOut& a : it->second) {
      if (a.id != h.offset || a.countdown != 0) continue;
      if (h.total > a.capacity) break;
      return Status::Ok();
    }
  }
  return peer_status(StatusCode::protocol_error,
                     "ANNOUNCE of message " + std::to_string(h.msg_id) + " (" + std::to_string(h.total) +
                         " bytes, tag " + std::to_string(h.tag) + ") claims ADVERT " +
                         std::to_string(h.offset) + ", which does not target it or is too small");
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> Connection::next_claim(Tag tag) {
  auto it = adverts_in_.find(tag);
  if (it == adverts_in_.end()) return std::nullopt;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> hit;
  std::vector<AdvertIn>& v = it->second;
  for (auto a = v.begin(); a != v.end();) {
    if (a->remaining == 0) {  // targets this send; the newest advert for it wins
      if (!hit || a->id > hit->first) hit = std::make_pair(a->id, a->capacity);
      a = v.erase(a);
      --adverts_in_count_;
    } else {
      --a->remaining;
      ++a;
    }
  }
  if (v.empty()) adverts_in_.erase(it);
  return hit;
}

void Connection::handle_advert(const Header& h) {
  last_advert_in_ = h.msg_id;
  const std::uint64_t seen = h.offset;
  while (!sent_log_.empty() && sent_log_.front().first <= seen) sent_log_.pop_front();
  if (seen < sent_log_floor_) return;  // cannot count what it has not seen: let it lapse
  std::uint64_t unseen = 0;  // messages with this tag on their way to the receiver
  for (const auto& [id, tag] : sent_log_) unseen += tag == h.tag ? 1 : 0;
  const auto ahead = static_cast<std::uint64_t>(h.priority);
  if (unseen > ahead) return;  // its message is already announced: it lapses at the receiver
  adverts_in_[h.tag].push_back(AdvertIn{h.msg_id, ahead - unseen, h.total});
  ++adverts_in_count_;
}

}  // namespace tictac::transport
