// TcpEndpoint: start, post and its routing between the two lanes, lane set-up, close
// (transport/tcp/endpoint.h). The sockets' I/O is in endpoint_io.cc.
#include "transport/tcp/endpoint.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/counters.h"
#include "transport/tcp/address.h"
#include "transport/tcp/linger.h"
#include "transport/tcp/socket_options.h"

namespace tictac::transport::tcp {
namespace {

Status peer_closed_status() {
  return Status(StatusCode::connection_lost, "the peer closed the connection (EOF)");
}

// A lane counts as carrying a stream while its queue holds frames or for this long after its
// last data frame: the bytes handed over may still wait in the kernel's queues (a 256 KiB unsent
// bound and the peer's receive buffer: about 2 ms at 1 Gbit/s).
constexpr auto kBusyWindow = std::chrono::milliseconds(10);

}  // namespace

TcpEndpoint::TcpEndpoint(ProgressEngine& engine, int fd, LaneSetup lanes)
    : engine_(engine),
      desc_("tcp " + local_address(fd) + " -> " + remote_address(fd)),
      setup_(std::move(lanes)),
      peer_(remote_address(fd)) {
  s_[0].fd = fd;
  // The variable was validated when the socket was tuned (tune_connected); auto by default.
  const Result<NotsentLowat> lowat = notsent_lowat_from_env();
  auto_lowat_ = !lowat.ok() || lowat->automatic;
  // Validated in TcpBackend::attach. Without this rule a PS switched lanes ~120 times per
  // connection and iteration, its workers' readers were held 40-50 ms per iteration, and
  // training ran 5-6% slower (docs/benchmarks.md, "The switch rule").
  if (const Result<std::uint64_t> sw = lane_switch_bytes_from_env(); sw.ok()) switch_after_ = *sw;
  if (setup_.enabled) {
    lane_ = LaneState::waiting;
    if (setup_.registry) setup_.registry->add(peer_, this);
  }
}

TcpEndpoint::~TcpEndpoint() {
  close();
  if (flush_call_ != 0) engine_.remove_deferred_call(flush_call_);
}

void TcpEndpoint::start(EndpointSink* sink) {
  sink_ = sink;
  started_ = true;
  if (closed_) return;
  Status st = engine_.watch(s_[0].fd, EPOLLIN, [this](std::uint32_t ev) { on_events(0, ev); });
  if (!st.ok()) {
    engine_.defer(lifetime_.guard([this, st] { fail(st); }));
    return;
  }
  s_[0].events = EPOLLIN;
  if (!s_[0].out.empty()) schedule_flush();
}

int TcpEndpoint::route(const wire::Header& h) {
  using wire::FrameType;
  if (h.type == FrameType::data || h.type == FrameType::abort) {
    auto it = pins_.find(h.msg_id);
    if (it != pins_.end()) {  // a message under way stays on its lane, its ABORT too
      const int lane = it->second;
      if (h.type == FrameType::abort || h.offset + h.length >= h.total) pins_.erase(it);
      return lane;
    }
    if (h.type == FrameType::abort || h.offset != 0) return 0;  // began before lane 1 was up
  } else if (h.type != FrameType::announce) {
    // Control frames go with the stream (the barriers keep every non-DATA frame in order across
    // the lanes), so that they do not wait behind the other lane's older bytes.
    return lane_ == LaneState::up && !mac_seen_ ? current_ : 0;
  }
  const int lane = lane_for(h.priority);
  if (h.length > 0 && lane != current_) {  // the stream follows the frames that carry data
    transport_counters().tcp_lane_switches.fetch_add(1, std::memory_order_relaxed);
    current_ = lane;
  }
  if (h.type == FrameType::data && h.length < h.total && lane_ == LaneState::up) {
    pins_.emplace(h.msg_id, lane);
  }
  return lane;
}

int TcpEndpoint::lane_for(Priority priority) const {
  if (lane_ != LaneState::up || mac_seen_) return 0;
  // The stream stays on the current lane; a message more urgent than what that lane carries
  // now switches to the other one, so it does not wait behind those bytes, if there are enough
  // of them that a barrier does not hold it anyway (TICTAC_TCP_LANE_SWITCH).
  // The clock is read last: most frames are not more urgent than the stream.
  const Socket& cur = s_[current_];
  if (priority >= cur.prio || cur.data_since_ctrl < switch_after_) return current_;
  const bool streaming = !cur.out.empty() || Clock::now() - cur.last_payload < kBusyWindow;
  return streaming ? 1 - current_ : current_;
}

bool TcpEndpoint::has_urgent_capacity(std::int64_t priority) const {
  if (closed_) return false;
  const int lane = lane_for(priority);
  return lane != current_ && socket_has_capacity(s_[lane]);
}

Status TcpEndpoint::post(const wire::Header& header, const std::byte* payload,
                         std::uint64_t cookie) {
  if (closed_) return Status(StatusCode::connection_lost, "connection closed");
  if (header.type == wire::FrameType::mac) mac_seen_ = true;
  const int lane = route(header);
  Socket& s = s_[lane];
  if (queue_full(s)) {
    was_full_ = true;
    return Status(StatusCode::resource_exhausted, "no capacity: send queue of the socket is full");
  }
  if (lane == 0 && s_[1].ctrl_posted > synced1_) {
    // Non-DATA frames went on lane 1 since the last SYNC: nothing behind this point on lane 0
    // may be delivered before them.
    enqueue_lane_frame(s, LaneFrame{LaneFrame::Kind::sync, s_[1].ctrl_posted});
    synced1_ = s_[1].ctrl_posted;
  }
  OutFrame f{};
  const wire::HeaderBytes b = wire::encode(header);
  std::size_t at = 0;
  if (lane == 1) {
    transport_counters().tcp_lane1_frames.fetch_add(1, std::memory_order_relaxed);
    wire::put_le(f.head.data(), s_[0].ctrl_posted, 8);
    at = kLaneBarrierBytes;
  }
  std::copy(b.begin(), b.end(), f.head.begin() + static_cast<std::ptrdiff_t>(at));
  f.head_len = at + b.size();
  f.payload = payload;
  f.length = header.length;
  f.cookie = cookie;
  if (header.type != wire::FrameType::data) {
    ++s.ctrl_posted;
    s.data_since_ctrl = 0;
  } else {
    s.data_since_ctrl += header.length;
  }
  if (header.length > 0 &&
      (header.type == wire::FrameType::data || header.type == wire::FrameType::announce)) {
    s.prio = header.priority;
    s.last_payload = Clock::now();
    if (auto_lowat_) follow_chunk_size(s, header.length);
  }
  enqueue(s, f);
  return Status::Ok();
}

void TcpEndpoint::enqueue_lane_frame(Socket& s, const LaneFrame& frame) {
  OutFrame f{};
  const wire::HeaderBytes b = encode_lane_frame(frame);
  std::copy(b.begin(), b.end(), f.head.begin());
  f.head_len = b.size();
  f.internal = true;
  enqueue(s, f);
}

void TcpEndpoint::open_lane() {
  Result<sockaddr_in> addr = parse_address(peer_);
  if (!addr.ok()) {
    drop_lane("the peer's address " + peer_ + " does not parse: " + addr.status().to_string());
    return;
  }
  Result<int> fd = new_socket();
  if (!fd.ok()) {
    drop_lane(fd.status().to_string());
    return;
  }
  s_[1].fd = *fd;
  lane_ = LaneState::connecting;
  Status st = tune_connected(*fd);
  if (!st.ok()) {
    drop_lane(st.to_string());
    return;
  }
  if (::connect(*fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) != 0 &&
      errno != EINPROGRESS) {
    drop_lane(std::string("connect: ") + std::strerror(errno));
    return;
  }
  st = engine_.watch(*fd, EPOLLOUT, [this](std::uint32_t ev) { on_events(1, ev); });
  if (!st.ok()) {
    drop_lane(st.to_string());
    return;
  }
  s_[1].events = EPOLLOUT;
}

void TcpEndpoint::on_lane_connected() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s_[1].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    drop_lane(std::string("connect: ") + std::strerror(err));
    return;
  }
  sockaddr_in local{};
  socklen_t alen = sizeof local;
  if (getsockname(s_[0].fd, reinterpret_cast<sockaddr*>(&local), &alen) != 0) {
    drop_lane(std::string("getsockname: ") + std::strerror(errno));
    return;
  }
  lane_ = LaneState::hello_sent;
  enqueue_lane_frame(s_[1], LaneFrame{LaneFrame::Kind::hello, ntohs(local.sin_port)});
  update_interest(s_[1]);
}

