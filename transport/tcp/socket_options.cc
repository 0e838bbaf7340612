#include "transport/tcp/socket_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

namespace tictac::transport::tcp {

Result<int> new_socket() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status(StatusCode::unavailable, "cannot create a TCP socket", "socket", errno);
  return fd;
}

Status tune_connected(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return errno_status(StatusCode::unavailable, "cannot set TCP_NODELAY", "setsockopt", errno);
  }
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0) {
    return errno_status(StatusCode::unavailable, "cannot set SO_KEEPALIVE", "setsockopt", errno);
  }
  return Status::Ok();
}

}  // namespace tictac::transport::tcp
