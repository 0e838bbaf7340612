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
                                                        AcceptFn on_accept) {
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
  std::unique_ptr<TcpListener> l(new TcpListener(engine, *fd, local_address(*fd), std::move(on_accept)));
  Status st = engine.watch(*fd, EPOLLIN, [p = l.get()](std::uint32_t) { p->on_readable(); });
  if (!st.ok()) return st;  // the destructor closes the socket
  return l;
}

TcpListener::TcpListener(ProgressEngine& engine, int fd, std::string address, AcceptFn on_accept)
    : engine_(engine), fd_(fd), address_(std::move(address)), on_accept_(std::move(on_accept)) {}

TcpListener::~TcpListener() {
  engine_.unwatch(fd_);
  ::close(fd_);
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
    on_accept_(std::make_unique<TcpEndpoint>(engine_, fd));
  }
}

}  // namespace tictac::transport::tcp
