#include "transport/bootstrap/tcp_store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <list>
#include <map>
#include <optional>

#include <openssl/crypto.h>

#include "common/log.h"
#include "transport/auth/handshake.h"
#include "transport/bootstrap/tcp_store.h"
#include "transport/bootstrap/socket_io.h"
#include "transport/bootstrap/store.h"
#include "transport/bootstrap/tcp_store_protocol.h"

namespace tictac::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kMaxBuffered = wire::kLengthPrefixBytes + wire::kMaxFrameBodyBytes;

struct Waiter {
  wire::Op op;
  std::vector<std::string> keys;
  std::uint32_t timeout_ms;
  Clock::time_point deadline;
};

struct Client {
  int fd = -1;
  std::string peer;
  Bytes in;
  Bytes out;
  std::size_t out_pos = 0;
  bool greeted = false;
  bool authenticated = false;
  std::optional<auth::Handshake> handshake;  // from hello until it passed
  Clock::time_point handshake_deadline;
  bool dead = false;
  std::optional<Waiter> waiter;

  bool idle() const { return out_pos == out.size() && !waiter.has_value(); }
};

std::string peer_name(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  return std::string(text) + ":" + std::to_string(port);
}

}  // namespace

// All state below is touched only by the server thread.
class TcpStoreServer::Loop {
 public:
  explicit Loop(TcpStoreServer& owner) : owner_(owner) {}

  void run() {
    while (!owner_.stopping_.load()) {
      std::vector<pollfd> fds;
      fds.push_back({owner_.wake_fd_, POLLIN, 0});
      fds.push_back({owner_.listen_fd_, POLLIN, 0});
      std::vector<Client*> polled;
      for (Client& c : clients_) {
        short events = 0;
        if (c.in.size() < kMaxBuffered) events |= POLLIN;
        if (c.out_pos < c.out.size()) events |= POLLOUT;
        fds.push_back({c.fd, events, 0});
        polled.push_back(&c);
      }
      const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (n < 0 && errno != EINTR) {
        TICTAC_LOG(error) << "tcp store server: poll failed: " << std::strerror(errno) << "; stopping";
        break;
      }
      if (n > 0 && (fds[1].revents & POLLIN) != 0) accept_all();
      for (std::size_t i = 0; n > 0 && i < polled.size(); ++i) {
        const short re = fds[i + 2].revents;
        if ((re & (POLLIN | POLLHUP | POLLERR)) != 0) read_from(*polled[i]);
        if ((re & POLLOUT) != 0) flush(*polled[i]);
      }
      serve_all();
      expire_waiters();
      expire_handshakes();
      clients_.remove_if([](const Client& c) {
        if (c.dead) ::close(c.fd);
        return c.dead;
      });
    }
    for (Client& c : clients_) ::close(c.fd);
    clients_.clear();
  }

