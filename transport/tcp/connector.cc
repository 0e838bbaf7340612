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
                           ConnectFn on_done, std::function<void()> finished, bool lanes)
    : engine_(engine),
      address_(std::move(address)),
      retry_(engine, deadline, scaffold::Backoff::for_sockets(), std::move(on_done),
             std::move(finished), [this] { close_socket(); }),
      lanes_(lanes) {}

TcpConnector::~TcpConnector() { retry_.abandon(); }

void TcpConnector::close_socket() {
  if (fd_ < 0) return;
  engine_.unwatch(fd_);
  ::close(fd_);
  fd_ = -1;
}

void TcpConnector::start() {
  auto starting = retry_.starting();  // a report made in here comes from a loop event
  Result<sockaddr_in> addr = parse_address(address_);
  if (!addr.ok()) {
    retry_.report_soon(addr.status());
    return;
  }
  addr_ = *addr;
  // The deadline is watched while a connect is in progress; retries stop at it by themselves.
  retry_.schedule(Clock::now(), [this] { attempt(); });
}

void TcpConnector::abandon() { retry_.abandon(); }

void TcpConnector::attempt() {
  if (retry_.done()) return;
  Result<int> fd = new_socket();
  if (!fd.ok()) {
    retry_.report(fd.status());
    return;
  }
  fd_ = *fd;
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) == 0) {
    on_writable();
    return;
  }
  if (errno != EINPROGRESS) {
    retry_or_fail(
        errno_status(StatusCode::unavailable, "cannot connect to " + address_, "connect", errno));
    return;
  }
  Status st = engine_.watch(fd_, EPOLLOUT, [this](std::uint32_t) { on_writable(); });
  if (!st.ok()) {
    retry_.report(st);
    return;
  }
  retry_.watch_deadline(Status(
      StatusCode::timeout, "connecting to " + address_ + " did not complete within the timeout"));
}

void TcpConnector::on_writable() {
  if (retry_.done()) return;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    retry_or_fail(
        errno_status(StatusCode::unavailable, "cannot connect to " + address_, "connect", err));
    return;
  }
  Status st = tune_connected(fd_);
  if (!st.ok()) {
    retry_.report(st);
    return;
  }
  engine_.unwatch(fd_);
  const int fd = fd_;
  fd_ = -1;
  retry_.report(std::unique_ptr<Endpoint>(std::make_unique<TcpEndpoint>(engine_, fd, LaneSetup{lanes_, nullptr})));
}

void TcpConnector::retry_or_fail(const Status& why) {
  close_socket();
  retry_.cancel_deadline();
  retry_.retry([this] { attempt(); },
               Status(StatusCode::timeout,
                      why.message() + " (gave up at the connect deadline; is the peer listening?)",
                      why.origin()));
}

}  // namespace tictac::transport::tcp
