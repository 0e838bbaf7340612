#include "transport/tcp/endpoint.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/tcp/address.h"
#include "transport/tcp/linger.h"
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
// The endpoint takes no new chunk while more than this many bytes wait in user space for the
// socket (which itself holds at most TICTAC_TCP_NOTSENT_LOWAT unsent bytes): together they bound
// how far a newly queued high-priority chunk lands behind data already handed over.
constexpr std::size_t kQueuedBytesLowWater = 128 << 10;
}  // namespace

TcpEndpoint::TcpEndpoint(ProgressEngine& engine, int fd)
    : engine_(engine), fd_(fd), desc_("tcp " + local_address(fd) + " -> " + remote_address(fd)) {
  // The variable was validated when the socket was tuned (tune_connected); auto by default.
  const Result<NotsentLowat> lowat = notsent_lowat_from_env();
  auto_lowat_ = !lowat.ok() || lowat->automatic;
  lowat_ = kAutoLowatStart;
}

void TcpEndpoint::follow_chunk_size(std::uint64_t payload_bytes) {
  recent_[recent_at_] = payload_bytes;
  recent_at_ = (recent_at_ + 1) % kRecentFrames;
  std::uint64_t largest = 0;
  for (std::uint64_t b : recent_) largest = std::max(largest, b);
  const std::uint64_t want = auto_notsent_lowat(largest);
  if (want == lowat_) return;
  // Best effort: a failure keeps the previous bound (the socket still works).
  if (set_notsent_lowat(fd_, want).ok()) lowat_ = want;
}

TcpEndpoint::~TcpEndpoint() {
  close();
  if (flush_call_ != 0) engine_.remove_deferred_call(flush_call_);
}

void TcpEndpoint::start(EndpointSink* sink) {
  sink_ = sink;
  started_ = true;
  if (closed_) return;
  Status st = engine_.watch(fd_, EPOLLIN, [this](std::uint32_t ev) { on_events(ev); });
  if (!st.ok()) {
    engine_.defer(lifetime_.guard([this, st] { fail(st); }));
    return;
  }
  if (!out_.empty()) schedule_flush();
}

bool TcpEndpoint::has_capacity() const {
  return !closed_ && out_.size() < kMaxQueuedFrames && queued_bytes_ < kQueuedBytesLowWater;
}

Status TcpEndpoint::post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) {
  if (closed_) return Status(StatusCode::connection_lost, "connection closed");
  if (out_.size() >= kMaxQueuedFrames) {
    was_full_ = true;
    return Status(StatusCode::resource_exhausted, "no capacity: send queue of the socket is full");
  }
  if (auto_lowat_ && header.length > 0) follow_chunk_size(header.length);
  out_.push_back(OutFrame{wire::encode(header), payload, header.length, cookie, 0});
  queued_bytes_ += wire::kHeaderBytes + header.length;
  if (!has_capacity()) was_full_ = true;
  if (started_) schedule_flush();
  return Status::Ok();
}

void TcpEndpoint::schedule_flush() {
  if (flush_scheduled_ || watching_out_) return;  // EPOLLOUT will flush
  flush_scheduled_ = true;
  if (flush_call_ == 0) {
    flush_call_ = engine_.add_deferred_call([this] {
      flush_scheduled_ = false;
      flush();
    });
  }
  engine_.defer_call(flush_call_);
}

void TcpEndpoint::close() {
  if (closed_) return;
  closed_ = true;
  engine_.unwatch(fd_);
  if (broken_) {
    ::close(fd_);
  } else {
    linger_close(fd_);  // FIN now, the socket itself closes once the peer had our last bytes
  }
  fd_ = -1;
  out_.clear();
}

void TcpEndpoint::fail(const Status& status) {
  if (closed_) return;
  broken_ = true;  // the socket failed: nothing to linger for
  close();
  if (sink_ != nullptr) sink_->on_failed(status);
}

void TcpEndpoint::update_interest() {
  if (closed_) return;
  const bool want_out = !out_.empty();
  if (want_out == watching_out_) return;
  watching_out_ = want_out;
  Status st = engine_.rearm(fd_, want_out ? (EPOLLIN | EPOLLOUT) : EPOLLIN);
  if (!st.ok()) fail(st);
}

void TcpEndpoint::on_events(std::uint32_t events) {
  const auto self = lifetime_.token();
  if ((events & EPOLLOUT) != 0) flush();
  if (!self.alive() || closed_) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) read_some();
}

void TcpEndpoint::flush() {
  if (closed_) return;
  std::vector<std::uint64_t> sent;
  sent.swap(sent_spare_);  // empty, with the capacity of earlier flushes
  for (;;) {
    iovec iov[kMaxIov];
    int n = 0;
    for (const OutFrame& f : out_) {
      if (n + 2 > kMaxIov) break;
      if (f.done < wire::kHeaderBytes) {
        iov[n++] = iovec{const_cast<std::byte*>(f.header.data()) + f.done, wire::kHeaderBytes - f.done};
        if (f.length > 0) iov[n++] = iovec{const_cast<std::byte*>(f.payload), f.length};
      } else {
        const std::size_t off = f.done - wire::kHeaderBytes;
        iov[n++] = iovec{const_cast<std::byte*>(f.payload) + off, f.length - off};
      }
    }
    if (n == 0) break;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t w = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(errno_status(StatusCode::connection_lost, "sending to the peer failed", "sendmsg", errno));
      return;
    }
    std::size_t left = static_cast<std::size_t>(w);
    queued_bytes_ -= left;
    while (left > 0 && !out_.empty()) {
      OutFrame& f = out_.front();
      const std::size_t need = wire::kHeaderBytes + f.length - f.done;
      const std::size_t take = std::min(need, left);
      f.done += take;
      left -= take;
      if (f.done == wire::kHeaderBytes + f.length) {
        sent.push_back(f.cookie);
        out_.pop_front();
      }
    }
  }
  update_interest();
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

