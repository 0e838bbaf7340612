#include "transport/bootstrap/socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

namespace tictac::bootstrap::io {
namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> resolve(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* out = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out);
  if (rc != 0) {
    return Status(StatusCode::unavailable,
                  "cannot resolve store address '" + host + "': " + ::gai_strerror(rc), "getaddrinfo");
  }
  return AddrInfoPtr(out);
}

int poll_ms_until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>(left + 1, 60'000));
}

// Waits for `events` on fd; ok when ready, timeout when the deadline passed.
Status wait_ready(int fd, short events, Deadline deadline, const std::string& peer, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms_until(deadline));
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return errno_status(StatusCode::unavailable, "poll", "poll", errno);
    if (n == 0 && Clock::now() >= deadline) {
      return Status(StatusCode::timeout, std::string(what) + " " + peer + " timed out", peer);
    }
  }
}

}  // namespace

Result<int> listen_on(const std::string& host, std::uint16_t port, int backlog) {
  Result<AddrInfoPtr> ai = resolve(host, port, /*passive=*/true);
  if (!ai.ok()) return ai.status();
  int last_errno = 0;
  for (addrinfo* a = ai->get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) return fd;
    last_errno = errno;
    ::close(fd);
  }
  return errno_status(StatusCode::unavailable,
                      "cannot listen on " + host + ":" + std::to_string(port) + " (port in use? pick 0)",
                      "bind", last_errno);
}

Result<std::uint16_t> local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return errno_status(StatusCode::internal, "getsockname", "getsockname", errno);
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

Result<int> connect_until(const std::string& host, std::uint16_t port, Deadline deadline) {
  Result<AddrInfoPtr> ai = resolve(host, port, /*passive=*/false);
  if (!ai.ok()) return ai.status();
  const std::string peer = host + ":" + std::to_string(port);
  auto backoff = std::chrono::milliseconds(5);
  int last_errno = 0;
  for (;;) {
    for (addrinfo* a = ai->get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) return errno_status(StatusCode::unavailable, "socket for " + peer, "socket", errno);
      int err = 0;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          const Status ready = wait_ready(fd, POLLOUT, deadline, peer, "connect to");
          socklen_t len = sizeof(err);
          err = ready.ok() ? 0 : ETIMEDOUT;
          if (ready.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
      if (err == 0) {
        const int flags = ::fcntl(fd, F_GETFL);
        (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        const int one = 1;
        (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
      ::close(fd);
      last_errno = err;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status(StatusCode::timeout,
                    "could not connect to the store server at " + peer +
                        " before the connect timeout (last error: " + std::strerror(last_errno) +
                        "); is the server running and reachable?",
                    "connect errno=" + std::to_string(last_errno));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

Status send_all(int fd, std::span<const std::uint8_t> data, Deadline deadline, const std::string& peer) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TICTAC_RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline, peer, "send to"));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return errno_status(StatusCode::connection_lost, "store connection to " + peer + " broke while sending",
                        "send", errno);
  }
  return Status::Ok();
}

Status recv_exact(int fd, std::span<std::uint8_t> data, Deadline deadline, const std::string& peer) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::recv(fd, data.data() + done, data.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      return Status(StatusCode::connection_lost,
                    "store server " + peer + " closed the connection (did it exit or crash?)", peer);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TICTAC_RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline, peer, "receive from"));
      continue;
    }
    if (errno == EINTR) continue;
    return errno_status(StatusCode::connection_lost, "store connection to " + peer + " broke while receiving",
                        "recv", errno);
  }
  return Status::Ok();
}

}  // namespace tictac::bootstrap::io