bool TcpEndpoint::attach_lane(int fd) {
  if (closed_ || !started_ || lane_ != LaneState::waiting || !setup_.registry) return false;
  Status st = engine_.watch(fd, EPOLLIN, [this](std::uint32_t ev) { on_events(1, ev); });
  if (!st.ok()) return false;
  Socket& s = s_[1];
  s.fd = fd;
  s.events = EPOLLIN;
  s.prefix = kLaneBarrierBytes;  // the peer sends framed traffic only after our OK
  lane_ = LaneState::up;
  enqueue_lane_frame(s, LaneFrame{LaneFrame::Kind::ok, 0});
  transport_counters().tcp_lanes_up.fetch_add(1, std::memory_order_relaxed);
  TICTAC_LOG(debug) << desc_ << ": lane 1 up (accepted)";
  return true;
}

void TcpEndpoint::drop_lane(const std::string& why) {
  TICTAC_LOG(debug) << desc_ << ": no second lane, one socket carries everything: " << why;
  Socket& s = s_[1];
  if (s.fd >= 0) {
    engine_.unwatch(s.fd);
    ::close(s.fd);
  }
  s = Socket{};
  lane_ = LaneState::failed;
}

bool TcpEndpoint::may_deliver(Socket& s) {
  const bool lane1 = &s == &s_[1];
  std::uint64_t need = 0;
  if (s.prefix > 0) {
    need = wire::get_le(s.hbuf.data(), 8);
  } else if (!lane1 && (lane_ == LaneState::hello_sent || lane_ == LaneState::up) &&
             is_lane_frame(std::span<const std::byte>(s.hbuf.data(), wire::kHeaderBytes))) {
    Result<LaneFrame> f =
        decode_lane_frame(std::span<const std::byte>(s.hbuf.data(), wire::kHeaderBytes));
    if (!f.ok()) {
      fail(f.status());
      return false;
    }
    if (f->kind == LaneFrame::Kind::sync) need = f->value;
  }
  const Socket& other = s_[lane1 ? 0 : 1];
  if (other.ctrl_got >= need) return true;
  transport_counters().tcp_lane_barrier_waits.fetch_add(1, std::memory_order_relaxed);
  if (other.eof) {  // what it waits for can no longer come
    fail(peer_closed_status());
    return false;
  }
  s.paused = true;
  s.paused_since = Clock::now();
  s.wait_for = need;
  update_interest(s);
  return false;
}

