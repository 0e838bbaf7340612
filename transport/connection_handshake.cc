// Connection: the handshake (AUTH frames of transport/auth, then one HELLO each way).
#include "transport/connection.h"

#include <openssl/crypto.h>

#include <cstring>
#include <span>
#include <utility>

#include "common/check.h"
#include "common/log.h"

namespace tictac::transport {

using wire::FrameType;
using wire::Header;

void Connection::start(const std::optional<std::string>& auth_token) {
  check_loop_thread("start");
  endpoint_->start(this);
  auth::HandshakeConfig hc;
  hc.role = initiator_ ? auth::Role::initiator : auth::Role::acceptor;
  hc.token = auth_token;
  hc.protocol_version = wire::kVersion;
  hc.peer = endpoint_desc_;
  hc.frame_mac = config_.frame_mac;
  Result<auth::Handshake> hs = auth::Handshake::start(std::move(hc));
  if (!hs.ok()) {
    fail(peer_status(hs.status().code(), "cannot start the handshake: " + hs.status().message()));
    return;
  }
  auth_.emplace(std::move(hs).value());
  (void)send_auth_output();  // the initiator's hello; the acceptor waits for it
}

std::uint64_t Connection::send_auth_output() {
  const auth::Bytes out = auth_->take_output();
  if (out.empty()) return 0;
  TICTAC_CHECK(out.size() <= wire::kMaxAuthBytes, "handshake output of " << out.size() << " bytes");
  Header h;
  h.version = wire::kHandshakeFrameVersion;
  h.type = FrameType::auth;
  h.length = static_cast<std::uint32_t>(out.size());
  std::vector<std::byte> payload(out.size());
  std::memcpy(payload.data(), out.data(), out.size());
  const std::uint64_t cid = next_control_id_;
  push_control(h, std::move(payload));
  return cid;
}

void Connection::send_hello() {
  Header h;
  h.type = FrameType::hello;
  std::vector<std::byte> body = encode_hello(local_);
  h.length = static_cast<std::uint32_t>(body.size());
  push_control(h, std::move(body));
}

Status Connection::validate_handshake(const Header& h) {
  const bool auth_done = auth_ && auth_->done();
  if (h.type == FrameType::auth) {
    if (!auth_done) return Status::Ok();
    return peer_status(StatusCode::protocol_error, "AUTH frame after the authentication handshake finished");
  }
  if (h.type == FrameType::hello) {
    if (auth_done) return Status::Ok();
    return peer_status(StatusCode::protocol_error, "HELLO before the authentication handshake finished");
  }
  return peer_status(StatusCode::protocol_error,
                     (auth_done ? std::string("expected HELLO, got ") : std::string("expected AUTH first, got ")) +
                         std::string(wire::to_string(h.type)) + " during the handshake");
}

void Connection::handle_auth() {
  const std::vector<std::byte> body = std::exchange(auth_body_, {});
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
  Result<std::size_t> used = auth_->feed(bytes);
  if (!used.ok()) {
    refuse();
    return;
  }
  if (*used != bytes.size()) {  // done, yet the frame goes on: the peer does not follow the protocol
    fail(peer_status(StatusCode::protocol_error,
                     "AUTH frame carries " + std::to_string(bytes.size() - *used) +
                         " bytes after the end of the authentication handshake"));
    return;
  }
  (void)send_auth_output();
  if (!auth_->done()) return;
  if (auth_->frame_mac()) {
    Status st = start_frame_mac();
    if (!st.ok()) {
      fail(peer_status(st.code(), "cannot set up frame MACs: " + st.message()));
      return;
    }
  }
  send_hello();  // the peer's HELLO follows its last AUTH frame
}

Status Connection::start_frame_mac() {
  Result<auth::Handshake::SessionKeys> keys = auth_->session_keys();
  if (!keys.ok()) return keys.status();
  // From here on every frame but the AUTH frames already queued goes behind a MAC frame, and
  // every frame from the peer (its HELLO is next) must come behind one.
  mac_out_ = std::make_unique<FrameMac>(keys->send);
  mac_in_ = std::make_unique<FrameMac>(keys->receive);
  OPENSSL_cleanse(keys->send.data(), keys->send.size());
  OPENSSL_cleanse(keys->receive.data(), keys->receive.size());
  TICTAC_LOG(debug) << describe() << ": frame MACs on (TICTAC_AUTH_MAC)";
  return Status::Ok();
}

void Connection::refuse() {
  // The handshake names the peer as "handshake with peer <endpoint>: "; describe() says it better.
  std::string what = auth_->status().message();
  const std::string prefix = "handshake with peer " + endpoint_desc_ + ": ";
  if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
  refusal_ = peer_status(auth_->status().code(), std::string("refused in the handshake (") +
                                                     auth::to_string(auth_->failure()) + "): " + what);
  // Best effort: the refusal with its reason goes out first (the handshake left it in its
  // output unless the peer refused us), then the connection fails and closes.
  const std::uint64_t cid = send_auth_output();
  if (cid == 0) {
    fail(refusal_);
    return;
  }
  refusing_ = true;
  refusal_control_id_ = cid;
}

void Connection::handle_hello() {
  Result<HelloInfo> info = decode_hello(hello_body_);
  hello_body_.clear();
  if (!info.ok()) {
    fail(peer_status(StatusCode::protocol_error, info.status().message()));
    return;
  }
  Status ok = verify_hello(local_, *info);
  if (!ok.ok()) {
    fail(peer_status(ok.code(), "refused in the handshake: " + ok.message()));
    return;
  }
  peer_ = *info;
  send_credit_ = peer_.eager_bytes;
  state_ = State::established;
  const bool authenticated = auth_->authenticated();
  const bool macs = mac_in_ != nullptr;
  auth_.reset();  // wipes its copy of the token
  TICTAC_LOG(debug) << "connected to " << describe()
                    << (authenticated ? " (mutually authenticated" : " (not authenticated: no auth token")
                    << (macs ? ", every frame MAC'd)" : ")");
  host_.connection_established(*this);
}

}  // namespace tictac::transport
