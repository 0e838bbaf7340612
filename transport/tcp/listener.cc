#include "transport/tcp/listener.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/tcp/address.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/socket_options.h"

namespace tictac::transport::tcp {

Result<std::unique_ptr<TcpListener>> TcpListener::open(ProgressEngine& engine, std::string_view address,
                                                        AcceptFn on_accept, bool lanes,
                                                        std::shared_ptr<LaneRegistry> registry) {
  Result<sockaddr_in> addr = parse_address(address);
  TICTAC_RETURN_IF_ERROR(addr);
  Result<int> fd = new_socket();
  TICTAC_RETURN_IF_ERROR(fd);
  const int one = 1;
  setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto fail = [&](const char* what, const char* call) {
    const int err = errno;
    ::close(*fd);
    return errno_status(StatusCode::unavailable,
                        std::string(what) + " " + std::string(address), call, err);
  };
  if (bind(*fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) != 0) {
    return fail("cannot bind to", "bind");
  }
  if (::listen(*fd, 128) != 0) return fail("cannot listen on", "listen");
  std::unique_ptr<TcpListener> l(new TcpListener(engine, *fd, local_address(*fd), std::move(on_accept), lanes, std::move(registry)));
  Status st = engine.watch(*fd, EPOLLIN, [p = l.get()](std::uint32_t) { p->on_readable(); });
  if (!st.ok()) return st;  // the destructor closes the socket
  return l;
}

TcpListener::TcpListener(ProgressEngine& engine, int fd, std::string address, AcceptFn on_accept,
                         bool lanes, std::shared_ptr<LaneRegistry> registry)
    : engine_(engine),
      fd_(fd),
      address_(std::move(address)),
      on_accept_(std::move(on_accept)),
      lanes_(lanes),
      registry_(std::move(registry)) {}

TcpListener::~TcpListener() {
  engine_.unwatch(fd_);
  ::close(fd_);
  for (const auto& [fd, timer] : unclassified_) {
    engine_.unwatch(fd);
    engine_.cancel_timer(timer);
    ::close(fd);
  }
}

void TcpListener::forget(int fd) {
  auto it = unclassified_.find(fd);
  if (it == unclassified_.end()) return;
  engine_.unwatch(fd);
  engine_.cancel_timer(it->second);
  unclassified_.erase(it);
}

void TcpListener::hand_over(int fd) {
  forget(fd);
  on_accept_(std::make_unique<TcpEndpoint>(engine_, fd, LaneSetup{lanes_, lanes_ ? registry_ : nullptr}));
}

void TcpListener::classify(int fd) {
  wire::HeaderBytes head{};
  const ssize_t r = recv(fd, head.data(), head.size(), MSG_PEEK);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (r <= 0) {  // gone before it said anything
    forget(fd);
    ::close(fd);
    return;
  }
  if (!is_lane_frame(std::span<const std::byte>(head.data(), static_cast<std::size_t>(r)))) {
    hand_over(fd);  // the core's handshake reads it
    return;
  }
  // A lane's hello is one 56-byte write: anything shorter, malformed or unmatched is dropped
  // (its side then stays on one socket).
  forget(fd);
  Result<LaneFrame> f = static_cast<std::size_t>(r) == head.size()
                            ? decode_lane_frame(head)
                            : Result<LaneFrame>(Status(StatusCode::protocol_error, "truncated lane hello"));
  if (f.ok() && f->kind != LaneFrame::Kind::hello) {
    f = Status(StatusCode::protocol_error, "a lane frame other than HELLO opened the connection");
  }
  const std::string from = remote_address(fd);
  std::string peer = from.substr(0, from.rfind(':'));
  if (f.ok()) {
    peer.push_back(':');
    peer.append(std::to_string(f->value));
  }
  if (f.ok() && recv(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()) &&
      registry_->attach(peer, fd)) {
    return;
  }
  TICTAC_LOG(debug) << "tcp " << address_ << ": closing a lane connection from " << peer << ": "
                    << (f.ok() ? std::string("no connection of that peer waits for a lane")
                               : f.status().to_string());
  ::close(fd);
}

void TcpListener::on_readable() {
  for (int i = 0; i < 64; ++i) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        TICTAC_LOG(warn) << "accept on " << address_ << " failed: " << std::strerror(errno);
      }
      return;
    }
    Status st = tune_connected(fd);
    if (!st.ok()) {
      TICTAC_LOG(warn) << "dropping an incoming connection on " << address_ << ": " << st.to_string();
      ::close(fd);
      continue;
    }
    const auto timer = engine_.add_timer(Clock::now() + kClassifyTimeout, [this, fd] {
      if (unclassified_.count(fd) != 0) hand_over(fd);
    });
    Status w = engine_.watch(fd, EPOLLIN, [this, fd](std::uint32_t) { classify(fd); });
    if (!w.ok()) {
      engine_.cancel_timer(timer);
      TICTAC_LOG(warn) << "dropping an incoming connection on " << address_ << ": " << w.to_string();
      ::close(fd);
      continue;
    }
    unclassified_.emplace(fd, timer);
  }
}

}  // namespace tictac::transport::tcp
