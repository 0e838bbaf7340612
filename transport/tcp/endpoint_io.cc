// TcpEndpoint's socket I/O: flushing each socket's queue and reading frames from each socket
// (transport/tcp/endpoint.h). Routing and lanes are in endpoint.cc.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/tcp/endpoint.h"
#include "transport/tcp/socket_options.h"

namespace tictac::transport::tcp {
namespace {
constexpr std::size_t kMaxQueuedFrames = 256;
constexpr int kMaxIov = 64;
constexpr int kMaxFramesPerWakeup = 64;  // fairness between sockets on one loop
constexpr std::size_t kScratchBytes = 64 << 10;
// Header-state reads ask for this much: a small frame (header + payload) and the small frames
// behind it arrive in one recv; a large payload's first bytes are copied from here, its rest is
// read straight into its destination.
constexpr std::size_t kRxBytes = 4 << 10;
// The endpoint takes no new chunk while more than this many bytes wait in user space for a
// socket (which itself holds at most TICTAC_TCP_NOTSENT_LOWAT unsent bytes): together they bound
// how far a newly queued high-priority chunk lands behind data already handed over.
constexpr std::size_t kQueuedBytesLowWater = 128 << 10;
// Bytes a reader takes between two looks at the other socket while lane 1 is up.
constexpr std::size_t kPollEvery = 64 << 10;
// The largest single read while lane 1 is up.
constexpr std::size_t kReadMax = 256 << 10;
}  // namespace

bool TcpEndpoint::socket_has_capacity(const Socket& s) const {
  return s.out.size() < kMaxQueuedFrames && s.queued_bytes < kQueuedBytesLowWater;
}

bool TcpEndpoint::has_capacity() const {
  if (closed_ || !socket_has_capacity(s_[0])) return false;
  return lane_ != LaneState::up || socket_has_capacity(s_[1]);
}

void TcpEndpoint::enqueue(Socket& s, const OutFrame& frame) {
  s.out.push_back(frame);
  s.queued_bytes += frame.head_len + frame.length;
  if (!has_capacity()) was_full_ = true;
  if (started_ && (s.events & EPOLLOUT) == 0) schedule_flush();
}

bool TcpEndpoint::queue_full(const Socket& s) const { return s.out.size() >= kMaxQueuedFrames; }

void TcpEndpoint::follow_chunk_size(Socket& s, std::uint64_t payload_bytes) {
  recent_[recent_at_] = payload_bytes;
  recent_at_ = (recent_at_ + 1) % kRecentFrames;
  std::uint64_t largest = 0;
  for (std::uint64_t b : recent_) largest = std::max(largest, b);
  const std::uint64_t want = auto_notsent_lowat(largest);
  if (want == s.lowat) return;
  // Best effort: a failure keeps the previous bound (the socket still works).
  if (set_notsent_lowat(s.fd, want).ok()) s.lowat = want;
}

void TcpEndpoint::schedule_flush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  if (flush_call_ == 0) {
    flush_call_ = engine_.add_deferred_call([this] {
      flush_scheduled_ = false;
      flush_all();
    });
  }
  engine_.defer_call(flush_call_);
}

void TcpEndpoint::flush_all() {
  const auto self = lifetime_.token();
  // The current lane first: the last switch put the most urgent frames there; a flush of the
  // other may copy a whole chunk.
  for (Socket* s : {&s_[current_], &s_[1 - current_]}) {
    if (!self.alive() || closed_) return;
    if (s->fd >= 0 && !s->out.empty() && !(s == &s_[1] && lane_ == LaneState::connecting))
      flush(*s);
  }
}

void TcpEndpoint::update_interest(Socket& s) {
  if (closed_ || s.fd < 0 || s.eof) return;
  std::uint32_t want = s.paused ? 0u : static_cast<std::uint32_t>(EPOLLIN);
  if (!s.out.empty() || (&s == &s_[1] && lane_ == LaneState::connecting)) want |= EPOLLOUT;
  if (want == s.events) return;
  s.events = want;
  Status st = engine_.rearm(s.fd, want);
  if (!st.ok()) fail(st);
}

void TcpEndpoint::on_events(int lane, std::uint32_t events) {
  const auto self = lifetime_.token();
  Socket& s = s_[lane];
  if (lane == 1 && lane_ == LaneState::connecting) {
    on_lane_connected();
    return;
  }
  if ((events & EPOLLOUT) != 0) flush(s);
  if (!self.alive() || closed_ || s.fd < 0) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !s.paused) read_some(s);
}

