// TcpStore: the client half of the TCP store (see tcp_store_server.h for the server).
//
// Contract:
// - connect() retries refused connections with backoff until `connect_timeout` (the server may
//   start later than its clients), then exchanges a hello that checks magic and protocol version,
//   then authenticates with transport/auth's handshake (TICTAC_AUTH_TOKEN, or
//   TcpStoreOptions::auth_token; the server must hold the same token). A refusal is a
//   protocol_error naming the cause (token on one side only, different tokens).
// - Thread-safe: calls on one TcpStore are serialised on one connection (a thread blocked in
//   get()/wait() delays other threads' calls on the same object; give each thread its own
//   TcpStore when that matters).
// - get()/wait() are parked on the server; the server answers timeout naming the missing keys.
//   Each exchange is additionally bounded on the client by the request's timeout plus
//   `io_timeout`, so a server that dies or stalls gives connection_lost, never a hang.
// - After connection_lost or protocol_error the connection is unusable: every later call
//   returns the same error (no silent reconnect, which could hide lost updates).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "transport/bootstrap/store.h"
#include "transport/bootstrap/tcp_store_protocol.h"

namespace tictac::bootstrap {

struct TcpStoreOptions {
  Millis connect_timeout{30000};
  Millis io_timeout{30000};
  // nullopt: TICTAC_AUTH_TOKEN (unset = no token); "": no token whatever the environment says.
  std::optional<std::string> auth_token;
};

// The token a store endpoint uses: `option` when set ("" = none), else TICTAC_AUTH_TOKEN;
// invalid_argument naming `source` or the variable when it is too short or too long.
Result<std::optional<std::string>> resolve_store_token(const std::optional<std::string>& option,
                                                       const char* source);

class TcpStore final : public Store {
 public:
  static Result<std::unique_ptr<TcpStore>> connect(const std::string& host, std::uint16_t port,
                                                   TcpStoreOptions options = {});
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  Status set(std::string_view key, std::span<const std::uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Status wait(const std::vector<std::string>& keys, Millis timeout) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;

  const std::string& peer() const { return peer_; }

 private:
  TcpStore(int fd, std::string peer, TcpStoreOptions options)
      : fd_(fd), peer_(std::move(peer)), options_(options) {}
  // The auth step after hello: one auth request per handshake step until it passed.
  Status authenticate(const std::optional<std::string>& token);
  // One request/response exchange; a non-ok Result is a broken connection, a Response with a
  // non-ok code is the server's answer (e.g. timeout).
  Result<wire::Response> call(const wire::Request& request, Millis server_wait);

  std::mutex mu_;  // serialises exchanges on fd_ and guards broken_
  int fd_;
  std::string peer_;
  TcpStoreOptions options_;
  Status broken_;  // first connection failure; ok while usable
};

}  // namespace tictac::bootstrap
