#include "transport/auth/handshake.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "common/log.h"
#include "transport/auth/token.h"

namespace tictac::auth {
namespace {

const char* type_name(std::uint8_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::hello: return "hello";
    case MessageType::proof: return "proof";
    case MessageType::result: return "result";
  }
  return "unknown";
}

Role other(Role r) { return r == Role::initiator ? Role::acceptor : Role::initiator; }

}  // namespace

const char* to_string(HandshakeFailure failure) {
  switch (failure) {
    case HandshakeFailure::none: return "none";
    case HandshakeFailure::malformed: return "malformed";
    case HandshakeFailure::version_mismatch: return "version_mismatch";
    case HandshakeFailure::token_missing_here: return "token_missing_here";
    case HandshakeFailure::token_missing_on_peer: return "token_missing_on_peer";
    case HandshakeFailure::bad_proof: return "bad_proof";
    case HandshakeFailure::mac_mismatch: return "mac_mismatch";
    case HandshakeFailure::refused_by_peer: return "refused_by_peer";
    case HandshakeFailure::internal: return "internal";
  }
  return "unknown";
}

Handshake::Secret::~Secret() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

Result<HandshakeConfig> config_from_env(Role role, std::string peer, std::uint16_t protocol_version) {
  Result<std::optional<std::string>> token = kAuthToken.get();
  if (!token.ok()) return token.status();
  HandshakeConfig config;
  config.role = role;
  config.token = std::move(*token);
  config.protocol_version = protocol_version;
  config.peer = std::move(peer);
  return config;
}

Result<Handshake> Handshake::start(HandshakeConfig config) {
  if (config.token) TICTAC_RETURN_IF_ERROR(validate_token(*config.token, "the configured auth token"));
  if (config.frame_mac && !config.token) {
    return invalid_argument(
        "TICTAC_AUTH_MAC is on but no auth token is configured: frame MACs are keyed by the "
        "token; set TICTAC_AUTH_TOKEN (or ContextOptions::auth_token) on all ranks, or set "
        "TICTAC_AUTH_MAC=0");
  }
  Result<Nonce> nonce = random_nonce();
  if (!nonce.ok()) return nonce.status();
  Handshake h(config, *nonce);
  if (config.token) OPENSSL_cleanse(config.token->data(), config.token->size());
  if (h.role_ == Role::initiator) {
    h.out_ = encode_hello(h.version_, Hello{h.role_, h.token_.has_value(), h.nonce_, h.frame_mac_});
  }
  return h;
}

Handshake::Handshake(const HandshakeConfig& config, const Nonce& nonce)
    : role_(config.role),
      version_(config.protocol_version),
      peer_(config.peer),
      frame_mac_(config.frame_mac),
      nonce_(nonce) {
  if (config.token) token_.emplace(*config.token);
}

Bytes Handshake::take_output() { return std::exchange(out_, Bytes()); }

Result<std::size_t> Handshake::feed(std::span<const std::uint8_t> bytes) {
  std::size_t used = 0;
  while (state_ != State::done && state_ != State::failed && used < bytes.size()) {
    std::size_t need = kHeaderBytes;
    Header header;
    if (in_.size() >= kHeaderBytes) {
      // The header was validated when it completed; re-parsing it cannot fail.
      header = *parse_header(in_, version_);
      need = kHeaderBytes + header.body_len;
    }
    const std::size_t take = std::min(need - in_.size(), bytes.size() - used);
    in_.insert(in_.end(), bytes.begin() + static_cast<std::ptrdiff_t>(used),
               bytes.begin() + static_cast<std::ptrdiff_t>(used + take));
    used += take;
    if (in_.size() < need) break;
    if (need == kHeaderBytes) {
      Result<Header> parsed = parse_header(in_, version_);
      if (!parsed.ok()) {
        fail(HandshakeFailure::malformed, parsed.status().message(), parsed.status().message());
        break;
      }
      if (parsed->version != version_) {
        const std::string both = "the peer speaks TicTac protocol version " + std::to_string(parsed->version) +
                                 ", this side speaks version " + std::to_string(version_) +
                                 "; run the same TicTac release on both sides";
        fail(HandshakeFailure::version_mismatch, both,
             "protocol version mismatch: the " + std::string(role_name(other(role_))) + " speaks version " +
                 std::to_string(parsed->version) + ", the " + role_name(role_) + " speaks version " +
                 std::to_string(version_));
        break;
      }
      if (parsed->body_len > 0) continue;
      header = *parsed;
    }
    const Bytes message = std::exchange(in_, Bytes());
    on_message(header, std::span<const std::uint8_t>(message).subspan(kHeaderBytes));
  }
  if (state_ == State::failed) return status_;
  return used;
}

