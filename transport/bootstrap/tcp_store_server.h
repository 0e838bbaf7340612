// TcpStoreServer: the server half of the TCP store. One background thread runs a poll() loop
// over the listening socket and all clients; the key/value map lives on that thread only.
//
// Contract:
// - start() binds (host "127.0.0.1" by default; "0.0.0.0" or "::" for any address; port 0
//   picks a free one, see port()) and starts the thread; it fails with unavailable when the
//   address cannot be bound.
// - Every received frame is validated (tcp_store_protocol.h). A malformed, oversized or
//   out-of-order frame (or a wrong magic/version in the first frame) gets a protocol_error
//   response naming the problem, that one client is closed, the event is logged at warn level
//   and counted in protocol_errors(); the server and its other clients carry on.
// - Authentication: after hello every client must pass transport/auth's handshake (auth frames,
//   TcpStoreServerOptions::auth_token or TICTAC_AUTH_TOKEN) before any other op. Until then its
//   frames are capped at wire::kMaxPreAuthFrameBodyBytes and it is dropped after
//   handshake_timeout; a refused client gets the refusal's reason, is closed, logged at warn
//   and counted in auth_failures(). It never reads or writes a key.
// - get()/wait() requests for missing keys are parked on the server until the keys appear or
//   the request's own timeout passes, then answered with timeout naming the missing keys.
// - Requests of one client are served in order; a client's next request is read only after the
//   previous response has been sent (per-client memory is bounded by one frame each way).
// - stop() (also run by the destructor) closes every connection, so clients fail with
//   connection_lost rather than hang. Idempotent; all public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"

namespace tictac::bootstrap {

struct TcpStoreServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::size_t max_clients = 1024;  // further connections are accepted and closed at once
  // nullopt: TICTAC_AUTH_TOKEN (unset = no token); "": no token whatever the environment says.
  std::optional<std::string> auth_token;
  // A client that has not passed hello and the handshake by then is closed.
  std::chrono::milliseconds handshake_timeout{30000};
};

class TcpStoreServer {
 public:
  static Result<std::unique_ptr<TcpStoreServer>> start(TcpStoreServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  void stop();
  std::size_t protocol_errors() const { return protocol_errors_.load(); }
  // Clients refused in the auth handshake or dropped for not finishing it in time.
  std::size_t auth_failures() const { return auth_failures_.load(); }

 private:
  class Loop;
  TcpStoreServer(TcpStoreServerOptions options, int listen_fd, int wake_fd, std::uint16_t port);

  TcpStoreServerOptions options_;  // auth_token: the resolved token (wiped by the destructor)
  int listen_fd_;
  int wake_fd_;  // eventfd: written by stop() to wake the loop
  std::uint16_t port_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> protocol_errors_{0};
  std::atomic<std::size_t> auth_failures_{0};
  std::mutex stop_mu_;  // serialises stop(): one caller joins the thread and closes the sockets
  std::thread thread_;
};

}  // namespace tictac::bootstrap
