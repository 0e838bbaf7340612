// Failure semantics with real processes (gloo's multiproc pattern): peers are forked children
// that are killed or stopped, or that speak raw, malformed TCP. Addresses travel over pipes.
// Every wait is bounded; nothing asserts on durations.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/multiproc/raw_peer.h"

namespace tictac::transport::testing {
namespace {

// Waits (bounded) until the child stopped itself.
bool wait_stopped(pid_t pid) {
  const auto deadline = Clock::now() + kWait;
  while (Clock::now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WUNTRACED | WNOHANG);
    if (r == pid && WIFSTOPPED(status)) return true;
    if (r == pid) return false;  // exited instead
    usleep(1000);
  }
  return false;
}

void reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Child: listens, tells the parent its address, accepts, posts a receive for a large message,
// then stops itself (SIGSTOP) so that the parent's transfer is stuck mid-way.
[[noreturn]] void victim(int to_parent, std::size_t bytes) {
  auto ctx = tcp_context("victim", fast_timeout_config(std::chrono::seconds(30)));
  if (!ctx) _exit(10);
  Result<std::string> addr = ctx->listen("tcp://127.0.0.1:0");
  if (!addr.ok()) _exit(11);
  write_line(to_parent, *addr);
  Result<PeerId> peer = ctx->accept(std::chrono::seconds(30));
  if (!peer.ok()) _exit(12);
  std::vector<std::byte> buf(bytes);
  MemoryRegion region = MemoryRegion::host(buf.data(), buf.size()).value();
  ctx->recv(*peer, 1, region, 0, bytes, nullptr);
  if (!ctx->peer_name(*peer).ok()) _exit(13);
  write_line(to_parent, "ready");
  raise(SIGSTOP);
  _exit(0);  // not reached: the parent kills us
}

struct Victim {
  pid_t pid = -1;
  int from_child = -1;  // the child's "ready" arrives here after we connected
  std::string address;
};

Victim start_victim(std::size_t bytes) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    victim(fds[1], bytes);
  }
  close(fds[1]);
  Victim v;
  v.pid = pid;
  v.from_child = fds[0];
  v.address = read_line(fds[0]);
  return v;
}

// Connects to the victim and waits until it posted its receive and stopped itself.
Result<PeerId> connect_to_stopped_victim(Context& ctx, Victim& v) {
  Result<PeerId> peer = ctx.connect(v.address);
  if (!peer.ok()) return peer;
  const std::string ready = read_line(v.from_child);
  close(v.from_child);
  if (ready != "ready") return internal_error("victim did not get ready: '" + ready + "'");
  if (!wait_stopped(v.pid)) return internal_error("victim did not stop");
  return peer;
}

TEST(Multiproc, KilledPeerMidTransferIsConnectionLostOnTheSurvivor) {
  const std::size_t bytes = 64 << 20;  // far more than the socket buffers hold
  Victim v = start_victim(bytes);
  ASSERT_FALSE(v.address.empty());
  const pid_t pid = v.pid;
  auto ctx = tcp_context("survivor", fast_timeout_config(std::chrono::seconds(2)));
  ASSERT_TRUE(ctx);
  Result<PeerId> peer = connect_to_stopped_victim(*ctx, v);
  ASSERT_TRUE(peer.ok()) << peer.status().to_string();

  Buffer src(bytes, 1, true), dst(100);
  Recorder rec;
  ctx->send(*peer, 1, src.region, 0, bytes, 0, rec.make("send"));  // stalls: the peer is stopped
  ctx->recv(*peer, 2, dst.region, 0, 100, rec.make("recv"));        // never satisfied
  ASSERT_TRUE(ctx->peer_name(*peer).ok());
  ASSERT_EQ(rec.count(), 0u);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(rec.wait(2));
  for (const Completion& c : rec.all()) {
    EXPECT_EQ(c.status.code(), StatusCode::connection_lost) << c.label << ": " << c.status.to_string();
    EXPECT_NE(c.status.message().find("victim"), std::string::npos) << c.status.message();
  }
  // Later requests on the dead peer fail the same way; the context itself is fine.
  ctx->send(*peer, 3, src.region, 0, 10, 0, rec.make("later"));
  ASSERT_TRUE(rec.wait(3));
  EXPECT_EQ(rec.find("later").status.code(), StatusCode::connection_lost);
}

