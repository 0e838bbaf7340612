// The QP exchange over the TCP side channel, both roles (internal to the verbs backend):
//
//   connector                                   acceptor
//   auth handshake (side_auth.h)        <-------->  auth handshake: nothing allocated before it
//   create endpoint (QPs in INIT, ring)  --QpInfo-->  check the peer's sizes (check_peer_limits),
//                                                     create endpoint, connect: RTR, RTS
//   connect: RTR, RTS                    <--QpInfo--
//   ready byte                           ---0x52--->  hand the endpoint to on_accept
//   hand the endpoint to on_done
//
// Each side reaches RTS before the other may send to it: the acceptor before it answers, the
// connector before its ready byte; the acceptor hands its endpoint out only after that byte.
// Connector: retries refused connects every kConnectRetry until the deadline (then timeout);
// reports exactly once, always from a later loop step, unless abandoned. Its policy (constant
// back-off, deadline watchdog, report once, abandon) is the backend scaffold's ConnectRetry
// (transport/scaffold/retry.h). Acceptor: gives up (logging why) when the
// peer misbehaves, vanishes, or does not finish within its timeout (TICTAC_HANDSHAKE_TIMEOUT).
// Threading: loop-thread only. Both own their socket until they hand it to the endpoint.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"
#include "transport/scaffold/retry.h"
#include "transport/verbs/backend/device.h"
#include "transport/verbs/backend/endpoint.h"
#include "transport/verbs/backend/side_auth.h"
#include "transport/verbs/backend/side_channel.h"

namespace tictac::verbs {

inline constexpr auto kConnectRetry = std::chrono::milliseconds(20);

class Acceptor {
 public:
  using Done = std::function<void(Result<std::unique_ptr<VerbsEndpoint>>)>;
  // `done` fires once, from a loop step (never inside start()); `finished` after it, so the
  // owner can drop this object (from a deferred task).
  // `token` (the backend's; outlives this object) authenticates the peer before anything else;
  // the whole exchange must finish within `timeout`.
  Acceptor(std::shared_ptr<Device> device, const SideToken& token, int fd,
           std::chrono::milliseconds timeout, Done done, std::function<void()> finished);
  ~Acceptor();
  void start();

 private:
  void on_events(std::uint32_t events);
  Status step();
  void finish(Result<std::unique_ptr<VerbsEndpoint>> result);

  std::shared_ptr<Device> dev_;
  const SideToken& token_;
  const std::chrono::milliseconds timeout_;
  SideStream stream_;
  Done done_;
  std::function<void()> finished_;
  std::optional<SideAuth> auth_;
  std::unique_ptr<VerbsEndpoint> ep_;
  enum class State { authenticate, read_info, read_ready, done } state_ = State::authenticate;
  bool watching_ = false;
  transport::ProgressEngine::TimerId timer_ = 0;
  transport::scaffold::LoopLifetime lifetime_;
};

class Connector {
 public:
  Connector(std::shared_ptr<Device> device, const SideToken& token, sockaddr_in addr,
            std::string address, transport::Clock::time_point deadline, transport::ConnectFn done,
            std::function<void()> finished);
  ~Connector();
  void start();
  // No callback any more; releases the socket and the half-built endpoint.
  void abandon();

 private:
  void attempt();
  void on_events(std::uint32_t events);
  Status step();
  void retry_or_fail(const Status& why, int err);
  void finish(Result<std::unique_ptr<transport::Endpoint>> result);
  // What an attempt holds: the socket, the auth exchange, the half-built endpoint.
  void release();
  void drop_socket();

  std::shared_ptr<Device> dev_;
  const SideToken& token_;
  const sockaddr_in addr_;
  const std::string address_;
  std::unique_ptr<SideStream> stream_;
  std::optional<SideAuth> auth_;
  std::unique_ptr<VerbsEndpoint> ep_;
  enum class State {
    idle,
    connecting,
    authenticate,
    read_info,
    send_ready,
    done
  } state_ = State::idle;
  int connect_errno_ = 0;  // of the last failed connect attempt
  bool watching_ = false;
  transport::scaffold::ConnectRetry retry_;
  transport::scaffold::LoopLifetime lifetime_;
};

}  // namespace tictac::verbs
