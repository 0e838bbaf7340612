#include "transport/tcp/connector.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "transport/tcp/address.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/socket_options.h"

namespace tictac::transport::tcp {

TcpConnector::TcpConnector(ProgressEngine& engine, std::string address, Clock::time_point deadline,
                           ConnectFn on_done, std::function<void()> finished)
    : engine_(engine), address_(std::move(address)), deadline_(deadline), on_done_(std::move(on_done)),
      finished_(std::move(finished)) {}

TcpConnector::~TcpConnector() {
  engine_.cancel_timer(timer_);
  close_socket();
}

void TcpConnector::close_socket() {
  if (fd_ < 0) return;
  engine_.unwatch(fd_);
  ::close(fd_);
  fd_ = -1;
}

void TcpConnector::start() {
  Result<sockaddr_in> addr = parse_address(address_);
  if (!addr.ok()) {
    const Status st = addr.status();
    timer_ = engine_.add_timer(Clock::now(), [this, st] { report(st); });
    return;
  }
  addr_ = *addr;
  // Deadline watchdog; attempts re-arm their own retry timers.
  timer_ = engine_.add_timer(Clock::now(), [this] { attempt(); });
}

void TcpConnector::abandon() {
  done_ = true;
  engine_.cancel_timer(timer_);
  close_socket();
}

void TcpConnector::attempt() {
  timer_ = 0;
  if (done_) return;
  Result<int> fd = new_socket();
  if (!fd.ok()) {
    report(fd.status());
    return;
  }
  fd_ = *fd;
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) == 0) {
    on_writable();
    return;
  }
  if (errno != EINPROGRESS) {
    retry_or_fail(errno_status(StatusCode::unavailable, "cannot connect to " + address_, "connect", errno));
    return;
  }
  Status st = engine_.watch(fd_, EPOLLOUT, [this](std::uint32_t) { on_writable(); });
  if (!st.ok()) {
    report(st);
    return;
  }
  timer_ = engine_.add_timer(deadline_, [this] {
    timer_ = 0;
    report(Status(StatusCode::timeout, "connecting to " + address_ + " did not complete within the timeout"));
  });
}

void TcpConnector::on_writable() {
  if (done_) return;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    retry_or_fail(errno_status(StatusCode::unavailable, "cannot connect to " + address_, "connect", err));
    return;
  }
  Status st = tune_connected(fd_);
  if (!st.ok()) {
    report(st);
    return;
  }
  engine_.unwatch(fd_);
  const int fd = fd_;
  fd_ = -1;
  report(std::unique_ptr<Endpoint>(std::make_unique<TcpEndpoint>(engine_, fd)));
}

void TcpConnector::retry_or_fail(const Status& why) {
  close_socket();
  engine_.cancel_timer(timer_);
  timer_ = 0;
  const auto next = Clock::now() + backoff_;
  if (next >= deadline_) {
    report(Status(StatusCode::timeout, why.message() + " (gave up at the connect deadline; is the peer listening?)",
                  why.origin()));
    return;
  }
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(200));
  timer_ = engine_.add_timer(next, [this] { attempt(); });
}

void TcpConnector::report(Result<std::unique_ptr<Endpoint>> result) {
  if (done_) return;
  done_ = true;
  engine_.cancel_timer(timer_);
  timer_ = 0;
  close_socket();
  ConnectFn fn = std::move(on_done_);
  fn(std::move(result));
  finished_();
}

}  // namespace tictac::transport::tcp
