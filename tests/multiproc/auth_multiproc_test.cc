// Authentication in the connection handshake, with real processes and raw sockets: a forked
// server Context (forked before this process creates any Context of its own, so the child starts
// single-threaded) serves clients from this process; raw peers on the test thread send garbage
// in place of the AUTH messages. Refusals are observed on both sides: the connecting side's
// Status, the bytes the refusing side sent back, the refusing side's log, and accept() never
// returning the refused peer. Every wait is bounded; nothing asserts on durations.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "tests/multiproc/raw_peer.h"

namespace tictac::transport::testing {
namespace {

// The raw bytes a peer answered, printable: a gtest message with control bytes makes the junit XML
// unparsable for meson (which then crashes and loses the whole run's results).
std::string printable(const std::string& raw) {
  std::string out = "'";
  for (unsigned char ch : raw) {
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out + "' (" + std::to_string(raw.size()) + " bytes)";
}

// A protocol version this build does not speak (the next one).
constexpr std::uint16_t kOtherVersion = wire::kVersion + 1;

const std::string kToken = "multiproc-test-token-0123456789abcdef";
const std::string kOtherToken = "a-different-token-0123456789abcdefgh";
constexpr std::size_t kBig = 3 << 20;  // rendezvous, many chunks
constexpr std::size_t kSmall = 1000;   // eager

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Client half of the exchange: 3 MiB and 1000 bytes out, 3 MiB back; every byte checked.
::testing::AssertionResult exchange_as_client(Context& ctx, PeerId peer) {
  Buffer big(kBig, 11, true), small(kSmall, 12, true), back(kBig);
  Recorder rec;
  ctx.recv(peer, 3, back.region, 0, kBig, rec.make("back"));
  ctx.send(peer, 1, big.region, 0, kBig, 0, rec.make("big"));
  ctx.send(peer, 2, small.region, 0, kSmall, 0, rec.make("small"));
  if (!rec.wait(3)) return ::testing::AssertionFailure() << "the exchange did not finish";
  for (const Completion& c : rec.all()) {
    if (!c.status.ok()) return ::testing::AssertionFailure() << c.label << ": " << c.status.to_string();
  }
  if (rec.find("back").bytes != kBig || !same_bytes(back.bytes.data(), kBig, 13)) {
    return ::testing::AssertionFailure() << "the reply is not byte-exact";
  }
  return ::testing::AssertionSuccess();
}

// Server half; in the child.
bool serve(Context& ctx, PeerId peer) {
  Buffer big(kBig), small(kSmall), reply(kBig, 13, true);
  Recorder rec;
  ctx.recv(peer, 1, big.region, 0, kBig, rec.make("big"));
  ctx.recv(peer, 2, small.region, 0, kSmall, rec.make("small"));
  if (!rec.wait(2) || !rec.find("big").status.ok() || !rec.find("small").status.ok()) return false;
  if (!same_bytes(big.bytes.data(), kBig, 11) || !same_bytes(small.bytes.data(), kSmall, 12)) return false;
  ctx.send(peer, 3, reply.region, 0, kBig, 0, rec.make("reply"));
  return rec.wait(3) && rec.find("reply").status.ok();
}

// Child: logs (at debug) to `log_fd`, listens with `token` ("" = none), reports its address,
// serves `clients` peers in turn ("served <name>" each). When the parent writes "check", it
// reports whether any further peer reached accept() ("idle" or "unexpected <name>") and exits.
[[noreturn]] void server_main(int to_parent, int from_parent, int log_fd, const std::string& token, int clients) {
  dup2(log_fd, 2);
  close(log_fd);
  set_log_level(LogLevel::debug);
  auto ctx = tcp_context("server", small_config(), token);
  if (!ctx) _exit(10);
  Result<std::string> addr = ctx->listen("tcp://127.0.0.1:0");
  if (!addr.ok()) _exit(11);
  write_line(to_parent, *addr);
  for (int i = 0; i < clients; ++i) {
    Result<PeerId> peer = ctx->accept(std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
    if (!peer.ok()) _exit(12);
    Result<std::string> name = ctx->peer_name(*peer);
    if (!name.ok() || !serve(*ctx, *peer)) _exit(13);
    write_line(to_parent, "served " + *name);
  }
  if (read_line(from_parent) != "check") _exit(14);
  Result<PeerId> late = ctx->accept(std::chrono::milliseconds(200));
  if (late.ok()) {
    write_line(to_parent, "unexpected " + ctx->peer_name(*late).value());
  } else {
    write_line(to_parent, late.status().code() == StatusCode::timeout ? "idle" : late.status().to_string());
  }
  ctx.reset();
  _exit(0);
}

struct ServerChild {
  pid_t pid = -1;
  int from_child = -1;
  int to_child = -1;
  std::string address;
  std::string log_path;
};

ServerChild start_server(const std::string& token, int clients) {
  int up[2], down[2];
  EXPECT_EQ(pipe(up), 0);
  EXPECT_EQ(pipe(down), 0);
  char path[] = "/tmp/tictac-server-log-XXXXXX";
  const int log_fd = mkstemp(path);
  EXPECT_GE(log_fd, 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    server_main(up[1], down[0], log_fd, token, clients);
  }
  close(up[1]);
  close(down[0]);
  close(log_fd);
  ServerChild s;
  s.pid = pid;
  s.from_child = up[0];
  s.to_child = down[1];
  s.log_path = path;
  s.address = read_line(s.from_child);
  return s;
}

struct ServerReport {
  std::string last_line;  // "idle" when no refused peer ever reached accept()
  int exit_status = -1;
  std::string log;
};

ServerReport finish_server(ServerChild& s) {
  ServerReport r;
  write_line(s.to_child, "check");
  r.last_line = read_line(s.from_child);
  int status = 0;
  const auto deadline = Clock::now() + kWait;
  pid_t w = 0;
  while ((w = waitpid(s.pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) usleep(1000);
  if (w != s.pid) {
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
  }
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.log = read_file(s.log_path);
  unlink(s.log_path.c_str());
  close(s.from_child);
  close(s.to_child);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Context against Context, in two processes

TEST(AuthMultiproc, RightTokenPassesAndTransfersByteExact) {
  ServerChild s = start_server(kToken, 1);
  ASSERT_FALSE(s.address.empty());
  {
    auto client = tcp_context("client", small_config(), kToken);
    ASSERT_TRUE(client);
    Result<PeerId> peer = client->connect(s.address);
    ASSERT_TRUE(peer.ok()) << peer.status().to_string();
    EXPECT_EQ(client->peer_name(*peer).value(), "server");
    EXPECT_TRUE(exchange_as_client(*client, *peer));
    EXPECT_EQ(read_line(s.from_child), "served client");
  }
  const ServerReport r = finish_server(s);
  EXPECT_EQ(r.last_line, "idle");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_TRUE(contains(r.log, "(mutually authenticated)")) << r.log;
  EXPECT_FALSE(contains(r.log, "refused")) << r.log;
}

TEST(AuthMultiproc, WrongTokenIsRefusedOnBothSidesAndTheServerKeepsServing) {
  ServerChild s = start_server(kToken, 1);
  ASSERT_FALSE(s.address.empty());
  const std::string server_port = ":" + std::to_string(port_of(s.address));
  {
    // A Context with another token: it checks the server's proof first and refuses it.
    auto intruder = tcp_context("intruder", small_config(), kOtherToken);
    ASSERT_TRUE(intruder);
    Result<PeerId> peer = intruder->connect(s.address);
    ASSERT_FALSE(peer.ok());
    const Status& st = peer.status();
    EXPECT_EQ(st.code(), StatusCode::protocol_error) << st.to_string();
    EXPECT_TRUE(contains(st.message(), "refused in the handshake (bad_proof)")) << st.message();
    EXPECT_TRUE(contains(st.message(), "authentication failed")) << st.message();
    EXPECT_TRUE(contains(st.message(), "127.0.0.1" + server_port)) << st.message();
  }
  {
    // A raw peer that claims a token and sends a made-up proof without checking the server's:
    // the server refuses it, sending the reason before it closes.
    const int fd = raw_connect(port_of(s.address));
    ASSERT_GE(fd, 0);
    std::vector<std::byte> bytes = auth_frame(auth_hello(auth::Role::initiator, true));
    append(bytes, auth_frame(auth::encode_proof(wire::kVersion, auth::Mac{})));
    ASSERT_TRUE(write_all(fd, bytes));
    const RawOutcome out = read_until_closed(fd);
    close(fd);
    EXPECT_TRUE(out.closed_by_peer);
    EXPECT_TRUE(contains(out.received, "authentication failed: the initiator's proof does not match"))
        << out.received;
  }
  {
    auto good = tcp_context("good", small_config(), kToken);
    ASSERT_TRUE(good);
    Result<PeerId> peer = good->connect(s.address);
    ASSERT_TRUE(peer.ok()) << peer.status().to_string();
    EXPECT_TRUE(exchange_as_client(*good, *peer));
    // The first (and only) peer the server's accept() ever returned is the good one.
    EXPECT_EQ(read_line(s.from_child), "served good");
  }
  const ServerReport r = finish_server(s);
  EXPECT_EQ(r.last_line, "idle");
  EXPECT_EQ(r.exit_status, 0);
  // The server logged both refusals with their reasons.
  EXPECT_TRUE(contains(r.log, "refused in the handshake (refused_by_peer): the peer refused the handshake: "
                              "authentication failed: the acceptor's proof does not match"))
      << r.log;
  EXPECT_TRUE(contains(r.log, "refused in the handshake (bad_proof): authentication failed")) << r.log;
  EXPECT_FALSE(contains(r.log, "intruder")) << "an unauthenticated peer's name reached the log:\n" << r.log;
}

TEST(AuthMultiproc, TokenOnOneSideOnlyIsRefusedSayingWhichSideLacksIt) {
  {
    ServerChild s = start_server(kToken, 0);
    ASSERT_FALSE(s.address.empty());
    {
      auto client = tcp_context("tokenless", small_config(), "");
      ASSERT_TRUE(client);
      Result<PeerId> peer = client->connect(s.address);
      ASSERT_FALSE(peer.ok());
      EXPECT_EQ(peer.status().code(), StatusCode::protocol_error);
      EXPECT_TRUE(contains(peer.status().message(), "auth token on one side only: the acceptor has a token, "
                                                    "the initiator has none"))
          << peer.status().message();
    }
    const ServerReport r = finish_server(s);
    EXPECT_EQ(r.last_line, "idle");
    EXPECT_EQ(r.exit_status, 0);
    EXPECT_TRUE(contains(r.log, "refused in the handshake (token_missing_on_peer)")) << r.log;
  }
  {
    ServerChild s = start_server("", 0);
    ASSERT_FALSE(s.address.empty());
    {
      auto client = tcp_context("with-token", small_config(), kToken);
      ASSERT_TRUE(client);
      Result<PeerId> peer = client->connect(s.address);
      ASSERT_FALSE(peer.ok());
      EXPECT_EQ(peer.status().code(), StatusCode::protocol_error);
      EXPECT_TRUE(contains(peer.status().message(), "auth token on one side only: the initiator has a token, "
                                                    "the acceptor has none"))
          << peer.status().message();
    }
    const ServerReport r = finish_server(s);
    EXPECT_EQ(r.last_line, "idle");
    EXPECT_EQ(r.exit_status, 0);
    EXPECT_TRUE(contains(r.log, "refused in the handshake (token_missing_here)")) << r.log;
  }
}

TEST(AuthMultiproc, NoTokenOnEitherSideWorksUnauthenticated) {
  ServerChild s = start_server("", 1);
  ASSERT_FALSE(s.address.empty());
  {
    auto client = tcp_context("plain", small_config(), "");
    ASSERT_TRUE(client);
    Result<PeerId> peer = client->connect(s.address);
    ASSERT_TRUE(peer.ok()) << peer.status().to_string();
    EXPECT_TRUE(exchange_as_client(*client, *peer));
    EXPECT_EQ(read_line(s.from_child), "served plain");
  }
  const ServerReport r = finish_server(s);
  EXPECT_EQ(r.last_line, "idle");
  EXPECT_TRUE(contains(r.log, "not authenticated")) << r.log;
}

// ---------------------------------------------------------------------------------------------
// Garbage in place of the AUTH messages

struct GarbageCase {
  std::string name;
  std::vector<std::byte> bytes;
  bool half_close = false;
  std::string reply;  // the refusal the server must send back ("" = it cannot: just closes)
  std::string log;    // what the server must log ("" = nothing at warn)
};

std::vector<GarbageCase> garbage_cases(bool server_has_token) {
  std::vector<GarbageCase> cases;
  auto add = [&](std::string name, std::vector<std::byte> bytes, std::string reply, std::string log,
                 bool half_close = false) {
    cases.push_back(GarbageCase{std::move(name), std::move(bytes), half_close, std::move(reply), std::move(log)});
  };
  const auth::Bytes junk(64, 'Z');
  add("not a frame at all", text_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, 'x')), "",
      "bad magic");
  add("garbage in an AUTH frame", auth_frame(junk), "malformed handshake message: bad magic",
      "refused in the handshake (malformed): malformed handshake message: bad magic");
  {
    auth::Bytes half = auth_hello(auth::Role::initiator, server_has_token);
    half.resize(8);  // a hello header cut short, completed by junk in the next frame
    std::vector<std::byte> out = auth_frame(half);
    append(out, auth_frame(junk));
    add("a message completed with junk", out, "malformed", "refused in the handshake (malformed)");
  }
  add("another protocol version", auth_frame(auth_hello(auth::Role::initiator, server_has_token, kOtherVersion)),
      "protocol version mismatch: the initiator speaks version " + std::to_string(kOtherVersion) +
          ", the acceptor speaks version " + std::to_string(wire::kVersion),
      "refused in the handshake (version_mismatch): the peer speaks TicTac protocol version " +
          std::to_string(kOtherVersion) + ", this side speaks version " + std::to_string(wire::kVersion));
  add("the acceptor's role claimed", auth_frame(auth_hello(auth::Role::acceptor, server_has_token)),
      "both sides claim the acceptor role", "refused in the handshake (malformed)");
  add("HELLO instead of AUTH", hello_frame("impostor"), "", "HELLO before the authentication handshake finished");
  {
    wire::Header h;
    h.version = wire::kHandshakeFrameVersion;
    h.type = wire::FrameType::auth;
    h.length = wire::kMaxAuthBytes + 1;
    add("an oversized AUTH frame", frame(h), "", "AUTH payload of 1025 bytes");
  }
  {
    auth::Bytes more = auth_hello(auth::Role::initiator, server_has_token);
    const std::string tail = "trailing-garbage-bytes";
    more.insert(more.end(), tail.begin(), tail.end());
    if (server_has_token) {  // the tail is read as the next message: not one
      add("junk after the hello", auth_frame(more), "malformed handshake message: bad magic",
          "refused in the handshake (malformed)");
    } else {  // the handshake is over after the hello: the tail breaks the protocol
      add("junk after the end of the handshake", auth_frame(more), "",
          "bytes after the end of the authentication handshake");
    }
  }
  {
    std::vector<std::byte> cut = auth_frame(auth_hello(auth::Role::initiator, server_has_token));
    cut.resize(wire::kHeaderBytes + 10);
    add("an AUTH frame cut short by EOF", cut, "", "", /*half_close=*/true);
  }
  return cases;
}

TEST(AuthMultiproc, GarbageInPlaceOfTheAuthMessagesIsRefusedAndHarmsNothing) {
  for (const std::string& token : {kToken, std::string()}) {
    const std::string label = token.empty() ? "server without token: " : "server with token: ";
    StderrCapture capture;  // the server's warnings
    auto server = tcp_context("server", small_config(), token);
    ASSERT_TRUE(server);
    Result<std::string> addr = server->listen("tcp://127.0.0.1:0");
    ASSERT_TRUE(addr.ok());
    const std::vector<GarbageCase> cases = garbage_cases(!token.empty());
    for (const GarbageCase& c : cases) {
      const int fd = raw_connect(port_of(*addr));
      ASSERT_GE(fd, 0) << label << c.name;
      ASSERT_TRUE(write_all(fd, c.bytes)) << label << c.name;
      if (c.half_close) shutdown(fd, SHUT_WR);
      const RawOutcome out = read_until_closed(fd);
      close(fd);
      EXPECT_TRUE(out.closed_by_peer) << label << c.name << ": the server did not close the connection";
      if (!c.reply.empty()) {
        EXPECT_TRUE(contains(out.received, c.reply)) << label << c.name << ": got " << printable(out.received);
      }
    }
    // None of them ever reached accept() ...
    EXPECT_EQ(server->accept(std::chrono::milliseconds(50)).status().code(), StatusCode::timeout) << label;
    // ... and the server is unharmed: a proper peer connects and moves data.
    auto client = tcp_context("client", small_config(), token);
    ASSERT_TRUE(client);
    Result<PeerId> cp = client->connect(*addr);
    ASSERT_TRUE(cp.ok()) << label << cp.status().to_string();
    Result<PeerId> sp = server->accept(std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
    ASSERT_TRUE(sp.ok()) << label << sp.status().to_string();
    EXPECT_EQ(server->peer_name(*sp).value(), "client");
    Buffer src(1 << 20, 3, true), dst(1 << 20);
    Recorder rec;
    server->recv(*sp, 1, dst.region, 0, dst.bytes.size(), rec.make("recv"));
    client->send(*cp, 1, src.region, 0, src.bytes.size(), 0, rec.make("send"));
    ASSERT_TRUE(rec.wait(2)) << label;
    EXPECT_TRUE(rec.find("recv").status.ok()) << label << rec.find("recv").status.to_string();
    EXPECT_TRUE(same_bytes(dst.bytes.data(), dst.bytes.size(), 3)) << label;
    client.reset();
    server.reset();
    // Every refusal was logged as a protocol error with its reason.
    const std::string log = capture.finish();
    for (const GarbageCase& c : cases) {
      if (!c.log.empty()) {
        EXPECT_TRUE(contains(log, c.log)) << label << c.name << ": log was\n" << log;
      }
    }
  }
}

// A raw acceptor answers the client's first AUTH frame with `reply` and records what the client
// sends back until it closes.
struct RawAcceptorCase {
  std::string name;
  std::vector<std::byte> reply;
  std::string status;       // in the connect() Status
  std::string told_server;  // in the bytes the client sent back ("" = nothing expected)
};

TEST(AuthMultiproc, GarbageFromTheAcceptorFailsConnectWithAProtocolError) {
  std::uint16_t port = 0;
  const int listener = raw_listen(&port);
  ASSERT_GE(listener, 0);
  std::vector<std::byte> padded_text = text_bytes("SSH-2.0-OpenSSH_9.2p1\r\n");
  padded_text.resize(wire::kHeaderBytes + 8, std::byte{' '});
  const std::vector<RawAcceptorCase> cases = {
      {"garbage in an AUTH frame", auth_frame(auth::Bytes(64, 'Z')), "malformed handshake message: bad magic",
       "malformed handshake message"},
      {"another protocol version", auth_frame(auth_hello(auth::Role::acceptor, false, kOtherVersion)),
       "the peer speaks TicTac protocol version " + std::to_string(kOtherVersion) + ", this side speaks version " +
           std::to_string(wire::kVersion),
       "protocol version mismatch: the acceptor speaks version " + std::to_string(kOtherVersion) +
           ", the initiator speaks version " + std::to_string(wire::kVersion)},
      {"not a frame at all", padded_text, "bad magic", ""},
      {"HELLO instead of AUTH", hello_frame("impostor"), "HELLO before the authentication handshake finished", ""},
      {"a refusal", auth_frame(auth::encode_result(wire::kVersion, auth::Outcome{false, "go away\x01now"})),
       "refused in the handshake (refused_by_peer): the peer refused the handshake: go away?now", ""},
  };
  auto client = tcp_context("client", small_config(), "");
  ASSERT_TRUE(client);
  const std::string address = "tcp://127.0.0.1:" + std::to_string(port);
  for (const RawAcceptorCase& c : cases) {
    std::string first_frame_type, told;
    std::thread acceptor([&] {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kWait).count())) <= 0) return;
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      const std::vector<std::byte> first = read_frame(fd);
      if (!first.empty()) first_frame_type = std::string(wire::to_string(wire::decode(first)->type));
      if (write_all(fd, c.reply)) told = read_until_closed(fd).received;
      close(fd);
    });
    Result<PeerId> peer = client->connect(address);
    acceptor.join();
    EXPECT_EQ(first_frame_type, "AUTH") << c.name;
    ASSERT_FALSE(peer.ok()) << c.name;
    EXPECT_EQ(peer.status().code(), StatusCode::protocol_error) << c.name << ": " << peer.status().to_string();
    EXPECT_TRUE(contains(peer.status().message(), c.status)) << c.name << ": " << peer.status().message();
    EXPECT_TRUE(contains(peer.status().message(), "127.0.0.1:" + std::to_string(port)))
        << c.name << ": " << peer.status().message();
    if (!c.told_server.empty()) {
      EXPECT_TRUE(contains(told, c.told_server)) << c.name << ": sent '" << told << "'";
    }
  }
  close(listener);
}

TEST(AuthMultiproc, ABadTokenIsRefusedWhenTheContextIsCreated) {
  ContextOptions o;
  o.auth_token = "too-short";
  Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(contains(ctx.status().message(), "ContextOptions::auth_token is 9 bytes")) << ctx.status().message();
}

}  // namespace
}  // namespace tictac::transport::testing
