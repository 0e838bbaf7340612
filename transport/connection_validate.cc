// Connection: checks every frame of an established connection against the protocol state.
#include "transport/connection.h"

#include <string>

#include "transport/wire.h"

namespace tictac::transport {

using wire::FrameType;
using wire::Header;

Status Connection::validate(const Header& h) {
  if (state_ == State::handshaking) return validate_handshake(h);
  if ((h.flags & wire::kFlagCredit) != 0 && send_credit_ + h.aux > peer_.eager_bytes) {
    return peer_status(StatusCode::protocol_error,
                       std::string(wire::to_string(h.type)) + " returns " + std::to_string(h.aux) +
                           " bytes of credit, more than the pool it advertised");
  }
  const std::uint8_t kind =
      h.flags & static_cast<std::uint8_t>(~(wire::kFlagCredit | wire::kFlagInline));
  switch (h.type) {
    case FrameType::auth:
      return peer_status(StatusCode::protocol_error, "AUTH frame after the handshake");
    case FrameType::hello:
      return peer_status(StatusCode::protocol_error, "second HELLO");
    case FrameType::mac:  // handled in on_header before validation
      return peer_status(StatusCode::protocol_error, "unexpected MAC frame");
    case FrameType::announce:
      if (h.msg_id <= last_in_msg_id_) {
        return peer_status(StatusCode::protocol_error,
                           "ANNOUNCE of message " + std::to_string(h.msg_id) +
                               " is not newer than message " + std::to_string(last_in_msg_id_));
      }
      if (kind == wire::kFlagClaimed) return validate_claim(h);
      if (kind == wire::kFlagEager && h.total > config_.eager_bytes - eager_in_use_) {
        return peer_status(StatusCode::protocol_error,
                           "eager message of " + std::to_string(h.total) + " bytes exceeds the " +
                               std::to_string(config_.eager_bytes - eager_in_use_) +
                               " bytes of credit it was given");
      }
      return Status::Ok();
    case FrameType::data: {
      auto it = in_.find(h.msg_id);
      if (it == in_.end()) {
        return peer_status(StatusCode::protocol_error,
                           "DATA for unknown message " + std::to_string(h.msg_id));
      }
      const InMsg& m = it->second;
      if (!m.eager && m.sink == InSink::unmatched) {
        return peer_status(StatusCode::protocol_error,
                           "DATA for message " + std::to_string(h.msg_id) + " before READY");
      }
      if (h.total != m.total || h.tag != m.tag) {
        return peer_status(StatusCode::protocol_error,
                           "DATA for message " + std::to_string(h.msg_id) +
                               " disagrees with its ANNOUNCE (tag/total)");
      }
      const std::uint64_t posted = m.recv != nullptr ? m.recv->length() : m.total;
      Status fits = wire::check_data_fits(h, m.received, posted);
      if (!fits.ok()) return peer_status(StatusCode::protocol_error, fits.message());
      return Status::Ok();
    }
    case FrameType::ready:
    case FrameType::reject: {
      auto it = out_.find(h.msg_id);
      if (it == out_.end()) {
        if (h.msg_id != 0 && h.msg_id < next_msg_id_) return Status::Ok();  // cancelled meanwhile
        return peer_status(StatusCode::protocol_error, std::string(wire::to_string(h.type)) +
                                                           " for unknown message " +
                                                           std::to_string(h.msg_id));
      }
      if (it->second.eager) {
        return peer_status(StatusCode::protocol_error, std::string(wire::to_string(h.type)) +
                                                           " for eager message " +
                                                           std::to_string(h.msg_id));
      }
      return Status::Ok();
    }
    case FrameType::credit:
      if (send_credit_ + h.total > peer_.eager_bytes) {
        return peer_status(StatusCode::protocol_error, "CREDIT of " + std::to_string(h.total) +
                                                           " bytes exceeds the pool it advertised");
      }
      return Status::Ok();
    case FrameType::abort:
      if (h.msg_id == 0 || h.msg_id > last_in_msg_id_) {
        return peer_status(
            StatusCode::protocol_error,
            "ABORT for message " + std::to_string(h.msg_id) + " that was never announced");
      }
      return Status::Ok();
    case FrameType::heartbeat:
      return Status::Ok();
    case FrameType::advert:
      if (h.msg_id <= last_advert_in_) {
        return peer_status(StatusCode::protocol_error, "ADVERT " + std::to_string(h.msg_id) +
                                                           " is not newer than ADVERT " +
                                                           std::to_string(last_advert_in_));
      }
      if (h.offset >= next_msg_id_) {
        return peer_status(StatusCode::protocol_error, "ADVERT says the peer saw message " +
                                                           std::to_string(h.offset) +
                                                           ", which was never sent");
      }
      if (adverts_in_count_ >= wire::kMaxAdvertsOutstanding) {
        return peer_status(StatusCode::protocol_error,
                           "more than " + std::to_string(wire::kMaxAdvertsOutstanding) +
                               " outstanding ADVERTs from the peer");
      }
      return Status::Ok();
  }
  return peer_status(StatusCode::protocol_error, "unhandled frame type");
}

}  // namespace tictac::transport
