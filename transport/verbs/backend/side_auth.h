// SideAuth: transport/auth's handshake (version check, HMAC-SHA256 mutual authentication with
// TICTAC_AUTH_TOKEN: the same exchange tcp's Connection runs) over the verbs side channel. It runs
// FIRST on every side-channel connection: the acceptor allocates, creates QPs and registers memory
// for a peer only after the peer proved the token (or, with no token on either side, passed the
// version check). The Connection's own AUTH exchange still runs afterwards over the endpoint.
//
// SideToken holds the backend's token (nullopt = no authentication), wiped on destruction.
// Errors: the handshake's protocol_error ("handshake with peer P: <cause>"), prefixed with
// "verbs side channel: "; connection_lost when the peer closes mid-way. On a failure the refusal
// for the peer is queued and flushed best effort before the Status is returned.
// Threading: loop-thread only, one SideAuth per side-channel connection.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "transport/auth/handshake.h"
#include "transport/verbs/backend/side_channel.h"

namespace tictac::verbs {

struct SideToken {
  std::optional<std::string> value;
  SideToken() = default;
  explicit SideToken(std::optional<std::string> token) : value(std::move(token)) {}
  SideToken(const SideToken&) = delete;
  SideToken& operator=(const SideToken&) = delete;
  ~SideToken();
};

class SideAuth {
 public:
  // The initiator queues its hello (sent by the first step()).
  static Result<SideAuth> start(auth::Role role, const SideToken& token, std::string peer);
  // Sends what is pending, reads what the socket has and feeds it to the handshake. Returns true
  // once done (bytes after its last message stay buffered in `stream`), false when it needs more.
  Result<bool> step(SideStream& stream);
  bool authenticated() const { return hs_.authenticated(); }

 private:
  explicit SideAuth(auth::Handshake hs) : hs_(std::move(hs)) {}
  Status send_output(SideStream& stream);
  Status failed(SideStream& stream, const Status& why);

  auth::Handshake hs_;
};

}  // namespace tictac::verbs
