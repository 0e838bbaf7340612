#include "transport/tcp/socket_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/tunables.h"

namespace tictac::transport::tcp {
namespace {
const SizeTunable kNotsentLowat{"TICTAC_TCP_NOTSENT_LOWAT", 256 << 10,
                                "TCP_NOTSENT_LOWAT of every TicTac TCP socket: the kernel keeps at "
                                "most about this many unsent bytes queued, so a chunk handed to "
                                "the socket is close to the wire and a higher-priority chunk "
                                "preempts soon after (0 = the kernel's default, unbounded)"};
}  // namespace

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
  Result<std::uint64_t> lowat = kNotsentLowat.get();
  if (!lowat.ok()) return lowat.status();
  if (*lowat > (std::uint64_t{1} << 30)) {
    return invalid_argument("TICTAC_TCP_NOTSENT_LOWAT=" + std::to_string(*lowat) + " is out of range 0..1G");
  }
  if (*lowat > 0) {
    const int v = static_cast<int>(*lowat);
    if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v) != 0) {
      return errno_status(StatusCode::unavailable, "cannot set TCP_NOTSENT_LOWAT", "setsockopt", errno);
    }
  }
  return Status::Ok();
}

}  // namespace tictac::transport::tcp
