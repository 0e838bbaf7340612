// tcp_lane_probe: does an urgent message on a TCP connection of its own land sooner than one
// queued behind a bulk stream on the stream's socket? A probe for issue 20's loopback
// steady-state figure (docs/benchmarks.md, "An urgent frame on its own socket"); it uses plain
// sockets, not the transport, so it measures the kernel's part alone.
//
//   tcp_lane_probe [CHUNK_BYTES [TRIALS [BULK_MIB]]]     defaults: 1048576 20 256
//
// A forked sender streams BULK_MIB of frames of CHUNK_BYTES on socket A (TCP_NODELAY and the tcp
// backend's 256 KiB TCP_NOTSENT_LOWAT). After three quarters of it, between two frames, it sends
// one 64 KiB urgent frame stamped with CLOCK_MONOTONIC: on A ("bulk socket") in even trials, on a
// second connection B ("own socket") in odd ones. The receiver reads both sockets with
// level-triggered epoll, at most 256 KiB per recv, and records the time from the stamp to the
// urgent frame's last byte. Prints the median [min, max] of each; exit 0, or 1 on any socket error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

constexpr std::uint64_t kUrgentBytes = 64 << 10;
constexpr std::size_t kRecvBytes = 256 << 10;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tcp_lane_probe: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

struct FrameHeader {
  std::uint64_t length;    // payload bytes
  std::uint64_t stamp_ns;  // 0: bulk; else the urgent frame's submission time
};

// Writes one frame (header + payload) in full on a blocking socket.
void send_frame(int fd, const char* payload, std::uint64_t length, std::uint64_t stamp) {
  FrameHeader h{length, stamp};
  iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(payload), length}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  std::size_t left = sizeof h + length;
  while (left > 0) {
    const ssize_t w = sendmsg(fd, &m, 0);
    if (w < 0) die("sendmsg");
    left -= static_cast<std::size_t>(w);
    std::size_t skip = static_cast<std::size_t>(w);
    while (skip > 0 && m.msg_iovlen > 0) {
      if (skip >= m.msg_iov[0].iov_len) {
        skip -= m.msg_iov[0].iov_len;
        ++m.msg_iov;
        --m.msg_iovlen;
      } else {
        m.msg_iov[0].iov_base = static_cast<char*>(m.msg_iov[0].iov_base) + skip;
        m.msg_iov[0].iov_len -= skip;
        skip = 0;
      }
    }
  }
}

// Parses one socket's byte stream into frames; counts bulk bytes, notes the urgent latency.
struct FrameReader {
  FrameHeader header{};
  std::size_t header_got = 0;
  std::uint64_t payload_left = 0;
  bool in_payload = false;
  std::uint64_t bulk_bytes = 0;
  std::uint64_t urgent_ns = 0;  // 0 until the urgent frame's last byte was read

  void feed(const char* p, std::size_t n) {
    while (n > 0) {
      if (!in_payload) {
        const std::size_t k = std::min(n, sizeof header - header_got);
        std::memcpy(reinterpret_cast<char*>(&header) + header_got, p, k);
        header_got += k;
        p += k;
        n -= k;
        if (header_got < sizeof header) continue;
        header_got = 0;
        in_payload = true;
        payload_left = header.length;
      } else {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, payload_left));
        payload_left -= k;
        p += k;
        n -= k;
        if (header.stamp_ns == 0) bulk_bytes += k;
      }
      if (in_payload && payload_left == 0) {
        in_payload = false;
        if (header.stamp_ns != 0) urgent_ns = now_ns() - header.stamp_ns;
      }
    }
  }
};

void sender(const sockaddr_in& addr, std::uint64_t chunk, int trials, std::uint64_t bulk) {
  const int one = 1;
  const int lowat = 256 << 10;
  int fds[2];
  for (int& fd : fds) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) die("connect");
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
  }
  if (setsockopt(fds[0], IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat) != 0) die("TCP_NOTSENT_LOWAT");
  std::vector<char> payload(std::max(chunk, kUrgentBytes), 1);
  for (int t = 0; t < 2 * trials; ++t) {
    const int urgent_fd = fds[t % 2];
    bool urgent_sent = false;
    for (std::uint64_t sent = 0; sent < bulk; sent += chunk) {
      send_frame(fds[0], payload.data(), chunk, 0);
      if (!urgent_sent && sent + chunk >= bulk * 3 / 4) {
        send_frame(urgent_fd, payload.data(), kUrgentBytes, now_ns());
        urgent_sent = true;
      }
    }
    char ack = 0;
    if (read(fds[0], &ack, 1) != 1) die("read of the end-of-trial ack");
  }
}

// "median us [min, max]" of one placement's latencies (sorts them).
void print_summary(const char* placement, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  std::printf("%s median %.1f us [%.1f, %.1f]", placement, us[us.size() / 2], us.front(), us.back());
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t chunk = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (1u << 20);
  const int trials = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::uint64_t bulk = (argc > 3 ? std::strtoull(argv[3], nullptr, 0) : 256) << 20;
  if (chunk == 0 || chunk > (1u << 30) || trials <= 0 || bulk < chunk) {
    std::fprintf(stderr, "usage: tcp_lane_probe [CHUNK_BYTES (1..1G) [TRIALS (>0) [BULK_MIB (>= one chunk)]]]\n");
    return 2;
  }
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind");
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) die("getsockname");
  if (listen(listener, 2) != 0) die("listen");
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    sender(addr, chunk, trials, bulk);
    std::exit(0);
  }
  const int bulk_fd = accept(listener, nullptr, nullptr);
  const int own_fd = accept(listener, nullptr, nullptr);
  if (bulk_fd < 0 || own_fd < 0) die("accept");
  const int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  for (int fd : {bulk_fd, own_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  }
  std::vector<char> buf(kRecvBytes);
  std::vector<double> on_bulk, on_own;
  for (int t = 0; t < 2 * trials; ++t) {
    FrameReader bulk_reader, own_reader;
    while (bulk_reader.bulk_bytes < bulk || (bulk_reader.urgent_ns == 0 && own_reader.urgent_ns == 0)) {
      epoll_event evs[2];
      const int n = epoll_wait(ep, evs, 2, 10000);
      if (n == 0) {
        errno = ETIMEDOUT;
        die("no data for 10 s");
      }
      for (int i = 0; i < n; ++i) {
        const int fd = evs[i].data.fd;
        const ssize_t r = recv(fd, buf.data(), buf.size(), 0);
        if (r <= 0) die(r == 0 ? "recv: the sender closed early" : "recv");
        (fd == bulk_fd ? bulk_reader : own_reader).feed(buf.data(), static_cast<std::size_t>(r));
      }
    }
    const double us = static_cast<double>(bulk_reader.urgent_ns + own_reader.urgent_ns) / 1000.0;
    (t % 2 == 0 ? on_bulk : on_own).push_back(us);
    const char ack = 1;
    if (write(bulk_fd, &ack, 1) != 1) die("write of the end-of-trial ack");
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tcp_lane_probe: the sender failed\n");
    return 1;
  }
  std::printf("chunk %llu B, %d trials: urgent 64 KiB frame, stamp to last byte read: ",
              static_cast<unsigned long long>(chunk), trials);
  print_summary("on the bulk socket", on_bulk);
  print_summary("; on its own socket", on_own);
  std::printf("\n");
  return 0;
}
