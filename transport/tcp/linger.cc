#include "transport/tcp/linger.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tictac::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kQuiet = std::chrono::milliseconds(50);
constexpr auto kBound = std::chrono::milliseconds(1000);
constexpr std::size_t kMaxKept = 256;

struct Kept {
  int fd;
  Clock::time_point since;
  Clock::time_point last_input;
};
thread_local std::vector<Kept> t_kept;

// Reads and drops what is there; true when the socket is done (peer closed, error, or quiet with
// our bytes acknowledged).
bool drained(Kept& k, Clock::time_point now) {
  std::byte sink[4096];
  ssize_t r;
  while ((r = ::recv(k.fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) k.last_input = now;
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
  int unacked = 0;
  if (::ioctl(k.fd, SIOCOUTQ, &unacked) != 0) return true;
  return unacked == 0 && now - k.last_input >= kQuiet;
}

// Closes the kept sockets that are done, and those kept past the bound.
void reap(Clock::time_point now) {
  for (auto it = t_kept.begin(); it != t_kept.end();) {
    if (drained(*it, now) || now - it->since >= kBound) {
      ::close(it->fd);
      it = t_kept.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

void linger_close(int fd) {
  const Clock::time_point now = Clock::now();
  ::shutdown(fd, SHUT_WR);
  reap(now);
  if (t_kept.size() >= kMaxKept) {  // too many half-closed sockets: the oldest goes now
    ::close(t_kept.front().fd);
    t_kept.erase(t_kept.begin());
  }
  t_kept.push_back(Kept{fd, now, now});
}

void finish_lingering() {
  const Clock::time_point deadline = Clock::now() + kBound;
  while (true) {
    const Clock::time_point now = Clock::now();
    reap(now);
    if (t_kept.empty()) return;
    if (now >= deadline) {
      for (const Kept& k : t_kept) ::close(k.fd);
      t_kept.clear();
      return;
    }
    std::vector<pollfd> fds;
    for (const Kept& k : t_kept) fds.push_back(pollfd{k.fd, POLLIN, 0});
    (void)::poll(fds.data(), fds.size(), 5);
  }
}

}  // namespace tictac::transport::tcp
