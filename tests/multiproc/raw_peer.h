// Helpers shared by the multi-process tests: TCP Contexts with an explicit auth token, crafted
// frames and handshake messages, a raw TCP peer driven from the test thread, line I/O over
// pipes, and a capture of this process's stderr (where the transport logs its refusals).
// Every wait is bounded by kWait; nothing asserts on durations. Test code only; not thread-safe
// unless stated.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/conformance/harness.h"
#include "transport/auth/messages.h"
#include "transport/handshake.h"
#include "transport/wire.h"

namespace tictac::transport::testing {

inline TransportConfig fast_timeout_config(std::chrono::milliseconds timeout) {
  TransportConfig c = small_config();
  c.timeout = timeout;
  return c;
}

// A TCP Context; `token` "" = no authentication (whatever TICTAC_AUTH_TOKEN says).
inline std::unique_ptr<Context> tcp_context(const std::string& name, TransportConfig config,
                                            const std::string& token = "") {
  ContextOptions o;
  o.name = name;
  o.config = config;
  o.auth_token = token;
  o.backends.push_back(tcp::create());
  Result<std::unique_ptr<Context>> c = Context::create(std::move(o));
  return c.ok() ? std::move(c).value() : nullptr;
}

inline std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// ---------------------------------------------------------------------------------------------
// Crafted frames

inline std::vector<std::byte> frame(const wire::Header& h, std::span<const std::byte> payload = {}) {
  const wire::HeaderBytes b = wire::encode(h);
  std::vector<std::byte> out(b.size() + payload.size());
  std::memcpy(out.data(), b.data(), b.size());
  if (!payload.empty()) std::memcpy(out.data() + b.size(), payload.data(), payload.size());
  return out;
}

inline void append(std::vector<std::byte>& out, const std::vector<std::byte>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

// One AUTH frame carrying `messages` (handshake bytes, or garbage).
inline std::vector<std::byte> auth_frame(const auth::Bytes& messages) {
  wire::Header h;
  h.version = wire::kHandshakeFrameVersion;
  h.type = wire::FrameType::auth;
  h.length = static_cast<std::uint32_t>(messages.size());
  std::vector<std::byte> payload(messages.size());
  if (!messages.empty()) std::memcpy(payload.data(), messages.data(), messages.size());
  return frame(h, payload);
}

// A handshake hello with a fixed nonce (never equal to a real side's random one).
inline auth::Bytes auth_hello(auth::Role role, bool has_token, std::uint16_t version = wire::kVersion) {
  auth::Hello hello;
  hello.role = role;
  hello.has_token = has_token;
  for (std::size_t i = 0; i < hello.nonce.size(); ++i) hello.nonce[i] = static_cast<std::uint8_t>(0xA0 + i);
  return auth::encode_hello(version, hello);
}

inline std::vector<std::byte> hello_frame(const std::string& name) {
  std::vector<std::byte> body = encode_hello(HelloInfo{name, 0});
  wire::Header h;
  h.type = wire::FrameType::hello;
  h.length = static_cast<std::uint32_t>(body.size());
  return frame(h, body);
}

// What a tokenless initiator sends to get connected: AUTH(hello), then HELLO(name). A server
// without a token accepts it without waiting for anything in between.
inline std::vector<std::byte> unauthenticated_opening(const std::string& name) {
  std::vector<std::byte> out = auth_frame(auth_hello(auth::Role::initiator, false));
  append(out, hello_frame(name));
  return out;
}

inline std::vector<std::byte> text_bytes(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

// ---------------------------------------------------------------------------------------------
// A raw TCP peer on the test thread

inline int raw_connect(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// A listening socket on 127.0.0.1 with a kernel-chosen port.
inline int raw_listen(std::uint16_t* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

inline bool write_all(int fd, const std::vector<std::byte>& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly n bytes (bounded by kWait); false on EOF, error or the bound.
inline bool read_exact(int fd, std::byte* out, std::size_t n) {
  const auto deadline = Clock::now() + kWait;
  std::size_t got = 0;
  while (got < n && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = recv(fd, out + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return got == n;
}

// Reads one whole frame (header and payload); empty on failure.
inline std::vector<std::byte> read_frame(int fd) {
  std::vector<std::byte> f(wire::kHeaderBytes);
  if (!read_exact(fd, f.data(), f.size())) return {};
  Result<wire::Header> h = wire::decode(f);
  if (!h.ok()) return {};
  f.resize(wire::kHeaderBytes + h->length);
  if (!read_exact(fd, f.data() + wire::kHeaderBytes, h->length)) return {};
  return f;
}

struct RawOutcome {
  bool closed_by_peer = false;  // EOF or reset seen within the bound
  std::string received;         // everything that arrived before
};

// Reads until the other side closes (bounded by kWait).
inline RawOutcome read_until_closed(int fd) {
  RawOutcome out;
  const auto deadline = Clock::now() + kWait;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      out.closed_by_peer = true;
      break;
    }
    out.received.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Pipes between parent and forked child

inline void write_line(int fd, const std::string& s) {
  std::string line = s + "\n";
  [[maybe_unused]] ssize_t n = write(fd, line.data(), line.size());
}

// Reads one line, waiting at most kWait.
inline std::string read_line(int fd) {
  std::string out;
  const auto deadline = Clock::now() + kWait;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) break;
    if (c == '\n') return out;
    out.push_back(c);
  }
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Redirects this process's stderr (fd 2) into a temporary file until destroyed.
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/tictac-stderr-XXXXXX";
    const int fd = mkstemp(path);
    path_ = path;
    saved_ = dup(2);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
  }
  ~StderrCapture() {
    restore();
    unlink(path_.c_str());
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  // Stops capturing and returns what was written.
  std::string finish() {
    restore();
    return read_file(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

}  // namespace tictac::transport::testing