const char* Handshake::awaiting() const {
  switch (state_) {
    case State::awaiting_hello: return "hello";
    case State::awaiting_proof: return "proof";
    case State::awaiting_result: return "result";
    case State::done:
    case State::failed: break;
  }
  return "nothing";
}

void Handshake::on_message(const Header& header, std::span<const std::uint8_t> body) {
  const auto type = static_cast<MessageType>(header.type);
  if (type == MessageType::result) {
    Result<Outcome> outcome = parse_result(body);
    if (!outcome.ok()) return fail(HandshakeFailure::malformed, outcome.status().message(), "malformed result");
    if (!outcome->accepted || state_ == State::awaiting_result) return on_result(*outcome);
  } else if (type == MessageType::hello && state_ == State::awaiting_hello) {
    Result<Hello> hello = parse_hello(body);
    if (!hello.ok()) return fail(HandshakeFailure::malformed, hello.status().message(), hello.status().message());
    return on_hello(*hello);
  } else if (type == MessageType::proof && state_ == State::awaiting_proof) {
    Result<Mac> mac = parse_proof(body);
    if (!mac.ok()) return fail(HandshakeFailure::malformed, mac.status().message(), mac.status().message());
    return on_proof(*mac);
  }
  const std::string why = std::string("malformed handshake: unexpected ") + type_name(header.type) +
                          " message while waiting for " + awaiting();
  fail(HandshakeFailure::malformed, why, why);
}

void Handshake::on_hello(const Hello& hello) {
  const Role peer_role = other(role_);
  const std::string me = role_name(role_);
  const std::string them = role_name(peer_role);
  if (hello.role != peer_role) {
    const std::string why = "malformed handshake: both sides claim the " + me + " role";
    return fail(HandshakeFailure::malformed, why, why);
  }
  if (CRYPTO_memcmp(hello.nonce.data(), nonce_.data(), kNonceBytes) == 0) {
    const std::string why = "the peer echoed this side's nonce (a reflected or looped-back connection)";
    return fail(HandshakeFailure::malformed, why, why);
  }
  peer_nonce_ = hello.nonce;
  const bool mine = token_.has_value();
  if (mine && !hello.has_token) {
    return fail(HandshakeFailure::token_missing_on_peer,
                "auth token on one side only: this side (" + me + ") has TICTAC_AUTH_TOKEN set but the peer (" +
                    them + ") has none; set the same token on both sides",
                "auth token on one side only: the " + me + " has a token, the " + them +
                    " has none; set the same TICTAC_AUTH_TOKEN on both sides");
  }
  if (!mine && hello.has_token) {
    return fail(HandshakeFailure::token_missing_here,
                "auth token on one side only: the peer (" + them + ") requires one but this side (" + me +
                    ") has no TICTAC_AUTH_TOKEN; set the same token on both sides",
                "auth token on one side only: the " + them + " has a token, the " + me +
                    " has none; set the same TICTAC_AUTH_TOKEN on both sides");
  }
  if (hello.frame_mac != frame_mac_) {
    const auto side = [](bool on) { return std::string(on ? "TICTAC_AUTH_MAC=1" : "TICTAC_AUTH_MAC=0"); };
    return fail(HandshakeFailure::mac_mismatch,
                "frame MACs on one side only: this side (" + me + ") has " + side(frame_mac_) +
                    ", the peer (" + them + ") has " + side(hello.frame_mac) +
                    "; set the same TICTAC_AUTH_MAC on both sides",
                "frame MACs on one side only: the " + me + " has " + side(frame_mac_) + ", the " + them +
                    " has " + side(hello.frame_mac) + "; set the same TICTAC_AUTH_MAC on both sides");
  }
  if (role_ == Role::acceptor) {
    Bytes hello_out = encode_hello(version_, Hello{role_, mine, nonce_, frame_mac_});
    out_.insert(out_.end(), hello_out.begin(), hello_out.end());
  }
  if (!mine) {
    TICTAC_LOG(debug) << "handshake with " << peer_ << ": no auth token on either side; the connection is "
                      << "NOT authenticated (set TICTAC_AUTH_TOKEN on all ranks to authenticate)";
    return succeed();
  }
  if (role_ == Role::acceptor) {
    Result<Mac> mac = compute_proof(token_->view(), role_, nonce_, peer_nonce_);
    if (!mac.ok()) return fail_internal(mac.status());
    Bytes proof = encode_proof(version_, *mac);
    out_.insert(out_.end(), proof.begin(), proof.end());
  }
  state_ = State::awaiting_proof;
}

