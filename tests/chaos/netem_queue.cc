// netem_queue: delay and reordering in user space, for kernels without tc's netem qdisc (this
// development machine's has none). The chaos suite (tests/chaos/chaos.sh) sends a veth end's
// outgoing packets to an NFQUEUE (`iptables -A OUTPUT -o DEV -j NFQUEUE --queue-num Q`); this
// program holds each one for a uniformly random delay in [delay - jitter, delay + jitter] and then
// accepts it. Packets whose delays cross leave out of order, so jitter reorders the way netem's
// does. Loss is not done here: iptables' `statistic` match drops packets before they are queued.
//
//   netem_queue --queue Q --delay-us D --jitter-us J [--seed S] [--ready-file F]
//
// It talks nfnetlink_queue over a raw netlink socket (no libnetfilter_queue), asks for metadata
// only (no payload copies) and creates F once the queue is bound, so the caller adds the iptables
// rule only after that. It runs until SIGTERM or SIGINT, then accepts every packet it still holds
// and prints `netem_queue: queued N, reordered R, max held H` (R = packets released after one with
// a higher id, i.e. overtaken). Exit 0, 1 on a netlink error (named), 2 on bad flags.

// glibc's socket headers before the kernel's: <linux/netfilter.h> pulls in <linux/in.h>, which
// clashes with <netinet/in.h> unless glibc's comes first.
// clang-format off
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
// clang-format on

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Flags {
  unsigned queue = 0;
  long delay_us = -1, jitter_us = 0;
  unsigned seed = 1;
  std::string ready_file;
};

bool parse(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--queue")
      f.queue = static_cast<unsigned>(std::stoul(v));
    else if (a == "--delay-us")
      f.delay_us = std::stol(v);
    else if (a == "--jitter-us")
      f.jitter_us = std::stol(v);
    else if (a == "--seed")
      f.seed = static_cast<unsigned>(std::stoul(v));
    else if (a == "--ready-file")
      f.ready_file = v;
    else
      return false;
  }
  return f.delay_us >= 0 && f.jitter_us >= 0 && f.jitter_us <= f.delay_us && f.queue <= 65535;
}

// One nfnetlink_queue message under construction: nlmsghdr, nfgenmsg, then attributes.
class Message {
 public:
  Message(std::uint16_t type, std::uint16_t flags, unsigned queue) {
    buf_.resize(NLMSG_ALIGN(sizeof(nlmsghdr)) + NLMSG_ALIGN(sizeof(nfgenmsg)));
    auto* h = reinterpret_cast<nlmsghdr*>(buf_.data());
    h->nlmsg_type = static_cast<std::uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
    h->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
    auto* g = reinterpret_cast<nfgenmsg*>(buf_.data() + NLMSG_ALIGN(sizeof(nlmsghdr)));
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(static_cast<std::uint16_t>(queue));
  }
  template <typename T>
  Message& attr(std::uint16_t type, const T& value) {
    const std::size_t at = buf_.size();
    buf_.resize(at + NLA_ALIGN(NLA_HDRLEN + sizeof(T)));
    auto* a = reinterpret_cast<nlattr*>(buf_.data() + at);
    a->nla_type = type;
    a->nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + sizeof(T));
    std::memcpy(buf_.data() + at + NLA_HDRLEN, &value, sizeof(T));
    return *this;
  }
  const char* data() {
    reinterpret_cast<nlmsghdr*>(buf_.data())->nlmsg_len = static_cast<std::uint32_t>(buf_.size());
    return buf_.data();
  }
  std::size_t size() const { return buf_.size(); }

 private:
  std::vector<char> buf_;
};

bool send_message(int fd, Message& m) {
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  return sendto(fd, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
         static_cast<ssize_t>(m.size());
}

// Sends a config message with NLM_F_ACK and waits for the kernel's answer: 0 or -errno.
int configure(int fd, Message& m) {
  if (!send_message(fd, m)) return -errno;
  char buf[8192];
  for (;;) {
    const ssize_t got = recv(fd, buf, sizeof buf, 0);
    if (got < 0) return -errno;
    int n = static_cast<int>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_ERROR) return reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
    }
  }
}