bool TcpEndpoint::handle_lane_frame(Socket& s, std::span<const std::byte> bytes) {
  const bool lane1 = &s == &s_[1];
  Result<LaneFrame> f = decode_lane_frame(bytes);
  if (lane1 && lane_ == LaneState::hello_sent) {
    if (!f.ok() || f->kind != LaneFrame::Kind::ok) {
      drop_lane("the peer answered the lane's hello with something else than OK");
      return false;
    }
    lane_ = LaneState::up;
    s.prefix = kLaneBarrierBytes;
    transport_counters().tcp_lanes_up.fetch_add(1, std::memory_order_relaxed);
    TICTAC_LOG(debug) << desc_ << ": lane 1 up (connected)";
    return true;
  }
  if (!lane1 && lane_ != LaneState::off && lane_ != LaneState::failed && f.ok() &&
      f->kind == LaneFrame::Kind::sync) {
    return true;  // its barrier was met in may_deliver
  }
  fail(Status(StatusCode::protocol_error, "unexpected tcp lane frame on " +
                                              std::string(lane1 ? "lane 1" : "the primary socket") +
                                              (f.ok() ? "" : ": " + f.status().message())));
  return false;
}

void TcpEndpoint::frame_delivered(Socket& s) {
  const auto self = lifetime_.token();
  const bool lane1 = &s == &s_[1];
  const bool ctrl = s.cur.type != wire::FrameType::data;
  const bool hello = s.cur.type == wire::FrameType::hello;
  sink_->on_frame(s.cur);
  if (!self.alive() || closed_) return;
  if (ctrl) {
    ++s.ctrl_got;
    resume_if_ready(s_[lane1 ? 0 : 1]);
  }
  // The peer's HELLO ends the core's handshake: the peer is a TicTac endpoint of this
  // connection, which its listener has registered, so now the lane can find it.
  if (!lane1 && lane_ == LaneState::waiting && !setup_.registry && hello) open_lane();
}

void TcpEndpoint::resume_if_ready(Socket& s) {
  const bool lane1 = &s == &s_[1];
  if (s.eof || !s.paused || s_[lane1 ? 0 : 1].ctrl_got < s.wait_for) return;
  s.paused = false;
  const auto held =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s.paused_since);
  transport_counters().tcp_lane_barrier_wait_ns.fetch_add(static_cast<std::uint64_t>(held.count()),
                                                          std::memory_order_relaxed);
  update_interest(s);
  const int lane = lane1 ? 1 : 0;
  engine_.defer(lifetime_.guard([this, lane] {
    if (!closed_ && s_[lane].fd >= 0 && !s_[lane].paused) read_some(s_[lane]);
  }));
}

void TcpEndpoint::peer_closed(Socket& s) {
  // With two sockets, one may end before the other has delivered what was sent on it earlier:
  // the connection ends once both have (or the other waits for a frame this one will not bring).
  s.eof = true;
  s.paused = true;  // nothing more to read; not watched (it would report the EOF forever)
  engine_.unwatch(s.fd);
  s.events = 0;
  Socket& other = s_[&s == &s_[1] ? 0 : 1];
  if (lane_ == LaneState::up && !other.eof && !other.paused) return;
  fail(peer_closed_status());
}

void TcpEndpoint::close() {
  if (closed_) return;
  closed_ = true;
  if (setup_.registry) setup_.registry->remove(peer_, this);
  for (Socket& s : s_) {
    if (s.fd < 0) continue;
    engine_.unwatch(s.fd);
    if (broken_ || (&s == &s_[1] && lane_ != LaneState::up)) {
      ::close(s.fd);
    } else {
      linger_close(s.fd);  // FIN now, the socket itself closes once the peer had our last bytes
    }
    s.fd = -1;
    s.out.clear();
  }
}

void TcpEndpoint::fail(const Status& status) {
  if (closed_) return;
  broken_ = true;  // the socket failed: nothing to linger for
  close();
  if (sink_ != nullptr) sink_->on_failed(status);
}

}  // namespace tictac::transport::tcp
