// TCP lanes (transport/tcp/lanes.h): the lane frames, the lane coming up between two contexts,
// urgent messages taking it during a stream (with TICTAC_TCP_LANES=0 as the counter-check) only
// past the switch threshold (TICTAC_TCP_LANE_SWITCH), mixed
// traffic in both directions staying byte-exact and matched in order per tag, and a peer without
// lanes. Lanes are opt-in (TICTAC_TCP_LANES=1); the tests ask for them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "transport/context.h"
#include "transport/counters.h"
#include "tests/unit/transport/tcp_pair.h"
#include "transport/tcp/lanes.h"

namespace tictac::transport {
namespace {

using namespace std::chrono_literals;
using tcp::LaneFrame;

TEST(TcpLaneFrames, RoundTripAndRejectMalformed) {
  for (const auto kind : {LaneFrame::Kind::hello, LaneFrame::Kind::ok, LaneFrame::Kind::sync}) {
    const std::uint64_t value = kind == LaneFrame::Kind::hello  ? 40000
                                : kind == LaneFrame::Kind::sync ? 77
                                                                : 0;
    const wire::HeaderBytes b = tcp::encode_lane_frame(LaneFrame{kind, value});
    EXPECT_TRUE(tcp::is_lane_frame(b));
    Result<LaneFrame> f = tcp::decode_lane_frame(b);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(f->kind, kind);
    EXPECT_EQ(f->value, value);
  }
  // A wire header is never taken for a lane frame.
  EXPECT_FALSE(tcp::is_lane_frame(wire::encode(wire::Header{})));
  struct Bad {
    std::size_t at;
    std::byte value;
    const char* says;
  };
  for (const Bad& bad : {Bad{0, std::byte{'X'}, "bad magic"}, Bad{4, std::byte{9}, "version 9"},
                         Bad{5, std::byte{7}, "unknown kind 7"}, Bad{6, std::byte{1}, "reserved"},
                         Bad{40, std::byte{1}, "reserved"}}) {
    wire::HeaderBytes b = tcp::encode_lane_frame(LaneFrame{LaneFrame::Kind::sync, 3});
    b[bad.at] = bad.value;
    Result<LaneFrame> f = tcp::decode_lane_frame(b);
    ASSERT_FALSE(f.ok()) << bad.says;
    EXPECT_EQ(f.status().code(), StatusCode::protocol_error);
    EXPECT_NE(f.status().message().find(bad.says), std::string::npos) << f.status().message();
  }
  Result<LaneFrame> port0 =
      tcp::decode_lane_frame(tcp::encode_lane_frame(LaneFrame{LaneFrame::Kind::hello, 0}));
  EXPECT_FALSE(port0.ok());
  const wire::HeaderBytes whole = tcp::encode_lane_frame(LaneFrame{});
  EXPECT_FALSE(tcp::decode_lane_frame(std::span<const std::byte>(whole.data(), 20)).ok());
}

using Pair = testing::TcpPair;

void set_lanes(const char* value) {
  if (value != nullptr) {
    ::setenv("TICTAC_TCP_LANES", value, 1);
  } else {
    ::unsetenv("TICTAC_TCP_LANES");
  }
}

// b listens, a connects. `lanes_a` / `lanes_b`: TICTAC_TCP_LANES for each (read at create;
// nullptr = unset, the default).
Pair connect_pair(const char* lanes_a = "1", const char* lanes_b = "1") {
  Pair p = testing::connect_tcp_pair([&] { set_lanes(lanes_a); }, [&] { set_lanes(lanes_b); });
  ::unsetenv("TICTAC_TCP_LANES");
  return p;
}

std::uint64_t lanes_up() { return transport_counters().tcp_lanes_up.load(); }
std::uint64_t lane1_frames() { return transport_counters().tcp_lane1_frames.load(); }

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// One message each way, so that the handshake is surely over.
void ping(Pair& p) {
  std::vector<std::byte> s(16, std::byte{1}), d(16);
  auto rs = MemoryRegion::host(s.data(), s.size());
  auto rd = MemoryRegion::host(d.data(), d.size());
  std::promise<Status> got, sent;
  p.b->recv(p.from, 99, *rd, 0, 16,
            [&](const Status& st, std::uint64_t, PeerId) { got.set_value(st); });
  p.a->send(p.to, 99, *rs, 0, 16, 0,
            [&](const Status& st, std::uint64_t, PeerId) { sent.set_value(st); });
  EXPECT_TRUE(got.get_future().get().ok());
  EXPECT_TRUE(sent.get_future().get().ok());
}

TEST(TcpLanes, TheSecondSocketComesUpWhenAskedForAndNotByDefault) {
  const std::uint64_t before = lanes_up();
  {
    Pair p = connect_pair();
    ping(p);
    EXPECT_TRUE(wait_for([&] { return lanes_up() >= before + 2; }, 5s))
        << "lanes up on " << lanes_up() - before << " of the 2 endpoints";
  }
  for (const char* off : {static_cast<const char*>(nullptr), "0"}) {
    const std::uint64_t off_before = lanes_up();
    Pair p = connect_pair(off, off);
    ping(p);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(lanes_up(), off_before)
        << "counter-check: a lane with TICTAC_TCP_LANES=" << (off ? off : "(unset)");
  }
}

// A side without lanes (an older build behaves the same: it closes the lane connection) leaves
// the connection on one socket, working.
TEST(TcpLanes, APeerWithoutLanesKeepsOneSocketAndWorks) {
  for (const auto& [a, b] : {std::pair{"1", "0"}, std::pair{"0", "1"}}) {
    const std::uint64_t before = lanes_up();
    Pair p = connect_pair(a, b);
    ping(p);
    std::this_thread::sleep_for(100ms);
    ping(p);
    EXPECT_EQ(lanes_up(), before) << "lanes " << a << "/" << b;
  }
}

// A 64 KiB priority-0 message posted while 128 MiB of priority 5 stream on the same connection:
// it goes on lane 1 and lands first. Counter-check: with TICTAC_TCP_LANES=0 nothing goes on a
// lane (and it still lands first: that is the send queue's order, not the lane's). `lane_switch`:
// TICTAC_TCP_LANE_SWITCH for both sides (nullptr = the default).
std::uint64_t urgent_during_stream(const char* lanes, const char* lane_switch = nullptr) {
  if (lane_switch != nullptr) ::setenv("TICTAC_TCP_LANE_SWITCH", lane_switch, 1);
  const std::uint64_t up_before = lanes_up();
  Pair p = connect_pair(lanes, lanes);
  ::unsetenv("TICTAC_TCP_LANE_SWITCH");
  ping(p);
  if (std::string(lanes) == "1") {
    EXPECT_TRUE(wait_for([&] { return lanes_up() >= up_before + 2; }, 5s));
  }
  std::this_thread::sleep_for(20ms);
  const std::size_t big = 128 << 20, small = 64 << 10;
  std::vector<std::byte> src(big), dst(big), src2(small, std::byte{9}), dst2(small);
  for (std::size_t i = 0; i < big; i += 4096) src[i] = static_cast<std::byte>(i >> 12);
  auto rs = MemoryRegion::host(src.data(), big);
  auto rd = MemoryRegion::host(dst.data(), big);
  auto rs2 = MemoryRegion::host(src2.data(), small);
  auto rd2 = MemoryRegion::host(dst2.data(), small);
  std::promise<Status> big_got, small_got, big_sent, small_sent;
  std::atomic<bool> big_done{false};
  bool small_before_big = false;
  p.b->recv(p.from, 1, *rd, 0, big, [&](const Status& st, std::uint64_t, PeerId) {
    big_done = true;
    big_got.set_value(st);
  });
  p.b->recv(p.from, 2, *rd2, 0, small, [&](const Status& st, std::uint64_t, PeerId) {
    small_before_big = !big_done;
    small_got.set_value(st);
  });
  std::this_thread::sleep_for(20ms);  // both receives advertised
  const std::uint64_t frames = lane1_frames();
  p.a->send(p.to, 1, *rs, 0, big, 5,
            [&](const Status& st, std::uint64_t, PeerId) { big_sent.set_value(st); });
  std::this_thread::sleep_for(5ms);  // the stream is under way
  p.a->send(p.to, 2, *rs2, 0, small, 0,
            [&](const Status& st, std::uint64_t, PeerId) { small_sent.set_value(st); });
  EXPECT_TRUE(small_got.get_future().get().ok());
  EXPECT_TRUE(big_got.get_future().get().ok());
  EXPECT_TRUE(big_sent.get_future().get().ok());
  EXPECT_TRUE(small_sent.get_future().get().ok());
  EXPECT_TRUE(small_before_big) << "the stream ended before the urgent message was sent";
  EXPECT_EQ(dst, src);
  EXPECT_EQ(dst2, src2);
  return lane1_frames() - frames;
}

TEST(TcpLanes, AnUrgentMessageDuringAStreamTakesLaneOne) {
  EXPECT_GT(urgent_during_stream("1"), 0u) << "the urgent message did not use lane 1";
  EXPECT_EQ(urgent_during_stream("0"), 0u) << "counter-check: a lane frame with lanes off";
}

// The switch rule: the urgent message skips the stream's bytes only where enough of them follow
// the lane's last control frame (the 128 MiB message's ANNOUNCE here). With a threshold above the
// stream it stays on lane 0; the default (256 KiB, in the test above) and 0 switch.
TEST(TcpLanes, AnUrgentMessageSwitchesOnlyPastTheSwitchThreshold) {
  EXPECT_EQ(urgent_during_stream("1", "1G"), 0u) << "switched with fewer bytes to skip than asked";
  EXPECT_GT(urgent_during_stream("1", "0"), 0u) << "counter-check: no switch with threshold 0";
}

// Both directions at once: 32 MiB, then messages of 0 B .. 1.5 MiB (inline, eager, rendezvous,
// many chunks)
// with tags 0..7 (tag t at priority t % 4, so every level pre-empts the others), posted from two
// threads, receives posted first in send order. Every receive gets its own message byte-exact
// (the contents differ per message, so a message matched out of its tag's order fails). Some
// frames must have gone on lane 1, and the barriers must have held something, or this test did
// not exercise what it is for.
TEST(TcpLanes, MixedTrafficBothWaysIsExactAndMatchedInOrderPerTag) {
  // Switch on every more urgent message (not only past 256 KiB of data since the last control
  // frame): the most lane changes, the most barriers.
  ::setenv("TICTAC_TCP_LANE_SWITCH", "0", 1);
  const std::uint64_t up_before = lanes_up();
  Pair p = connect_pair();
  ::unsetenv("TICTAC_TCP_LANE_SWITCH");
  ping(p);
  ASSERT_TRUE(wait_for([&] { return lanes_up() >= up_before + 2; }, 5s));
  const std::uint64_t frames = lane1_frames();
  const std::uint64_t switches = transport_counters().tcp_lane_switches.load();
  constexpr int kPerDir = 400;
  struct Msg {
    Tag tag;
    std::size_t bytes;
    std::vector<std::byte> src, dst;
  };
  std::mt19937 rng(7);
  auto make = [&] {
    std::vector<Msg> out(kPerDir);
    for (int i = 0; i < kPerDir; ++i) {
      Msg& m = out[i];
      m.tag = rng() % 8;
      const int shape = static_cast<int>(rng() % 4);
      m.bytes = shape == 0   ? rng() % 100
                : shape == 1 ? rng() % (64 << 10)
                : shape == 2 ? rng() % (300 << 10)
                             : rng() % (1536 << 10);
      m.src.assign(m.bytes + 1, std::byte{0});  // + 1: a region even for 0 bytes
      for (std::size_t k = 0; k < m.bytes; ++k)
        m.src[k] = static_cast<std::byte>((k * 31 + i * 7 + m.tag) & 0xff);
      m.dst.assign(m.bytes + 1, std::byte{0});
    }
    return out;
  };
  std::vector<Msg> ab = make(), ba = make();
  // Each direction opens with 32 MiB at the least urgent level, and the rest follows once it
  // streams: more urgent messages then surely arrive mid-stream and switch lanes, however slowly
  // this build runs (under TSan everything might otherwise be queued before anything is sent,
  // and leave in strict priority order on one lane).
  for (std::vector<Msg>* msgs : {&ab, &ba}) {
    Msg& first = msgs->front();
    first.tag = 3;
    first.bytes = 32 << 20;
    first.src.assign(first.bytes + 1, std::byte{0});
    for (std::size_t k = 0; k < first.bytes; k += 97) first.src[k] = static_cast<std::byte>(k);
    first.dst.assign(first.bytes + 1, std::byte{0});
  }
  std::vector<MemoryRegion> regions, sends_ab, sends_ba;  // alive until the end
  regions.reserve(2 * kPerDir);
  sends_ab.reserve(kPerDir);
  sends_ba.reserve(kPerDir);
  std::atomic<int> done{0};
  std::atomic<int> errors{0};
  // Receives first, in send order per tag (the transport matches one tag's messages in order).
  auto post_recvs = [&](Context& ctx, PeerId from, std::vector<Msg>& msgs) {
    for (int i = 0; i < kPerDir; ++i) {
      Msg& m = msgs[i];
      regions.push_back(std::move(MemoryRegion::host(m.dst.data(), m.dst.size())).value());
      ctx.recv(from, m.tag, regions.back(), 0, m.bytes,
               [&](const Status& st, std::uint64_t, PeerId) {
                 if (!st.ok()) ++errors;
                 ++done;
               });
    }
  };
  post_recvs(*p.b, p.from, ab);
  post_recvs(*p.a, p.to, ba);
  auto send_all = [&](Context& ctx, PeerId to, std::vector<Msg>& msgs,
                      std::vector<MemoryRegion>& keep) {
    for (int i = 0; i < kPerDir; ++i) {
      Msg& m = msgs[i];
      keep.push_back(std::move(MemoryRegion::host(m.src.data(), m.src.size())).value());
      ctx.send(to, m.tag, keep.back(), 0, m.bytes, static_cast<Priority>(m.tag % 4),
               [&](const Status& st, std::uint64_t, PeerId) {
                 if (!st.ok()) ++errors;
                 ++done;
               });
      if (i == 0) std::this_thread::sleep_for(10ms);       // the 32 MiB are under way
      if (i % 50 == 0) std::this_thread::sleep_for(1ms);  // new levels arrive mid-stream
    }
  };
  std::thread t1([&] { send_all(*p.a, p.to, ab, sends_ab); });
  std::thread t2([&] { send_all(*p.b, p.from, ba, sends_ba); });
  t1.join();
  t2.join();
  ASSERT_TRUE(wait_for([&] { return done.load() == 4 * kPerDir; }, 60s))
      << done.load() << " of " << 4 * kPerDir;
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < kPerDir; ++i) {
    EXPECT_EQ(ab[i].dst, ab[i].src) << "a->b message " << i;
    EXPECT_EQ(ba[i].dst, ba[i].src) << "b->a message " << i;
  }
  EXPECT_GT(lane1_frames() - frames, 0u) << "no frame took lane 1: the test exercised nothing";
  EXPECT_GT(transport_counters().tcp_lane_switches.load() - switches, 0u);
  std::printf("lane 1 frames %llu; process counters: %s\n",
              static_cast<unsigned long long>(lane1_frames() - frames),
              describe_counters(transport_counters()).c_str());
}

}  // namespace
}  // namespace tictac::transport
