// TcpEndpoint: a connection to one peer over one non-blocking TCP socket, plus, once both sides
// agreed, a second one (lane 1), so that a message more urgent than the stream on one socket can
// go on the other (transport/tcp/lanes.h has the protocol). Internal to the TCP backend.
// Loop-thread only (see transport/backend.h). Owns its sockets; close() unwatches and closes them.
//
// Sending: post() routes each frame to a socket (the current lane, or the other one for a message
// more urgent than the data the current lane carries now, when at least TICTAC_TCP_LANE_SWITCH
// bytes of it follow the lane's last control frame; the other one then becomes the current lane;
// control frames on lane 0; a message's chunks stay on its lane)
// and flushes each socket's queue with sendmsg. Receiving: each socket has its own frame reader;
// the lanes' barriers decide when a frame may be delivered (the other socket is served
// meanwhile). The I/O state machines are in endpoint_io.cc, routing and lane set-up here.
#pragma once

#include <sys/uio.h>

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"
#include "transport/tcp/lanes.h"
#include "transport/tcp/socket_options.h"
#include "transport/types.h"

namespace tictac::transport::tcp {

// How an endpoint takes part in lanes (transport/tcp/lanes.h).
struct LaneSetup {
  bool enabled = false;  // TICTAC_TCP_LANES and no job token, on this side
  // Accepting side: where the endpoint waits for its lane socket. Connecting side: null (it
  // opens the lane itself once the peer's HELLO arrived on the primary socket).
  std::shared_ptr<LaneRegistry> registry;
};

class TcpEndpoint final : public Endpoint {
 public:
  // Takes ownership of the connected socket `fd`.
  TcpEndpoint(ProgressEngine& engine, int fd, LaneSetup lanes = {});
  ~TcpEndpoint() override;

  void start(EndpointSink* sink) override;
  bool has_capacity() const override;
  // A new message of `priority` would switch lanes (it is more urgent than the stream on the
  // current one) and that lane has room.
  bool has_urgent_capacity(std::int64_t priority) const override;
  Status post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  void close() override;
  std::string describe() const override { return desc_; }

  // Accepting side (LaneRegistry): takes the lane socket `fd`, whose LANE HELLO was read, and
  // answers LANE OK on it. false (fd not taken) when closed or already laned.
  bool attach_lane(int fd);
  // Whether lane 1 carries frames now (tests, counters).
  bool lane_up() const { return lane_ == LaneState::up; }

 private:
  static constexpr std::size_t kMaxHead = kLaneBarrierBytes + wire::kHeaderBytes;

  struct OutFrame {
    std::array<std::byte, kMaxHead> head;  // [barrier] header, or a lane frame
    std::size_t head_len;
    const std::byte* payload;
    std::size_t length;
    std::uint64_t cookie;
    std::size_t done;  // bytes of head+payload written
    bool internal;     // a lane frame: no on_sent
  };
  enum class ReadState { header, payload };
  // One socket's queues and reader.
  struct Socket {
    int fd = -1;
    std::size_t prefix = 0;      // barrier bytes before each incoming header (lane 1, once up)
    std::uint32_t events = 0;    // the epoll interest now
    bool paused = false;         // the next frame waits for the other socket (a barrier), or eof
    bool eof = false;            // the peer closed this socket (at a frame boundary)
    std::uint64_t wait_for = 0;  // ... until the other socket delivered this many non-DATA frames
    Clock::time_point paused_since{};  // when a barrier held it (tcp_lane_barrier_wait_ns)
    std::deque<OutFrame> out;
    std::size_t queued_bytes = 0;   // head and payload bytes in out not yet written
    std::uint64_t ctrl_posted = 0;  // non-DATA frames posted (the peer's barriers count these)
    std::uint64_t ctrl_got = 0;     // non-DATA frames delivered
    std::uint64_t data_since_ctrl = 0;  // DATA payload bytes posted after the last non-DATA frame
    Priority prio = 0;              // the priority of the last data-carrying frame posted
    std::uint64_t lowat = kAutoLowatStart;  // its TCP_NOTSENT_LOWAT when auto
    Clock::time_point last_payload{};       // when it was posted
    ReadState rstate = ReadState::header;
    std::array<std::byte, kMaxHead> hbuf{};
    std::size_t hgot = 0;
    wire::Header cur;
    Destination dest;
    std::size_t pgot = 0;
    // Bytes read ahead in header state (one recv of up to kRxBytes takes a small frame whole,
    // and often the frames behind it), not yet handed to the reader: rx[rx_pos, rx_len).
    std::vector<std::byte> rx;
    std::size_t rx_pos = 0;
    std::size_t rx_len = 0;
    std::size_t head_size() const { return prefix + wire::kHeaderBytes; }
  };
  enum class LaneState { off, waiting, connecting, hello_sent, up, failed };