void TcpEndpoint::flush(Socket& s) {
  if (closed_ || s.fd < 0) return;
  std::vector<std::uint64_t> sent;
  sent.swap(sent_spare_);  // empty, with the capacity of earlier flushes
  for (;;) {
    iovec iov[kMaxIov];
    int n = 0;
    for (const OutFrame& f : s.out) {
      if (n + 2 > kMaxIov) break;
      if (f.done < f.head_len) {
        iov[n++] = iovec{const_cast<std::byte*>(f.head.data()) + f.done, f.head_len - f.done};
        if (f.length > 0) iov[n++] = iovec{const_cast<std::byte*>(f.payload), f.length};
      } else {
        const std::size_t off = f.done - f.head_len;
        iov[n++] = iovec{const_cast<std::byte*>(f.payload) + off, f.length - off};
      }
    }
    if (n == 0) break;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t w = sendmsg(s.fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const int err = errno;
      if (&s == &s_[1] && lane_ != LaneState::up) {
        drop_lane(std::string("sending the lane's hello failed: ") + std::strerror(err));
        return;
      }
      fail(errno_status(StatusCode::connection_lost, "sending to the peer failed", "sendmsg", err));
      return;
    }
    std::size_t left = static_cast<std::size_t>(w);
    s.queued_bytes -= left;
    while (left > 0 && !s.out.empty()) {
      OutFrame& f = s.out.front();
      const std::size_t need = f.head_len + f.length - f.done;
      const std::size_t take = std::min(need, left);
      f.done += take;
      left -= take;
      if (f.done == f.head_len + f.length) {
        if (!f.internal) sent.push_back(f.cookie);
        s.out.pop_front();
      }
    }
  }
  update_interest(s);
  const auto self = lifetime_.token();
  for (std::uint64_t cookie : sent) {
    if (!self.alive() || closed_) return;
    sink_->on_sent(cookie);
  }
  if (self.alive() && !closed_ && was_full_ && has_capacity()) {
    was_full_ = false;
    sink_->on_writable();
  }
  if (self.alive() && sent_spare_.empty()) {
    sent.clear();
    sent_spare_.swap(sent);
  }
}