void Handshake::on_proof(const Mac& mac) {
  Result<Mac> expected = compute_proof(token_->view(), other(role_), peer_nonce_, nonce_);
  if (!expected.ok()) return fail_internal(expected.status());
  if (!macs_equal(mac, *expected)) {
    return fail(HandshakeFailure::bad_proof,
                "authentication failed: the peer's proof does not match this side's token "
                "(different TICTAC_AUTH_TOKEN values, or the message was altered)",
                std::string("authentication failed: the ") + role_name(other(role_)) + "'s proof does not match the " +
                    role_name(role_) + "'s token (different TICTAC_AUTH_TOKEN values?)");
  }
  if (role_ == Role::initiator) {
    Result<Mac> mine = compute_proof(token_->view(), role_, nonce_, peer_nonce_);
    if (!mine.ok()) return fail_internal(mine.status());
    Bytes proof = encode_proof(version_, *mine);
    out_.insert(out_.end(), proof.begin(), proof.end());
    state_ = State::awaiting_result;
    return;
  }
  Bytes result = encode_result(version_, Outcome{true, {}});
  out_.insert(out_.end(), result.begin(), result.end());
  succeed();
}

void Handshake::on_result(const Outcome& outcome) {
  if (outcome.accepted) return succeed();
  fail(HandshakeFailure::refused_by_peer, "the peer refused the handshake: " + outcome.reason, {},
       /*tell_peer=*/false);
}

Result<Handshake::SessionKeys> Handshake::session_keys() const {
  if (!frame_mac()) {
    return Status(StatusCode::internal,
                  "frame-MAC keys asked for before a handshake with TICTAC_AUTH_MAC on both sides passed");
  }
  const Nonce& nonce_i = role_ == Role::initiator ? nonce_ : peer_nonce_;
  const Nonce& nonce_a = role_ == Role::initiator ? peer_nonce_ : nonce_;
  Result<SessionKey> send = derive_session_key(token_->view(), nonce_i, nonce_a, role_);
  if (!send.ok()) return send.status();
  Result<SessionKey> receive = derive_session_key(token_->view(), nonce_i, nonce_a, other(role_));
  if (!receive.ok()) return receive.status();
  return SessionKeys{*send, *receive};
}

void Handshake::succeed() {
  state_ = State::done;
  TICTAC_LOG(debug) << "handshake with " << peer_ << " done as " << role_name(role_)
                    << (token_ ? " (mutually authenticated)" : " (unauthenticated)");
}

void Handshake::fail(HandshakeFailure failure, const std::string& message, const std::string& reason_for_peer,
                     bool tell_peer) {
  state_ = State::failed;
  failure_ = failure;
  status_ = Status(StatusCode::protocol_error, "handshake with peer " + peer_ + ": " + message, "peer " + peer_);
  if (tell_peer) {
    Bytes result = encode_result(version_, Outcome{false, reason_for_peer});
    out_.insert(out_.end(), result.begin(), result.end());
  }
}

void Handshake::fail_internal(const Status& cause) {
  fail(HandshakeFailure::internal, cause.message(), "internal error on the " + std::string(role_name(role_)));
  status_ = Status(StatusCode::internal, status_.message(), status_.origin());
}

}  // namespace tictac::auth