struct Held {
  Clock::time_point due;
  std::uint32_t id_be;  // the packet id as the kernel sent it (network order)
  bool operator>(const Held& o) const { return due > o.due; }
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  try {
    if (!parse(argc, argv, f)) throw std::invalid_argument("flags");
  } catch (const std::exception&) {
    std::fprintf(stderr,
                 "usage: netem_queue --queue Q --delay-us D --jitter-us J (J <= D) [--seed S] "
                 "[--ready-file F]\n");
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) {
    std::fprintf(stderr, "netem_queue: netlink socket: %s\n", std::strerror(errno));
    return 1;
  }
  // A large receive buffer, and no ENOBUFS: a lost packet message would leave its packet held by
  // the kernel until the queue is unbound (the sender then sees loss, as on a congested link).
  const int rcvbuf = 16 << 20, one = 1;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
  sockaddr_nl self{};
  self.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) != 0) {
    std::fprintf(stderr, "netem_queue: netlink bind: %s\n", std::strerror(errno));
    return 1;
  }

  nfqnl_msg_config_cmd bind_cmd{};
  bind_cmd.command = NFQNL_CFG_CMD_BIND;
  bind_cmd.pf = htons(AF_INET);
  Message bind_msg(NFQNL_MSG_CONFIG, NLM_F_ACK, f.queue);
  bind_msg.attr(NFQA_CFG_CMD, bind_cmd);
  nfqnl_msg_config_params params{};
  params.copy_range = htonl(0);
  params.copy_mode = NFQNL_COPY_META;
  Message params_msg(NFQNL_MSG_CONFIG, NLM_F_ACK, f.queue);
  params_msg.attr(NFQA_CFG_PARAMS, params).attr(NFQA_CFG_QUEUE_MAXLEN, htonl(65536u));
  for (Message* m : {&bind_msg, &params_msg}) {
    if (const int err = configure(fd, *m); err != 0) {
      std::fprintf(stderr,
                   "netem_queue: binding NFQUEUE %u failed: %s (is another program bound to it?)\n",
                   f.queue, std::strerror(-err));
      return 1;
    }
  }
  if (!f.ready_file.empty()) std::ofstream(f.ready_file) << "ready\n";

  std::mt19937_64 rng(f.seed);
  std::uniform_int_distribution<long> delay_us(f.delay_us - f.jitter_us, f.delay_us + f.jitter_us);
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held;
  std::uint64_t queued = 0, reordered = 0, max_held = 0;
  std::uint32_t highest_released = 0;
  bool released_any = false;
  auto release = [&](const Held& h) {
    nfqnl_msg_verdict_hdr v{};
    v.verdict = htonl(NF_ACCEPT);
    v.id = h.id_be;
    Message m(NFQNL_MSG_VERDICT, 0, f.queue);
    m.attr(NFQA_VERDICT_HDR, v);
    send_message(fd, m);
    const std::uint32_t id = ntohl(h.id_be);
    if (released_any && id < highest_released) ++reordered;
    if (!released_any || id > highest_released) highest_released = id;
    released_any = true;
  };

  std::vector<char> buf(1 << 16);
  while (!g_stop) {
    const Clock::time_point now = Clock::now();
    while (!held.empty() && held.top().due <= now) {
      release(held.top());
      held.pop();
    }
    timespec wait{1, 0};
    if (!held.empty()) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(held.top().due - now).count();
      wait = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    }
    pollfd p{fd, POLLIN, 0};
    if (ppoll(&p, 1, &wait, nullptr) <= 0 || !(p.revents & POLLIN)) continue;
    const ssize_t got = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (got <= 0) continue;
    int n = static_cast<int>(got);
    const Clock::time_point arrived = Clock::now();
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (h->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE)
        continue;
      const char* at = static_cast<const char*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(nfgenmsg));
      const char* end = reinterpret_cast<const char*>(h) + h->nlmsg_len;
      while (at + NLA_HDRLEN <= end) {
        const auto* a = reinterpret_cast<const nlattr*>(at);
        if (a->nla_len < NLA_HDRLEN || at + a->nla_len > end) break;
        if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
            a->nla_len >= NLA_HDRLEN + sizeof(nfqnl_msg_packet_hdr)) {
          nfqnl_msg_packet_hdr ph;
          std::memcpy(&ph, at + NLA_HDRLEN, sizeof ph);
          held.push({arrived + std::chrono::microseconds(delay_us(rng)), ph.packet_id});
          ++queued;
          if (held.size() > max_held) max_held = held.size();
          break;
        }
        at += NLA_ALIGN(a->nla_len);
      }
    }
  }
  while (!held.empty()) {
    release(held.top());
    held.pop();
  }
  std::printf("netem_queue: queued %llu, reordered %llu, max held %llu\n",
              static_cast<unsigned long long>(queued), static_cast<unsigned long long>(reordered),
              static_cast<unsigned long long>(max_held));
  close(fd);
  return 0;
}