void TcpEndpoint::read_some() {
  const auto self = lifetime_.token();
  int frames = 0;
  // Set once a read returned less than it asked for: the socket is drained for now, so the
  // next read would only return EAGAIN (level-triggered epoll reports the next bytes).
  bool drained = false;
  // A header already read behind the last payload, or bytes in rx_, are handled even past the
  // frame limit: no further EPOLLIN may come for them.
  while (!closed_ && (frames < kMaxFramesPerWakeup || hgot_ == wire::kHeaderBytes || rx_pos_ < rx_len_)) {
    ssize_t r;
    std::size_t ahead = 0;  // bytes of the next frame's header read behind this payload
    const bool header_ready = rstate_ == ReadState::header && hgot_ == wire::kHeaderBytes;
    if (header_ready) {
      r = 0;  // nothing to read: decode the buffered header
    } else if (rx_pos_ < rx_len_) {
      // Hand over bytes read ahead: the rest of a header, or (part of) a payload.
      const std::size_t avail = rx_len_ - rx_pos_;
      const std::byte* from = rx_.data() + rx_pos_;
      std::size_t n;
      if (rstate_ == ReadState::header) {
        n = std::min(wire::kHeaderBytes - hgot_, avail);
        std::copy(from, from + n, hbuf_.data() + hgot_);
      } else {
        n = std::min(static_cast<std::size_t>(cur_.length - pgot_), avail);
        if (!dest_.discard) std::copy(from, from + n, dest_.data + pgot_);
      }
      rx_pos_ += n;
      r = static_cast<ssize_t>(n);
    } else if (drained) {
      return;
    } else if (rstate_ == ReadState::header) {
      // A header, and whatever follows it up to kRxBytes: a small frame costs one recv.
      if (rx_.empty()) rx_.resize(kRxBytes);
      r = recv(fd_, rx_.data(), rx_.size(), 0);
      if (r > 0) {
        drained = static_cast<std::size_t>(r) < rx_.size();
        rx_pos_ = 0;
        rx_len_ = static_cast<std::size_t>(r);
        continue;
      }
    } else {
      const std::size_t left = cur_.length - pgot_;
      if (dest_.discard) {
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        const std::size_t want = std::min(left, scratch_.size());
        r = recv(fd_, scratch_.data(), want, 0);
        drained = r >= 0 && static_cast<std::size_t>(r) < want;
      } else {
        // The payload's rest and the next frame's header in one call (one recv per frame
        // instead of two when frames arrive back to back).
        iovec iov[2] = {iovec{dest_.data + pgot_, left}, iovec{hbuf_.data(), wire::kHeaderBytes}};
        r = readv(fd_, iov, 2);
        drained = r >= 0 && static_cast<std::size_t>(r) < left + wire::kHeaderBytes;
        if (r > static_cast<ssize_t>(left)) {
          ahead = static_cast<std::size_t>(r) - left;
          r = static_cast<ssize_t>(left);
        }
      }
    }
    if (r == 0 && !header_ready) {
      if (rstate_ == ReadState::payload || hgot_ > 0) {
        const std::size_t got = rstate_ == ReadState::payload ? wire::kHeaderBytes + pgot_ : hgot_;
        const std::size_t want = rstate_ == ReadState::payload ? wire::kHeaderBytes + cur_.length : wire::kHeaderBytes;
        // A peer that dies mid-frame looks exactly like this: it is a lost connection.
        fail(Status(StatusCode::connection_lost, "truncated frame: the peer closed the connection after " +
                                                    std::to_string(got) + " of " + std::to_string(want) +
                                                    " bytes of a frame"));
      } else {
        fail(Status(StatusCode::connection_lost, "the peer closed the connection (EOF)"));
      }
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail(errno_status(StatusCode::connection_lost, "receiving from the peer failed", "recv", errno));
      return;
    }
    bool frame_done = false;
    if (rstate_ == ReadState::header) {
      hgot_ += static_cast<std::size_t>(r);
      if (hgot_ < wire::kHeaderBytes) continue;
      hgot_ = 0;
      Result<wire::Header> h = wire::decode(hbuf_);
      if (!h.ok()) {
        fail(h.status());
        return;
      }
      cur_ = *h;
      Result<Destination> d = sink_->on_header(cur_);
      if (!self.alive() || closed_) return;
      if (!d.ok()) {
        fail(d.status());
        return;
      }
      dest_ = *d;
      pgot_ = 0;
      if (cur_.length == 0) {
        frame_done = true;
      } else {
        rstate_ = ReadState::payload;
      }
    } else {
      pgot_ += static_cast<std::size_t>(r);
      if (pgot_ == cur_.length) {
        frame_done = true;
        rstate_ = ReadState::header;
        hgot_ = ahead;
      }
    }
    if (frame_done) {
      ++frames;
      sink_->on_frame(cur_);
      if (!self.alive()) return;
    }
  }
}

}  // namespace tictac::transport::tcp
