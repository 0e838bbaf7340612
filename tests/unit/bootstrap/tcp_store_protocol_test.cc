// TCP store wire format and the server's handling of bad frames from a raw socket.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/bootstrap/store_fixture.h"
#include "transport/bootstrap/socket_io.h"
#include "transport/auth/handshake.h"
#include "transport/bootstrap/tcp_store_protocol.h"

namespace tictac::bootstrap {
namespace {

using namespace std::chrono_literals;
namespace w = wire;

std::span<const std::uint8_t> body_of(const Bytes& frame) {
  return std::span<const std::uint8_t>(frame).subspan(w::kLengthPrefixBytes);
}

TEST(TcpStoreWire, RequestsRoundTrip) {
  w::Request set;
  set.op = w::Op::set;
  set.key = "k";
  set.value = {1, 0, 2};
  w::Request wait;
  wait.op = w::Op::wait;
  wait.timeout_ms = 1234;
  wait.keys = {"a", "bb"};
  w::Request add;
  add.op = w::Op::add;
  add.key = "n";
  add.delta = -7;
  for (const w::Request& r : {set, wait, add}) {
    const Bytes frame = w::encode_request(r);
    Result<std::uint32_t> len = w::decode_frame_length(frame);
    ASSERT_TRUE(len.ok());
    EXPECT_EQ(*len + w::kLengthPrefixBytes, frame.size());
    Result<w::Request> back = w::decode_request(body_of(frame));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->op, r.op);
    EXPECT_EQ(back->key, r.key);
    EXPECT_EQ(back->value, r.value);
    EXPECT_EQ(back->keys, r.keys);
    EXPECT_EQ(back->delta, r.delta);
    EXPECT_EQ(back->timeout_ms, r.timeout_ms);
  }
}

TEST(TcpStoreWire, ResponsesRoundTrip) {
  w::Response ok;
  ok.value = {9, 8};
  Result<w::Response> back = w::decode_response(w::Op::get, body_of(w::encode_response(w::Op::get, ok)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->value, ok.value);
  w::Response err;
  err.code = StatusCode::timeout;
  err.message = "missing a";
  back = w::decode_response(w::Op::wait, body_of(w::encode_response(w::Op::wait, err)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->code, StatusCode::timeout);
  EXPECT_EQ(back->message, "missing a");
  EXPECT_EQ(w::decode_response(w::Op::add, std::vector<std::uint8_t>{0, 1, 2}).status().code(),
            StatusCode::protocol_error);  // truncated counter
  EXPECT_EQ(w::decode_response(w::Op::set, std::vector<std::uint8_t>{200}).status().code(),
            StatusCode::protocol_error);  // unknown status code
}

// A table of crafted bad bodies; each must be a protocol_error that names the problem.
TEST(TcpStoreWire, MalformedRequestsAreProtocolErrors) {
  struct Case {
    const char* what;
    Bytes body;
    const char* expect;
  };
  const Case cases[] = {
      {"unknown op", {99}, "unknown op"},
      {"hello cut short", {1, 0x54, 0x54}, "ends inside"},
      {"key length beyond frame", {2, 10, 0, 0, 0, 'a'}, "past the end"},
      {"key over the limit", {3, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, "exceeds the limit"},
      {"empty key", {5, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, "empty"},
      {"trailing bytes", {5, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 0, 0, 0, 0, 42}, "unexpected bytes"},
      {"too many wait keys", {4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}, "key count"},
  };
  for (const Case& c : cases) {
    Result<w::Request> r = w::decode_request(c.body);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::protocol_error) << c.what;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.what << ": " << r.status().message();
  }
  const std::uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(w::decode_frame_length(huge).status().code(), StatusCode::protocol_error);
  const std::uint8_t zero[4] = {0, 0, 0, 0};
  EXPECT_EQ(w::decode_frame_length(zero).status().code(), StatusCode::protocol_error);
}

// Sends raw bytes to the server and reads its answer until it closes the connection.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port) {
    auto fd = io::connect_until("127.0.0.1", port, std::chrono::steady_clock::now() + 10s);
    fd_ = fd.ok() ? *fd : -1;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool send(const Bytes& b) {
    return io::send_all(fd_, b, std::chrono::steady_clock::now() + 10s, "server").ok();
  }
  // The next response frame; a non-ok Result when the connection closed first.
  Result<w::Response> response(w::Op op) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::uint8_t prefix[4];
    TICTAC_RETURN_IF_ERROR(io::recv_exact(fd_, prefix, deadline, "server"));
    Result<std::uint32_t> len = w::decode_frame_length(prefix);
    if (!len.ok()) return len.status();
    Bytes body(*len);
    TICTAC_RETURN_IF_ERROR(io::recv_exact(fd_, body, deadline, "server"));
    return w::decode_response(op, body);
  }
  bool closed_by_peer() {
    std::uint8_t b;
    return io::recv_exact(fd_, {&b, 1}, std::chrono::steady_clock::now() + 10s, "server").code() ==
           StatusCode::connection_lost;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

Bytes hello_frame() { return w::encode_request(w::Request{}); }

// The auth step as a client does it, on a raw connection; "" when it passed, else the reason.
std::string raw_authenticate(RawClient& raw, const std::optional<std::string>& token) {
  auth::HandshakeConfig config;
  config.role = auth::Role::initiator;
  config.token = token;
  config.protocol_version = w::kVersion;
  Result<auth::Handshake> hs = auth::Handshake::start(std::move(config));
  if (!hs.ok()) return hs.status().to_string();
  while (!hs->done()) {
    w::Request req;
    req.op = w::Op::auth;
    const auth::Bytes out = hs->take_output();
    req.value.assign(out.begin(), out.end());
    if (!raw.send(w::encode_request(req))) return "send failed";
    Result<w::Response> r = raw.response(w::Op::auth);
    if (!r.ok()) return r.status().to_string();
    if (r->code != StatusCode::ok) return r->message;
    Result<std::size_t> used = hs->feed(r->value);
    if (!used.ok()) return used.status().to_string();
  }
  return "";
}

Bytes raw_frame(std::initializer_list<std::uint8_t> body) {
  const auto n = static_cast<std::uint32_t>(body.size());
  Bytes out(w::kLengthPrefixBytes + body.size());
  for (std::size_t i = 0; i < w::kLengthPrefixBytes; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::copy(body.begin(), body.end(), out.begin() + w::kLengthPrefixBytes);
  return out;
}

TEST(TcpStoreServer, MalformedFramesCloseOnlyThatClient) {
  testing::TcpWorld world;
  ASSERT_NE(world.server(), nullptr);
  auto good = world.client();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->set_string("before", "1").ok());

  struct Case {
    const char* what;
    Bytes bytes;
    bool send_hello_first;
    const char* expect;
  };
  const Case cases[] = {
      {"oversized length", {0xff, 0xff, 0xff, 0xff, 1, 2, 3}, true, "exceeds the limit"},
      {"garbage op", raw_frame({77, 1, 2}), true, "unknown op"},
      {"truncated field", raw_frame({2, 9, 0, 0, 0, 'a'}), true, "past the end"},
      {"no hello", raw_frame({2, 1, 0, 0, 0, 'a', 0, 0, 0, 0}), false, "first frame must be hello"},
      {"wrong magic", raw_frame({1, 'H', 'T', 'T', 'P', 1, 0}), false, "bad magic"},
      {"wrong version", raw_frame({1, 0x54, 0x54, 0x53, 0x54, 9, 0}), false, "version 9"},
      {"http request", Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P'}, false, "exceeds the limit"},
  };
  std::size_t expected_errors = 0;
  for (const Case& c : cases) {
    RawClient raw(world.server()->port());
    ASSERT_GE(raw.fd(), 0);
    if (c.send_hello_first) {
      ASSERT_TRUE(raw.send(hello_frame()));
      ASSERT_TRUE(raw.response(w::Op::hello).ok()) << c.what;
    }
    ASSERT_TRUE(raw.send(c.bytes)) << c.what;
    Result<w::Response> r = raw.response(w::Op::hello);
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status().to_string();
    EXPECT_EQ(r->code, StatusCode::protocol_error) << c.what;
    EXPECT_NE(r->message.find(c.expect), std::string::npos) << c.what << ": " << r->message;
    EXPECT_TRUE(raw.closed_by_peer()) << c.what;
    ++expected_errors;
    // The server keeps serving the well-behaved client.
    ASSERT_TRUE(good->set_string(std::string("after/") + c.what, "ok").ok()) << c.what;
    Result<std::string> v = good->get_string("before", 1s);
    ASSERT_TRUE(v.ok()) << c.what;
  }
  EXPECT_EQ(world.server()->protocol_errors(), expected_errors);
}

TEST(TcpStoreServer, ClientThatVanishesMidWaitDoesNotDisturbOthers) {
  testing::TcpWorld world;
  {
    RawClient raw(world.server()->port());
    ASSERT_TRUE(raw.send(hello_frame()));
    ASSERT_TRUE(raw.response(w::Op::hello).ok());
    ASSERT_EQ(raw_authenticate(raw, std::nullopt), "");
    w::Request wait;
    wait.op = w::Op::wait;
    wait.timeout_ms = 60'000;
    wait.keys = {"never"};
    ASSERT_TRUE(raw.send(w::encode_request(wait)));
    // Half a frame, then the connection closes.
    Bytes half = w::encode_request(wait);
    half.resize(half.size() / 2);
    ASSERT_TRUE(raw.send(half));
  }
  auto c = world.client();
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->set_string("never", "now").ok());
  EXPECT_EQ(*c->get_string("never", 1s), "now");
  EXPECT_EQ(world.server()->protocol_errors(), 0u);
}

TEST(TcpStoreServer, StopMakesBlockedClientsFailWithConnectionLost) {
  testing::TcpWorld world;
  auto c = world.client();
  ASSERT_NE(c, nullptr);
  Status result;
  std::thread waiter([&] { result = c->wait({"never"}, 60s); });
  std::this_thread::sleep_for(20ms);  // let the wait reach the server (either order is fine)
  world.server()->stop();
  waiter.join();
  EXPECT_EQ(result.code(), StatusCode::connection_lost) << result.to_string();
  // The connection stays failed; later calls say so instead of hanging.
  EXPECT_EQ(c->set_string("x", "y").code(), StatusCode::connection_lost);
  // New clients cannot connect any more: a timeout naming the address.
  TcpStoreOptions options;
  options.connect_timeout = 30ms;
  auto late = TcpStore::connect("127.0.0.1", world.server()->port(), options);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::timeout);
  EXPECT_NE(late.status().message().find(std::to_string(world.server()->port())), std::string::npos);
}

TEST(TcpStoreServer, ConnectRetriesUntilTheServerStarts) {
  // Reserve a free port, release it, start the client first and the server shortly after.
  auto probe = TcpStoreServer::start();
  ASSERT_TRUE(probe.ok());
  const std::uint16_t port = (*probe)->port();
  probe->reset();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(50ms);
    TcpStoreServerOptions o;
    o.port = port;
    auto s = TcpStoreServer::start(o);
    if (s.ok()) server = std::move(*s);
  });
  TcpStoreOptions options;
  options.connect_timeout = 20s;
  auto c = TcpStore::connect("127.0.0.1", port, options);
  starter.join();
  if (server == nullptr) GTEST_SKIP() << "port " << port << " was taken by someone else meanwhile";
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE((*c)->set_string("k", "v").ok());
}

TEST(TcpStoreServer, BadListenAddressIsUnavailable) {
  TcpStoreServerOptions o;
  o.host = "256.1.1.1";
  auto s = TcpStoreServer::start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::unavailable);
  EXPECT_NE(s.status().message().find("256.1.1.1"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace tictac::bootstrap

// ---------------------------------------------------------------------------------------------
// Authentication (TICTAC_AUTH_TOKEN): nobody reads or writes a key without passing the handshake.

namespace tictac::bootstrap {
namespace {

const std::string kToken = "store-test-token-0123456789abcdef";

std::unique_ptr<TcpStoreServer> server_with(std::optional<std::string> token,
                                            std::chrono::milliseconds handshake_timeout = 10s) {
  TcpStoreServerOptions o;
  o.auth_token = std::move(token);
  o.handshake_timeout = handshake_timeout;
  auto s = TcpStoreServer::start(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

Result<std::unique_ptr<TcpStore>> client_with(const TcpStoreServer& server, std::optional<std::string> token) {
  TcpStoreOptions o;
  o.connect_timeout = 5s;
  o.io_timeout = 5s;
  o.auth_token = std::move(token);
  return TcpStore::connect("127.0.0.1", server.port(), o);
}

TEST(TcpStoreAuth, SameTokenOnBothSidesWorks) {
  auto server = server_with(kToken);
  ASSERT_NE(server, nullptr);
  auto c = client_with(*server, kToken);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE((*c)->set_string("k", "v").ok());
  EXPECT_EQ(*(*c)->get_string("k", 1s), "v");
  EXPECT_EQ(server->auth_failures(), 0u);
}

TEST(TcpStoreAuth, MissingOrWrongTokenIsRefusedNamingTheCause) {
  auto server = server_with(kToken);
  ASSERT_NE(server, nullptr);
  auto none = client_with(*server, std::string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::protocol_error);
  EXPECT_NE(none.status().message().find("token"), std::string::npos) << none.status().to_string();
  auto wrong = client_with(*server, std::string("another-token-0123456789abcdef"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("TICTAC_AUTH_TOKEN"), std::string::npos) << wrong.status().to_string();
  // The server counts the second refusal when the client's refusal reaches it (asynchronously).
  for (int i = 0; i < 200 && server->auth_failures() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server->auth_failures(), 2u);
  // A token on the client only is refused as well.
  auto open_server = server_with(std::string());
  ASSERT_NE(open_server, nullptr);
  auto extra = client_with(*open_server, kToken);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("token on one side only"), std::string::npos) << extra.status().to_string();
}

TEST(TcpStoreAuth, TooShortTokenIsAnInvalidArgument) {
  TcpStoreServerOptions o;
  o.auth_token = "short";
  auto s = TcpStoreServer::start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
}

// A raw client that skips the auth step cannot set a key; the counter-check (the same raw client
// doing the auth step) can, so it is the step that blocks it.
TEST(TcpStoreAuth, SkippingTheAuthStepWritesNothing) {
  auto server = server_with(std::string());  // even without a token the step is mandatory
  ASSERT_NE(server, nullptr);
  w::Request set;
  set.op = w::Op::set;
  set.key = "sneaky";
  set.value = {1, 2, 3};
  {
    RawClient raw(server->port());
    ASSERT_TRUE(raw.send(hello_frame()));
    ASSERT_TRUE(raw.response(w::Op::hello).ok());
    ASSERT_TRUE(raw.send(w::encode_request(set)));
    Result<w::Response> r = raw.response(w::Op::set);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->code, StatusCode::protocol_error);
    EXPECT_NE(r->message.find("before authentication"), std::string::npos) << r->message;
    EXPECT_TRUE(raw.closed_by_peer());
  }
  auto reader = client_with(*server, std::string());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->get_string("sneaky", 50ms).status().code(), StatusCode::timeout);
  {
    RawClient raw(server->port());
    ASSERT_TRUE(raw.send(hello_frame()));
    ASSERT_TRUE(raw.response(w::Op::hello).ok());
    ASSERT_EQ(raw_authenticate(raw, std::nullopt), "");
    ASSERT_TRUE(raw.send(w::encode_request(set)));
    Result<w::Response> r = raw.response(w::Op::set);
    ASSERT_TRUE(r.ok() && r->code == StatusCode::ok);
  }
  EXPECT_TRUE((*reader)->get_string("sneaky", 1s).ok());
}

TEST(TcpStoreAuth, LargeFrameBeforeAuthenticationIsRefused) {
  auto server = server_with(kToken);
  ASSERT_NE(server, nullptr);
  RawClient raw(server->port());
  ASSERT_TRUE(raw.send(hello_frame()));
  ASSERT_TRUE(raw.response(w::Op::hello).ok());
  w::Request set;
  set.op = w::Op::set;
  set.key = "big";
  set.value.assign(64 * 1024, 7);  // a legal size once authenticated
  ASSERT_TRUE(raw.send(w::encode_request(set)));
  Result<w::Response> r = raw.response(w::Op::set);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->code, StatusCode::protocol_error);
  EXPECT_NE(r->message.find("before authentication"), std::string::npos) << r->message;
}

TEST(TcpStoreAuth, SilentClientIsDroppedAfterTheHandshakeTimeout) {
  auto server = server_with(kToken, 150ms);
  ASSERT_NE(server, nullptr);
  RawClient raw(server->port());
  ASSERT_GE(raw.fd(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(server->auth_failures(), 1u);
}

}  // namespace
}  // namespace tictac::bootstrap
