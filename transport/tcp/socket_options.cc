#include "transport/tcp/socket_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "common/tunables.h"

namespace tictac::transport::tcp {
namespace {
const StringTunable kNotsentLowat{"TICTAC_TCP_NOTSENT_LOWAT", "auto",
                                  "TCP_NOTSENT_LOWAT of every TicTac TCP socket: the kernel keeps at "
                                  "most about this many unsent bytes queued, so a chunk handed to "
                                  "the socket is close to the wire and a higher-priority chunk "
                                  "preempts soon after. auto = the socket's chunk size (256K..16M, "
                                  "following the chunks it is given); a size; 0 = the kernel's "
                                  "default, unbounded"};
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
  Result<NotsentLowat> lowat = notsent_lowat_from_env();
  if (!lowat.ok()) return lowat.status();
  const std::uint64_t bytes = lowat->automatic ? kAutoLowatStart : lowat->bytes;
  return bytes > 0 ? set_notsent_lowat(fd, bytes) : Status::Ok();
}

Result<NotsentLowat> notsent_lowat_from_env() {
  Result<std::string> text = kNotsentLowat.get();
  if (!text.ok()) return text.status();
  if (text->empty() || *text == "auto") return NotsentLowat{};
  Result<std::uint64_t> bytes = parse_size(*text);
  if (!bytes.ok() || *bytes > (std::uint64_t{1} << 30)) {
    return invalid_argument("TICTAC_TCP_NOTSENT_LOWAT='" + *text +
                            "' is not a size in 0..1G or auto (e.g. 256K; 0 = the kernel's default)");
  }
  return NotsentLowat{false, *bytes};
}

std::uint64_t auto_notsent_lowat(std::uint64_t chunk_bytes) {
  std::uint64_t v = kMinAutoLowat;
  while (v < chunk_bytes && v < kMaxAutoLowat) v <<= 1;
  return v;
}

Status set_notsent_lowat(int fd, std::uint64_t bytes) {
  const int v = static_cast<int>(bytes);
  if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v) != 0) {
    return errno_status(StatusCode::unavailable, "cannot set TCP_NOTSENT_LOWAT", "setsockopt", errno);
  }
  return Status::Ok();
}

}  // namespace tictac::transport::tcp