void TcpEndpoint::read_some(Socket& s) {
  const auto self = lifetime_.token();
  const bool lane1 = &s == &s_[1];
  int frames = 0;
  // Set once a read returned less than it asked for: the socket is drained for now, so the
  // next read would only return EAGAIN (level-triggered epoll reports the next bytes).
  bool drained = false;
  // A head already read behind the last payload, or bytes in rx, are handled even past the
  // frame limit: no further EPOLLIN may come for them.
  // With lane 1 up, each reader looks at the other socket after every kPollEvery bytes it read
  // (one recv, EAGAIN when nothing waits): an urgent frame does not wait for the other lane's
  // backlog to be copied out.
  const bool poll_other = lane_ == LaneState::up && !polling_;
  Socket& other = s_[lane1 ? 0 : 1];
  std::size_t taken = 0;
  while (!closed_ && s.fd >= 0 && !s.paused &&
         (frames < kMaxFramesPerWakeup || s.hgot == s.head_size() || s.rx_pos < s.rx_len)) {
    if (poll_other && taken >= kPollEvery) {
      taken = 0;
      if (other.fd >= 0 && !other.paused) {
        polling_ = true;
        read_some(other);
        if (!self.alive()) return;
        polling_ = false;
      }
      if (closed_ || s.paused) return;
    }
    const std::size_t hsize = s.head_size();
    ssize_t r;
    std::size_t ahead = 0;  // bytes of the next frame's head read behind this payload
    const bool header_ready = s.rstate == ReadState::header && s.hgot == hsize;
    if (header_ready) {
      r = 0;  // nothing to read: examine the buffered head
    } else if (s.rx_pos < s.rx_len) {
      // Hand over bytes read ahead: the rest of a head, or (part of) a payload.
      const std::size_t avail = s.rx_len - s.rx_pos;
      const std::byte* from = s.rx.data() + s.rx_pos;
      std::size_t n;
      if (s.rstate == ReadState::header) {
        n = std::min(hsize - s.hgot, avail);
        std::copy(from, from + n, s.hbuf.data() + s.hgot);
      } else {
        n = std::min(static_cast<std::size_t>(s.cur.length - s.pgot), avail);
        if (!s.dest.discard) std::copy(from, from + n, s.dest.data + s.pgot);
      }
      s.rx_pos += n;
      r = static_cast<ssize_t>(n);
    } else if (drained) {
      return;
    } else if (s.rstate == ReadState::header) {
      // A head, and whatever follows it up to kRxBytes: a small frame costs one recv.
      if (s.rx.empty()) s.rx.resize(kRxBytes);
      r = recv(s.fd, s.rx.data(), s.rx.size(), 0);
      if (r > 0) {
        drained = static_cast<std::size_t>(r) < s.rx.size();
        s.rx_pos = 0;
        s.rx_len = static_cast<std::size_t>(r);
        continue;
      }
    } else {
      const std::size_t left = s.cur.length - s.pgot;
      if (s.dest.discard) {
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        const std::size_t want = std::min(left, scratch_.size());
        r = recv(s.fd, scratch_.data(), want, 0);
        drained = r >= 0 && static_cast<std::size_t>(r) < want;
      } else {
        // The payload's rest and the next frame's head in one call (one recv per frame
        // instead of two when frames arrive back to back); lane 0 in pieces of at most
        // kReadMax while lane 1 is up, so that the other socket is looked at in between.
        const std::size_t piece = poll_other ? std::min(left, kReadMax) : left;
        iovec iov[2] = {iovec{s.dest.data + s.pgot, piece}, iovec{s.hbuf.data(), hsize}};
        const int n = piece == left ? 2 : 1;
        r = readv(s.fd, iov, n);
        drained = r >= 0 && static_cast<std::size_t>(r) < piece + (n == 2 ? hsize : 0);
        if (r > static_cast<ssize_t>(left)) {
          ahead = static_cast<std::size_t>(r) - left;
          r = static_cast<ssize_t>(left);
        }
      }
    }
    if (r == 0 && !header_ready) {
      if (lane1 && lane_ != LaneState::up) {
        drop_lane("the peer closed the lane socket before it answered");
        return;
      }
      if (s.rstate == ReadState::payload || s.hgot > 0) {
        const std::size_t got = s.rstate == ReadState::payload ? hsize + s.pgot : s.hgot;
        const std::size_t want = s.rstate == ReadState::payload ? hsize + s.cur.length : hsize;
        // A peer that dies mid-frame looks exactly like this: it is a lost connection.
        fail(Status(StatusCode::connection_lost,
                    "truncated frame: the peer closed the connection after " + std::to_string(got) +
                        " of " + std::to_string(want) + " bytes of a frame"));
      } else {
        peer_closed(s);
      }
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      const int err = errno;
      if (lane1 && lane_ != LaneState::up) {
        drop_lane(std::string("reading the lane's answer failed: ") + std::strerror(err));
        return;
      }
      fail(
          errno_status(StatusCode::connection_lost, "receiving from the peer failed", "recv", err));
      return;
    }
    taken += static_cast<std::size_t>(r);
    bool frame_done = false;
    if (s.rstate == ReadState::header) {
      s.hgot += static_cast<std::size_t>(r);
      if (s.hgot < hsize) continue;
      if (!may_deliver(s)) return;  // paused behind the other socket, or a lane frame failed
      if (!self.alive() || closed_) return;
      const std::span<const std::byte> head(s.hbuf.data() + s.prefix, wire::kHeaderBytes);
      if (is_lane_frame(head) || (lane1 && lane_ != LaneState::up)) {
        s.hgot = 0;
        if (!handle_lane_frame(s, head)) return;
        continue;
      }
      s.hgot = 0;
      Result<wire::Header> h = wire::decode(head);
      if (!h.ok()) {
        fail(h.status());
        return;
      }
      s.cur = *h;
      Result<Destination> d = sink_->on_header(s.cur);
      if (!self.alive() || closed_) return;
      if (!d.ok()) {
        fail(d.status());
        return;
      }
      s.dest = *d;
      s.pgot = 0;
      if (s.cur.length == 0) {
        frame_done = true;
      } else {
        s.rstate = ReadState::payload;
      }
    } else {
      s.pgot += static_cast<std::size_t>(r);
      if (s.pgot == s.cur.length) {
        frame_done = true;
        s.rstate = ReadState::header;
        s.hgot = ahead;
      }
    }
    if (frame_done) {
      ++frames;
      frame_delivered(s);
      if (!self.alive()) return;
    }
  }
}

}  // namespace tictac::transport::tcp
