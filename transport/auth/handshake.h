// Handshake: the connection handshake's version check and mutual authentication, as a state
// machine with bytes in and bytes out. It owns no socket: a transport sends take_output() to the
// peer and passes whatever it receives to feed(), until done() or failed().
//
// Messages (messages.h) and flow, I = initiator (connecting side), A = acceptor:
//   I -> A  hello(I, has_token, nonce_i)
//   A -> I  hello(A, has_token, nonce_a) + proof(MAC_A)   [or result(refused, reason)]
//   I -> A  proof(MAC_I)                                   [or result(refused, reason)]
//   A -> I  result(accepted)                               [or result(refused, reason)]
// with MAC_X = HMAC-SHA256(token, "tictac-auth-v1" || role_X || nonce_X || nonce_other).
// The initiator proves itself only after it verified the acceptor. Without a token on either
// side the exchange stops after the two hellos and passes, logged at debug level as
// unauthenticated. A token on one side only, a different protocol version, a wrong MAC or a
// malformed message fails: the failing side leaves a result(refused, reason) in take_output()
// for the peer (best effort; send it, then close) and reports a Status and a HandshakeFailure.
//
// Errors: every failure is protocol_error with a message naming the peer and the cause
// (except invalid_argument from start() for a bad token and internal for an RNG failure).
// This class does not log failures; the transport logs the refusal once, where it acts on it.
// Thread safety: none; one connection's handshake is driven by one thread (its loop).
// The token is wiped from memory when the Handshake is destroyed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "transport/auth/messages.h"
#include "transport/auth/proof.h"

namespace tictac::auth {

inline constexpr std::uint16_t kDefaultProtocolVersion = 1;

struct HandshakeConfig {
  Role role = Role::initiator;
  std::optional<std::string> token;  // nullopt: no authentication on this side
  std::uint16_t protocol_version = kDefaultProtocolVersion;  // the transport's wire version
  std::string peer = "peer";  // how messages name the other side, e.g. "127.0.0.1:5000"
  // TICTAC_AUTH_MAC: ask for per-frame MACs after the handshake. Needs a token (start() returns
  // invalid_argument naming TICTAC_AUTH_TOKEN otherwise); both sides must agree (a mismatch is
  // refused on both sides, naming TICTAC_AUTH_MAC). Off: the messages are byte-identical to a
  // release without it.
  bool frame_mac = false;
};

// A config whose token comes from TICTAC_AUTH_TOKEN (invalid_argument if it is too short).
Result<HandshakeConfig> config_from_env(Role role, std::string peer,
                                        std::uint16_t protocol_version = kDefaultProtocolVersion);

enum class HandshakeFailure : std::uint8_t {
  none,
  malformed,              // bad magic, size, type, field or order
  version_mismatch,       // peer speaks another protocol version
  token_missing_here,     // the peer has a token, this side has none
  token_missing_on_peer,  // this side has a token, the peer has none
  bad_proof,              // the peer's MAC does not match: different tokens or tampering
  mac_mismatch,           // TICTAC_AUTH_MAC differs between the sides
  refused_by_peer,        // the peer sent result(refused)
  internal,               // HMAC computation failed locally (status code internal)
};
const char* to_string(HandshakeFailure failure);

class Handshake {
 public:
  // Validates the token, draws this side's nonce and, for the initiator, queues its hello.
  static Result<Handshake> start(HandshakeConfig config);

  // Consumes bytes up to the end of the handshake (leaving anything after its last message to
  // the caller) and returns how many were consumed; a partial message is buffered. Returns the
  // failure Status once failed, 0 once done.
  Result<std::size_t> feed(std::span<const std::uint8_t> bytes);
  // Bytes to send to the peer now (moves them out).
  Bytes take_output();

  bool done() const { return state_ == State::done; }
  bool failed() const { return state_ == State::failed; }
  const Status& status() const { return status_; }
  HandshakeFailure failure() const { return failure_; }
  // True once done with both sides' tokens verified; false for an unauthenticated pass.
  bool authenticated() const { return done() && token_.has_value(); }
  const Nonce& local_nonce() const { return nonce_; }
  // Both sides asked for frame MACs (then authenticated() is true as well).
  bool frame_mac() const { return done() && frame_mac_; }
  // Once frame_mac(): the keys of this connection (proof.h derive_session_key), for the frames
  // this side sends and those it receives. internal error before.
  struct SessionKeys {
    SessionKey send{};
    SessionKey receive{};
  };
  Result<SessionKeys> session_keys() const;
  Role role() const { return role_; }

 private:
  enum class State : std::uint8_t { awaiting_hello, awaiting_proof, awaiting_result, done, failed };

  class Secret {  // the token bytes, wiped on destruction
   public:
    explicit Secret(std::string token) : bytes_(token.begin(), token.end()) {}
    Secret(Secret&&) = default;
    Secret& operator=(Secret&&) = default;
    ~Secret();
    std::string_view view() const { return {bytes_.data(), bytes_.size()}; }

   private:
    std::vector<char> bytes_;
  };

  Handshake(const HandshakeConfig& config, const Nonce& nonce);
  void on_message(const Header& header, std::span<const std::uint8_t> body);
  void on_hello(const Hello& hello);
  void on_proof(const Mac& mac);
  void on_result(const Outcome& outcome);
  // Records the failure as "handshake with peer <peer>: <message>" and queues
  // result(refused, reason_for_peer) unless `tell_peer` is false.
  void fail(HandshakeFailure failure, const std::string& message, const std::string& reason_for_peer,
            bool tell_peer = true);
  void fail_internal(const Status& cause);
  void succeed();
  const char* awaiting() const;

  Role role_;
  std::uint16_t version_;
  std::string peer_;
  std::optional<Secret> token_;
  bool frame_mac_ = false;
  Nonce nonce_{};
  Nonce peer_nonce_{};
  State state_ = State::awaiting_hello;
  Status status_;
  HandshakeFailure failure_ = HandshakeFailure::none;
  Bytes in_;   // the message being received
  Bytes out_;  // bytes to send
};

}  // namespace tictac::auth