TEST(Multiproc, SilentPeerIsDeclaredDeadWithinTheTimeout) {
  Victim v = start_victim(1 << 20);
  ASSERT_FALSE(v.address.empty());
  auto ctx = tcp_context("watcher", fast_timeout_config(std::chrono::milliseconds(600)));
  ASSERT_TRUE(ctx);
  Result<PeerId> peer = connect_to_stopped_victim(*ctx, v);
  ASSERT_TRUE(peer.ok()) << peer.status().to_string();
  Buffer dst(100);
  Recorder rec;
  ctx->recv(*peer, 2, dst.region, 0, 100, rec.make("recv"));
  ASSERT_TRUE(rec.wait(1));  // bounded; the heartbeat watchdog fires after ~600 ms of silence
  const Completion c = rec.find("recv");
  EXPECT_EQ(c.status.code(), StatusCode::connection_lost) << c.status.to_string();
  EXPECT_NE(c.status.message().find("no frame from the peer"), std::string::npos) << c.status.message();
  EXPECT_NE(c.status.message().find("victim"), std::string::npos) << c.status.message();
  reap(v.pid);
}

// ---------------------------------------------------------------------------------------------
// Malformed frames from a raw socket

wire::Header announce(std::uint64_t id, Tag tag, std::uint64_t total, bool eager) {
  wire::Header h;
  h.type = wire::FrameType::announce;
  h.msg_id = id;
  h.tag = tag;
  h.total = total;
  h.flags = eager ? wire::kFlagEager : 0;
  return h;
}

wire::Header data(std::uint64_t id, Tag tag, std::uint64_t offset, std::uint32_t length, std::uint64_t total) {
  wire::Header h;
  h.type = wire::FrameType::data;
  h.msg_id = id;
  h.tag = tag;
  h.offset = offset;
  h.length = length;
  h.total = total;
  return h;
}

// Child: connects, writes `bytes`, optionally half-closes at once, then waits (bounded) for the
// server to close the connection. Exit 0 = behaved as expected. Uses only raw syscalls (the parent has
// threads, so the child must not touch locks).
[[noreturn]] void raw_client(std::uint16_t port, const std::vector<std::byte>& bytes, bool close_at_once) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(20);
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) _exit(21);
    off += static_cast<std::size_t>(n);
  }
  // Half-close (FIN, not a reset from unread data): the server sees EOF right after our bytes.
  if (close_at_once) shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 600; ++i) {  // at most ~60 s
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, sink, sizeof sink, 0);
    if (n <= 0) _exit(0);  // the server closed the connection: as expected
  }
  _exit(22);
}

struct BadFrameCase {
  std::string name;
  std::vector<std::byte> after_hello;
  bool close_at_once;
  StatusCode code;
  std::string expect;
};

std::vector<BadFrameCase> bad_frame_cases() {
  std::vector<BadFrameCase> cases;
  auto add = [&](std::string name, std::vector<std::byte> bytes, StatusCode code, std::string expect,
                 bool close_at_once = false) {
    cases.push_back(BadFrameCase{std::move(name), std::move(bytes), close_at_once, code, std::move(expect)});
  };
  {
    wire::Header h = announce(1, 6, 10, true);
    h.magic = 0xdeadbeef;
    add("bad magic", frame(h), StatusCode::protocol_error, "bad magic");
  }
  {
    wire::Header h = announce(1, 6, 10, true);
    h.version = 9;
    add("bad version", frame(h), StatusCode::protocol_error, "unsupported wire version 9");
  }
  {
    std::vector<std::byte> b = frame(announce(1, 6, 10, true));
    b[6] = std::byte{99};
    add("unknown type", b, StatusCode::protocol_error,
        "unknown frame type 99");
  }
  {
    std::vector<std::byte> payload(10);
    add("data for an unknown message", frame(data(7, 6, 0, 10, 10), payload), StatusCode::protocol_error,
        "unknown message 7");
  }
  {
    std::vector<std::byte> out = frame(announce(1, 6, 1000, false));
    std::vector<std::byte> payload(10);
    append(out, frame(data(1, 6, 0, 10, 1000), payload));
    add("data before READY", out, StatusCode::protocol_error, "before READY");
  }
  {
    std::vector<std::byte> out = frame(announce(1, 6, 100, true));
    std::vector<std::byte> payload(10);
    append(out, frame(data(1, 6, 50, 10, 100), payload));
    add("offset out of range", out, StatusCode::protocol_error, "offset 50 out of range");
  }
  {
    std::vector<std::byte> out = frame(announce(1, 6, 100, true));
    append(out, frame(data(1, 6, 0, 200, 100)));
    add("length beyond the message", out, StatusCode::protocol_error, "out of range");
  }
  {
    std::vector<std::byte> out = frame(announce(1, 6, 100, true));
    append(out, frame(data(1, 6, 0, 50, 200)));
    add("data disagrees with its announce", out, StatusCode::protocol_error, "disagrees");
  }
  add("eager beyond the credit", frame(announce(1, 6, std::uint64_t{1} << 30, true)), StatusCode::protocol_error,
      "exceeds");
  {
    std::vector<std::byte> out = frame(announce(5, 6, 10, false));
    append(out, frame(announce(5, 6, 10, false)));
    add("message id reused", out, StatusCode::protocol_error, "not newer");
  }
  add("second HELLO", hello_frame("again"), StatusCode::protocol_error, "second HELLO");
  add("AUTH after the handshake", auth_frame(auth_hello(auth::Role::initiator, false)),
      StatusCode::protocol_error, "AUTH frame after the handshake");
  {
    wire::Header h;
    h.type = wire::FrameType::credit;
    h.total = std::uint64_t{1} << 40;
    add("credit beyond the pool", frame(h), StatusCode::protocol_error, "CREDIT");
  }
  {
    wire::Header h;
    h.type = wire::FrameType::ready;
    h.msg_id = 1000;
    add("READY for a message never sent", frame(h), StatusCode::protocol_error, "unknown message 1000");
  }
  {
    std::vector<std::byte> b = frame(announce(1, 6, 10, true));
    b.resize(20);
    add("truncated header, then EOF", b,
        StatusCode::connection_lost, "truncated frame", /*close_at_once=*/true);
  }
  {
    std::vector<std::byte> out = frame(announce(1, 6, 100, true));
    append(out, frame(data(1, 6, 0, 100, 100)));
    out.resize(out.size() - 100 + 30);  // 30 of the 100 payload bytes
    add("truncated payload, then EOF", out, StatusCode::connection_lost, "truncated frame", true);
  }
  return cases;
}

