#include "transport/verbs/backend/side_channel.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace tictac::verbs {

Result<sockaddr_in> parse_side_address(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return invalid_argument("verbs address '" + std::string(address) +
                            "' has no port; expected verbs://<IPv4>:<port> (the TCP side channel)");
  }
  std::string host(address.substr(0, colon));
  const std::string_view port_text = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 || port_text.empty()) {
    return invalid_argument("verbs address '" + std::string(address) + "': port '" + std::string(port_text) +
                            "' is not 0..65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return invalid_argument("verbs address '" + std::string(address) + "': '" + host +
                            "' is not an IPv4 address (the side channel needs one per host)");
  }
  return sa;
}

std::string format_address(const sockaddr_in& addr) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
}

std::string local_address_of(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return format_address(sa);
}

std::string peer_address_of(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return format_address(sa);
}

Result<int> listen_side(const sockaddr_in& addr) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status(StatusCode::unavailable, "cannot create the verbs side-channel socket", "socket", errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(StatusCode::unavailable, "cannot bind the verbs side channel to " + format_address(addr),
                        "bind", err);
  }
  if (::listen(fd, 128) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(StatusCode::unavailable, "cannot listen on " + format_address(addr), "listen", err);
  }
  return fd;
}

Result<int> connect_side(const sockaddr_in& addr, int* err_out) {
  *err_out = 0;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status(StatusCode::unavailable, "cannot create the verbs side-channel socket", "socket", errno);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    *err_out = err;
    ::close(fd);
    return errno_status(StatusCode::unavailable, "cannot connect to " + format_address(addr), "connect", err);
  }
  return fd;
}

Status connect_result(int fd, int* err_out) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  *err_out = err;
  if (err == 0) return Status::Ok();
  return errno_status(StatusCode::unavailable, "connecting the verbs side channel failed", "connect", err);
}

SideStream::~SideStream() {
  if (fd_ >= 0) ::close(fd_);
}

int SideStream::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Status SideStream::write(std::span<const std::byte> bytes) {
  out_.insert(out_.end(), bytes.begin(), bytes.end());
  return flush();
}

Status SideStream::flush() {
  while (!out_.empty()) {
    const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return errno_status(StatusCode::connection_lost, "writing to the verbs side channel failed", "send", errno);
    }
    out_.erase(out_.begin(), out_.begin() + n);
  }
  return Status::Ok();
}

Result<bool> SideStream::fill(std::size_t n) {
  while (in_.size() < n) {
    std::byte buf[256];
    const ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - in_.size()), 0);
    if (r == 0) {
      return Status(StatusCode::connection_lost,
                    "the peer closed the verbs side channel during the QP exchange (after " +
                        std::to_string(in_.size()) + " of " + std::to_string(n) + " bytes; see its log)");
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return errno_status(StatusCode::connection_lost, "reading the verbs side channel failed", "recv", errno);
    }
    in_.insert(in_.end(), buf, buf + r);
  }
  return true;
}

Result<std::size_t> SideStream::read_available(std::size_t max) {
  std::size_t got = 0;
  while (got < max) {
    std::byte buf[256];
    const ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, max - got), 0);
    if (r == 0) {
      return Status(StatusCode::connection_lost,
                    "the peer closed the verbs side channel during authentication (see its log)");
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return errno_status(StatusCode::connection_lost, "reading the verbs side channel failed", "recv", errno);
    }
    in_.insert(in_.end(), buf, buf + r);
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::vector<std::byte> SideStream::take(std::size_t n) {
  std::vector<std::byte> v(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(n));
  in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(n));
  return v;
}

}  // namespace tictac::verbs