 private:
  int poll_timeout_ms() const {
    int best = -1;
    const auto now = Clock::now();
    for (const Client& c : clients_) {
      if (!c.waiter && c.authenticated) continue;
      const auto until = c.authenticated ? c.waiter->deadline : c.handshake_deadline;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
      const int ms = static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
      best = best < 0 ? ms : std::min(best, ms);
    }
    return best;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int fd = ::accept4(owner_.listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          TICTAC_LOG(warn) << "tcp store server: accept failed: " << std::strerror(errno);
        }
        return;
      }
      if (clients_.size() >= owner_.options_.max_clients) {
        TICTAC_LOG(warn) << "tcp store server: refusing " << peer_name(ss) << ": already "
                         << clients_.size() << " clients (max_clients)";
        ::close(fd);
        continue;
      }
      const int one = 1;
      (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Client c;
      c.fd = fd;
      c.peer = peer_name(ss);
      c.handshake_deadline = Clock::now() + owner_.options_.handshake_timeout;
      clients_.push_back(std::move(c));
    }
  }

  void read_from(Client& c) {
    while (!c.dead && c.in.size() < kMaxBuffered) {
      const std::size_t old = c.in.size();
      const std::size_t want = std::min(kReadChunk, kMaxBuffered - old);
      c.in.resize(old + want);
      const ssize_t n = ::recv(c.fd, c.in.data() + old, want, 0);
      c.in.resize(old + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;  // orderly close or reset: the client went away
      TICTAC_LOG(debug) << "tcp store server: client " << c.peer << " disconnected";
    }
  }

  void flush(Client& c) {
    while (!c.dead && c.out_pos < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        c.dead = true;
      }
    }
    if (c.out_pos == c.out.size()) {
      c.out.clear();
      c.out_pos = 0;
    }
  }

  void respond(Client& c, wire::Op op, const wire::Response& r) {
    Bytes frame = wire::encode_response(op, r);
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    flush(c);
  }

  void respond_status(Client& c, wire::Op op, const Status& s) {
    wire::Response r;
    r.code = s.code();
    r.message = s.message();
    respond(c, op, r);
  }

  void protocol_error(Client& c, const std::string& why) {
    owner_.protocol_errors_.fetch_add(1);
    TICTAC_LOG(warn) << "tcp store server: closing client " << c.peer << ": " << why;
    respond_status(c, wire::Op::hello, Status(StatusCode::protocol_error, why));
    c.dead = true;
  }

  // Serves buffered requests of every idle client until nothing changes any more.
  void serve_all() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (Client& c : clients_) {
        if (c.dead) continue;
        if (c.waiter && try_answer_waiter(c)) progress = true;
        while (!c.dead && c.idle() && next_request(c)) progress = true;
      }
    }
  }

  // Parses and handles one complete buffered request; false when none is complete.
  bool next_request(Client& c) {
    if (c.in.size() < wire::kLengthPrefixBytes) return false;
    Result<std::uint32_t> len = wire::decode_frame_length(c.in);
    if (!len.ok()) {
      protocol_error(c, len.status().message());
      return false;
    }
    if (!c.authenticated && *len > wire::kMaxPreAuthFrameBodyBytes) {
      protocol_error(c, "tcp store: a frame of " + std::to_string(*len) + " bytes before authentication (at most " +
                            std::to_string(wire::kMaxPreAuthFrameBodyBytes) + ")");
      return false;
    }
    const std::size_t total = wire::kLengthPrefixBytes + *len;
    if (c.in.size() < total) return false;
    Result<wire::Request> req =
        wire::decode_request(std::span<const std::uint8_t>(c.in).subspan(wire::kLengthPrefixBytes, *len));
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(total));
    if (!req.ok()) {
      protocol_error(c, req.status().message());
      return false;
    }
    handle(c, *req);
    return true;
  }

  void handle(Client& c, wire::Request& req) {
    if (!c.greeted) {
      if (req.op != wire::Op::hello) {
        protocol_error(c, std::string("tcp store: first frame must be hello, got ") + wire::op_name(req.op));
      } else if (req.magic != wire::kMagic) {
        protocol_error(c, "tcp store: bad magic in hello; the peer is not a TicTac store client");
      } else if (req.version != wire::kVersion) {
        protocol_error(c, "tcp store: client speaks store protocol version " + std::to_string(req.version) +
                              ", this server speaks version " + std::to_string(wire::kVersion) +
                              "; use the same TicTac build on all ranks");
      } else {
        start_handshake(c);
        if (!c.dead) respond(c, req.op, wire::Response{});
      }
      return;
    }
    if (!c.authenticated) {
      handle_auth(c, req);
      return;
    }
    switch (req.op) {
      case wire::Op::hello:
        protocol_error(c, "tcp store: hello sent twice");
        return;
      case wire::Op::auth:
        protocol_error(c, "tcp store: auth sent after the handshake passed");
        return;
      case wire::Op::set:
        values_.insert_or_assign(std::move(req.key), std::move(req.value));
        respond(c, req.op, wire::Response{});
        return;
      case wire::Op::get:
        c.waiter = Waiter{req.op, {std::move(req.key)}, req.timeout_ms,
                          Clock::now() + std::chrono::milliseconds(req.timeout_ms)};
        try_answer_waiter(c);
        return;
      case wire::Op::wait:
        c.waiter = Waiter{req.op, std::move(req.keys), req.timeout_ms,
                          Clock::now() + std::chrono::milliseconds(req.timeout_ms)};
        try_answer_waiter(c);
        return;
      case wire::Op::add:
        handle_add(c, req);
        return;
    }
  }

  void start_handshake(Client& c) {
    auth::HandshakeConfig config;
    config.role = auth::Role::acceptor;
    config.token = owner_.options_.auth_token;
    config.protocol_version = wire::kVersion;
    config.peer = "tcp store client " + c.peer;
    Result<auth::Handshake> hs = auth::Handshake::start(std::move(config));
    if (!hs.ok()) {
      refuse(c, hs.status().to_string());
      return;
    }
    c.greeted = true;
    c.handshake.emplace(std::move(hs).value());
  }

  // One handshake step: feeds the client's bytes, answers with this side's (a refusal included).
  void handle_auth(Client& c, const wire::Request& req) {
    if (req.op != wire::Op::auth) {
      protocol_error(c, std::string("tcp store: ") + wire::op_name(req.op) +
                            " before authentication (the client skipped the auth step: an older TicTac?)");
      return;
    }
    Result<std::size_t> used = c.handshake->feed(req.value);
    wire::Response r;
    const auth::Bytes out = c.handshake->take_output();
    r.value.assign(out.begin(), out.end());
    if (used.ok() && *used != req.value.size()) {
      used = Status(StatusCode::protocol_error, "bytes after the handshake's last message");
    }
    respond(c, wire::Op::auth, r);
    if (!used.ok()) {
      refuse(c, used.status().message());
      return;
    }
    if (c.handshake->done()) {
      c.authenticated = true;
      c.handshake.reset();
    }
  }

  void refuse(Client& c, const std::string& why) {
    owner_.auth_failures_.fetch_add(1);
    TICTAC_LOG(warn) << "tcp store server: refused client " << c.peer << ": " << why;
    c.dead = true;
  }

  void expire_handshakes() {
    const auto now = Clock::now();
    for (Client& c : clients_) {
      if (c.dead || c.authenticated || c.handshake_deadline > now) continue;
      refuse(c, "it did not finish hello and the auth handshake within " +
                    std::to_string(owner_.options_.handshake_timeout.count()) + " ms");
    }
  }

  void handle_add(Client& c, const wire::Request& req) {
    std::int64_t current = 0;
    auto it = values_.find(req.key);
    if (it != values_.end()) {
      Result<std::int64_t> parsed = parse_counter(req.key, it->second);
      if (!parsed.ok()) return respond_status(c, req.op, parsed.status());
      current = *parsed;
    }
    Result<std::int64_t> sum = checked_add(req.key, current, req.delta);
    if (!sum.ok()) return respond_status(c, req.op, sum.status());
    values_.insert_or_assign(req.key, encode_counter(*sum));
    wire::Response r;
    r.number = *sum;
    respond(c, req.op, r);
  }

  std::vector<std::string> missing(const Waiter& w) const {
    std::vector<std::string> out;
    for (const std::string& k : w.keys) {
      if (values_.find(k) == values_.end()) out.push_back(k);
    }
    return out;
  }

  // Answers the client's parked request when its keys exist; true when answered.
  bool try_answer_waiter(Client& c) {
    const Waiter& w = *c.waiter;
    if (!missing(w).empty()) return false;
    wire::Response r;
    if (w.op == wire::Op::get) r.value = values_.find(w.keys.front())->second;
    const wire::Op op = w.op;
    c.waiter.reset();
    respond(c, op, r);
    return true;
  }

  void expire_waiters() {
    const auto now = Clock::now();
    for (Client& c : clients_) {
      if (c.dead || !c.waiter || c.waiter->deadline > now) continue;
      const Waiter w = std::move(*c.waiter);
      c.waiter.reset();
      const char* what = w.op == wire::Op::get ? "tcp store get" : "tcp store wait";
      respond_status(c, w.op, missing_keys_timeout(what, std::chrono::milliseconds(w.timeout_ms), missing(w)));
    }
    // Answered waiters may unblock further buffered requests.
    serve_all();
  }

  TcpStoreServer& owner_;
  std::list<Client> clients_;
  std::map<std::string, Bytes, std::less<>> values_;
};

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(TcpStoreServerOptions options) {
  Result<std::optional<std::string>> token = resolve_store_token(options.auth_token, "TcpStoreServerOptions::auth_token");
  if (!token.ok()) return token.status();
  options.auth_token = std::move(token).value();
  Result<int> fd = io::listen_on(options.host, options.port, 512);
  if (!fd.ok()) return fd.status().with_context("tcp store server");
  Result<std::uint16_t> port = io::local_port(*fd);
  if (!port.ok()) {
    ::close(*fd);
    return port.status();
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(*fd);
    return errno_status(StatusCode::unavailable, "tcp store server: eventfd", "eventfd", errno);
  }
  auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(options), *fd, wake, *port));
  server->thread_ = std::thread([s = server.get()] { Loop(*s).run(); });
  TICTAC_LOG(info) << "tcp store server listening on " << server->host() << ":" << server->port();
  return server;
}

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options, int listen_fd, int wake_fd, std::uint16_t port)
    : options_(std::move(options)), listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}

TcpStoreServer::~TcpStoreServer() {
  stop();
  ::close(wake_fd_);
  if (options_.auth_token && !options_.auth_token->empty()) {
    OPENSSL_cleanse(options_.auth_token->data(), options_.auth_token->size());
  }
}

void TcpStoreServer::stop() {
  if (!stopping_.exchange(true)) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);  // later connects are refused instead of waiting in the backlog
    listen_fd_ = -1;
  }
}

}  // namespace tictac::bootstrap