  // --- endpoint.cc: routing and lanes ---
  int route(const wire::Header& header);
  // The lane a new message of `priority` goes on: the current one, or the other one when it is
  // more urgent than the stream the current one carries (lane 0 while lane 1 is not up).
  int lane_for(Priority priority) const;
  void enqueue(Socket& s, const OutFrame& frame);
  void enqueue_lane_frame(Socket& s, const LaneFrame& frame);
  void open_lane();
  void on_lane_connected();
  // Lane set-up failed: back to one socket (not an endpoint failure).
  void drop_lane(const std::string& why);
  // The reader of `s` reached a complete head: false = paused (or failed), nothing consumed.
  bool may_deliver(Socket& s);
  // A lane frame arrived on `s`; false = the endpoint failed or the lane was dropped.
  bool handle_lane_frame(Socket& s, std::span<const std::byte> bytes);
  void frame_delivered(Socket& s);
  // A clean EOF on `s`: the endpoint fails once nothing more can arrive on either socket.
  void peer_closed(Socket& s);
  void resume_if_ready(Socket& s);

  // --- endpoint_io.cc: socket I/O ---
  void on_events(int lane, std::uint32_t events);
  // Auto TCP_NOTSENT_LOWAT of `s`: follows the largest payload among the last kRecentFrames
  // posted on either socket.
  void follow_chunk_size(Socket& s, std::uint64_t payload_bytes);
  void schedule_flush();
  void flush_all();
  void flush(Socket& s);
  void read_some(Socket& s);
  void fail(const Status& status);
  void update_interest(Socket& s);
  bool socket_has_capacity(const Socket& s) const;
  bool queue_full(const Socket& s) const;

  ProgressEngine& engine_;
  std::string desc_;
  EndpointSink* sink_ = nullptr;
  bool closed_ = false;
  bool started_ = false;
  bool flush_scheduled_ = false;
  ProgressEngine::DeferredCallId flush_call_ = 0;  // registered on the first schedule_flush()
  std::vector<std::uint64_t> sent_spare_;          // flush()'s list of sent cookies, kept for reuse
  bool was_full_ = false;
  std::uint64_t switch_after_ = 256 << 10;  // TICTAC_TCP_LANE_SWITCH
  bool broken_ = false;              // failed: close at once (no linger_close)
  scaffold::LoopLifetime lifetime_;  // deferred work and sink callbacks check it

  Socket s_[2];  // lane 0: the primary socket; lane 1: fd -1 until set up
  LaneSetup setup_;
  LaneState lane_ = LaneState::off;
  std::string peer_;           // the primary socket's peer, "ip:port"
  std::uint64_t synced1_ = 0;  // lane-1 non-DATA frames announced by the last SYNC
  bool mac_seen_ = false;      // frame MACs in use: everything stays on lane 0
  std::unordered_map<std::uint64_t, int> pins_;  // msg_id -> lane of messages under way
  int current_ = 0;                              // the lane the stream uses now
  bool polling_ = false;  // a reader is looking at the other socket (no deeper nesting)
  std::vector<std::byte> scratch_;

  bool auto_lowat_ = false;
  static constexpr std::size_t kRecentFrames = 8;
  std::uint64_t recent_[kRecentFrames] = {};
  std::size_t recent_at_ = 0;
};

}  // namespace tictac::transport::tcp
