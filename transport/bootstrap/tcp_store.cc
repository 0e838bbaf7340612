#include "transport/bootstrap/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "transport/auth/handshake.h"
#include "transport/auth/token.h"
#include "transport/bootstrap/socket_io.h"

namespace tictac::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

std::uint32_t wire_timeout(Millis timeout) { return static_cast<std::uint32_t>(clamp_timeout(timeout).count()); }

Status answer_status(const wire::Response& r, const std::string& peer) {
  if (r.code == StatusCode::ok) return Status::Ok();
  return Status(r.code, r.message, "store server " + peer);
}

}  // namespace

Status TcpStore::authenticate(const std::optional<std::string>& token) {
  const std::string& peer = peer_;
  auth::HandshakeConfig config;
  config.role = auth::Role::initiator;
  config.token = token;
  config.protocol_version = wire::kVersion;
  config.peer = "tcp store server " + peer;
  Result<auth::Handshake> hs = auth::Handshake::start(std::move(config));
  TICTAC_RETURN_IF_ERROR(hs);
  while (!hs->done()) {
    wire::Request req;
    req.op = wire::Op::auth;
    const auth::Bytes out = hs->take_output();
    req.value.assign(out.begin(), out.end());
    Result<wire::Response> r = call(req, Millis(0));
    if (!r.ok()) return r.status();
    TICTAC_RETURN_IF_ERROR(answer_status(*r, peer));
    Result<std::size_t> used = hs->feed(r->value);
    if (!used.ok()) {
      const auth::Bytes refusal = hs->take_output();  // tell the server why (best effort)
      if (!refusal.empty()) {
        req.value.assign(refusal.begin(), refusal.end());
        (void)call(req, Millis(0));
      }
      return Status(used.status().code(), "tcp store: " + used.status().message(), peer);
    }
  }
  return Status::Ok();
}

Result<std::optional<std::string>> resolve_store_token(const std::optional<std::string>& option,
                                                       const char* source) {
  if (option) {
    if (option->empty()) return std::optional<std::string>();
    TICTAC_RETURN_IF_ERROR(auth::validate_token(*option, source));
    return option;
  }
  return auth::kAuthToken.get();
}

Result<std::unique_ptr<TcpStore>> TcpStore::connect(const std::string& host, std::uint16_t port,
                                                    TcpStoreOptions options) {
  const std::string peer = host + ":" + std::to_string(port);
  Result<std::optional<std::string>> token = resolve_store_token(options.auth_token, "TcpStoreOptions::auth_token");
  TICTAC_RETURN_IF_ERROR(token);
  Result<int> fd = io::connect_until(host, port, Clock::now() + options.connect_timeout);
  if (!fd.ok()) return fd.status();
  auto store = std::unique_ptr<TcpStore>(new TcpStore(*fd, peer, options));
  wire::Request hello;
  hello.op = wire::Op::hello;
  Result<wire::Response> r = store->call(hello, Millis(0));
  if (!r.ok()) return r.status();
  TICTAC_RETURN_IF_ERROR(answer_status(*r, peer));
  TICTAC_RETURN_IF_ERROR(store->authenticate(*token));
  TICTAC_LOG(debug) << "tcp store client connected to " << peer << (token->has_value() ? " (authenticated)" : "");
  return store;
}

TcpStore::~TcpStore() { ::close(fd_); }

Result<wire::Response> TcpStore::call(const wire::Request& request, Millis server_wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  const auto deadline = Clock::now() + server_wait + options_.io_timeout;
  const Bytes frame = wire::encode_request(request);
  Status s = io::send_all(fd_, frame, deadline, peer_);
  std::uint8_t prefix[wire::kLengthPrefixBytes];
  if (s.ok()) s = io::recv_exact(fd_, prefix, deadline, peer_);
  Bytes body;
  if (s.ok()) {
    Result<std::uint32_t> len = wire::decode_frame_length(prefix);
    s = len.status();
    if (s.ok()) {
      body.resize(*len);
      s = io::recv_exact(fd_, body, deadline, peer_);
    }
  }
  Result<wire::Response> response = s.ok() ? wire::decode_response(request.op, body) : Result<wire::Response>(s);
  if (!response.ok()) {
    s = response.status();
    if (s.code() == StatusCode::timeout) {
      s = Status(StatusCode::connection_lost,
                 "store server " + peer_ + " did not answer a " + wire::op_name(request.op) + " within " +
                     std::to_string((server_wait + options_.io_timeout).count()) + " ms (server stalled?)",
                 peer_);
    }
    broken_ = s;
    TICTAC_LOG(warn) << "tcp store client: " << s.to_string();
    return s;
  }
  if (response->code == StatusCode::protocol_error) {
    broken_ = answer_status(*response, peer_);  // the server closes the connection after this
  }
  return response;
}

Status TcpStore::set(std::string_view key, std::span<const std::uint8_t> value) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  TICTAC_RETURN_IF_ERROR(validate_value_size(value.size()));
  wire::Request req;
  req.op = wire::Op::set;
  req.key = std::string(key);
  req.value.assign(value.begin(), value.end());
  Result<wire::Response> r = call(req, Millis(0));
  if (!r.ok()) return r.status();
  return answer_status(*r, peer_);
}

Result<Bytes> TcpStore::get(std::string_view key, Millis timeout) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  wire::Request req;
  req.op = wire::Op::get;
  req.key = std::string(key);
  req.timeout_ms = wire_timeout(timeout);
  Result<wire::Response> r = call(req, Millis(req.timeout_ms));
  if (!r.ok()) return r.status();
  TICTAC_RETURN_IF_ERROR(answer_status(*r, peer_));
  return std::move(r->value);
}

Status TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  TICTAC_RETURN_IF_ERROR(validate_wait_keys(keys));
  if (keys.empty()) return Status::Ok();
  wire::Request req;
  req.op = wire::Op::wait;
  req.keys = keys;
  req.timeout_ms = wire_timeout(timeout);
  Result<wire::Response> r = call(req, Millis(req.timeout_ms));
  if (!r.ok()) return r.status();
  return answer_status(*r, peer_);
}

Result<std::int64_t> TcpStore::add(std::string_view key, std::int64_t delta) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  wire::Request req;
  req.op = wire::Op::add;
  req.key = std::string(key);
  req.delta = delta;
  Result<wire::Response> r = call(req, Millis(0));
  if (!r.ok()) return r.status();
  TICTAC_RETURN_IF_ERROR(answer_status(*r, peer_));
  return r->number;
}

}  // namespace tictac::bootstrap