TEST(Multiproc, MalformedFramesFromARawSocketAreProtocolErrorsAndHarmNothing) {
  auto server = tcp_context("server", small_config());
  ASSERT_TRUE(server);
  Result<std::string> addr = server->listen("tcp://127.0.0.1:0");
  ASSERT_TRUE(addr.ok());
  const std::uint16_t port = port_of(*addr);
  int index = 0;
  for (const BadFrameCase& c : bad_frame_cases()) {
    std::vector<std::byte> bytes = unauthenticated_opening(L("raw-", index++));
    append(bytes, c.after_hello);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) raw_client(port, bytes, c.close_at_once);
    Result<PeerId> peer = server->accept(std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
    ASSERT_TRUE(peer.ok()) << c.name << ": " << peer.status().to_string();
    Buffer dst(1024);
    Recorder rec;
    server->recv(*peer, 5, dst.region, 0, 1024, rec.make("recv"));
    ASSERT_TRUE(rec.wait(1)) << c.name;
    const Completion r = rec.find("recv");
    EXPECT_EQ(r.status.code(), c.code) << c.name << ": " << r.status.to_string();
    EXPECT_NE(r.status.message().find(c.expect), std::string::npos) << c.name << ": " << r.status.message();
    EXPECT_NE(r.status.message().find("raw-"), std::string::npos) << c.name << ": " << r.status.message();
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << c.name << ": raw client status " << status;
  }
  // Garbage instead of the handshake: refused during the handshake, never handed out by
  // accept() (tests/multiproc/auth_multiproc_test.cc covers the AUTH messages themselves).
  const std::vector<std::vector<std::byte>> garbage = {
      text_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, 'x')),
      [] {
        std::vector<std::byte> out = auth_frame(auth_hello(auth::Role::initiator, false));
        std::vector<std::byte> h = hello_frame("bad-body");
        h[wire::kHeaderBytes] = std::byte{0};  // body magic
        append(out, h);
        return out;
      }(),
      frame(announce(1, 6, 10, true)),  // data before any handshake
      [] {
        std::vector<std::byte> out = auth_frame(auth_hello(auth::Role::initiator, false));
        append(out, frame(announce(1, 6, 10, true)));  // data before the HELLO
        return out;
      }(),
  };
  for (const auto& bytes : garbage) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) raw_client(port, bytes, false);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "raw client status " << status;
  }
  EXPECT_EQ(server->accept(std::chrono::milliseconds(50)).status().code(), StatusCode::timeout);

  // The server is unharmed: a real peer connects and moves data.
  auto client = tcp_context("client", small_config());
  ASSERT_TRUE(client);
  Result<PeerId> cp = client->connect(*addr);
  ASSERT_TRUE(cp.ok()) << cp.status().to_string();
  Result<PeerId> sp = server->accept(std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
  ASSERT_TRUE(sp.ok());
  Buffer src(1 << 20, 3, true), dst(1 << 20);
  Recorder rec;
  server->recv(*sp, 1, dst.region, 0, dst.bytes.size(), rec.make("recv"));
  client->send(*cp, 1, src.region, 0, src.bytes.size(), 0, rec.make("send"));
  ASSERT_TRUE(rec.wait(2));
  EXPECT_TRUE(rec.find("recv").status.ok());
  EXPECT_TRUE(same_bytes(dst.bytes.data(), dst.bytes.size(), 3));
}

}  // namespace
}  // namespace tictac::transport::testing
