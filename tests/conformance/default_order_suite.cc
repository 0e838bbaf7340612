// Scheduler-dictated order at DEFAULT settings (issue 13), for every backend of the conformance
// suite: mixed eager-sized and multi-chunk messages, their receives posted first (as a parameter
// server's workers do), the sends posted in REVERSE priority order in one batch. The receiver
// must see them complete in priority order. Counter-checks run in the same test: with receive
// adverts off (TICTAC_ADVERTS=0) the small eager messages overtake the large ones that wait for
// READY, and with priorities off (TICTAC_PRIORITY=0) the order is the posting order.
#include <gtest/gtest.h>

#include <iostream>
#include <mutex>
#include <vector>

#include "tests/conformance/conformance_fixture.h"

namespace tictac::transport::testing {
namespace {

constexpr int kMessages = 12;

std::size_t message_bytes(int i) {
  // Even: 2 MiB + a little (multi-chunk rendezvous at the default 256 KiB eager pool);
  // odd: 1-2 KiB (eager-sized).
  return i % 2 == 0 ? (std::size_t{2} << 20) + 333 * static_cast<std::size_t>(i) : 1000 + 50 * static_cast<std::size_t>(i);
}

// Runs one round and returns the order in which the receives completed (message index = its
// priority: 0 is the most urgent).
std::vector<int> arrival_order(const BackendKind& kind, const std::shared_ptr<loopback::Fabric>& fabric,
                               const TransportConfig& config) {
  auto sender = make_context(kind, fabric, {"sender", ProgressEngine::Mode::thread, config});
  auto receiver = make_context(kind, fabric, {"receiver", ProgressEngine::Mode::thread, config});
  EXPECT_TRUE(sender && receiver);
  if (!sender || !receiver) return {};
  PeerId sr = 0, rs = 0;
  EXPECT_TRUE(connect_pair(*sender, *receiver, kind.listen_address, &sr, &rs));
  std::vector<std::unique_ptr<Buffer>> src, dst;
  std::mutex m;
  std::vector<int> arrival;
  Recorder rec;
  for (int i = 0; i < kMessages; ++i) {
    src.push_back(std::make_unique<Buffer>(message_bytes(i), 700 + i, true));
    dst.push_back(std::make_unique<Buffer>(message_bytes(i)));
  }
  for (int i = 0; i < kMessages; ++i) {
    Callback record = rec.make("r");
    receiver->recv(rs, 100 + i, dst[i]->region, 0, message_bytes(i), [&, i, record](const Status& s, std::uint64_t b, PeerId p) {
      {
        std::lock_guard<std::mutex> lock(m);
        arrival.push_back(i);
      }
      record(s, b, p);
    });
  }
  // The receiver tells the sender it is ready (as a PS worker does); its adverts were queued on
  // the control lane before this message's ANNOUNCE, so the sender has them when it gets it.
  Buffer flag(1, 5, true), flag_in(1);
  receiver->send(rs, 1, flag.region, 0, 1, 0, rec.make("flag-sent"));
  sender->recv(sr, 1, flag_in.region, 0, 1, rec.make("flag"));
  EXPECT_TRUE(rec.wait_label("flag"));
  {
    Context::Batch batch(*sender);
    for (int i = kMessages - 1; i >= 0; --i) {
      sender->send(sr, 100 + i, src[i]->region, 0, message_bytes(i), i, rec.make("s"));
    }
  }
  EXPECT_TRUE(rec.wait(2 * kMessages + 2));
  for (const Completion& c : rec.all()) EXPECT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), dst[i]->bytes.size(), 700 + i)) << "message " << i;
  }
  sender->close();
  receiver->close();
  sender->join();
  receiver->join();
  std::lock_guard<std::mutex> lock(m);
  return arrival;
}

std::string show(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + " ";
  return s;
}

TEST_P(Conformance, PriorityOrderAtDefaultSettingsWithReceivesPostedFirst) {
  const TransportConfig defaults = TransportConfig::defaults();  // auto chunk and window, eager 256 KiB, adverts on
  std::vector<int> expect(kMessages);
  for (int i = 0; i < kMessages; ++i) expect[i] = i;
  const std::vector<int> got = arrival_order(GetParam(), fabric_, defaults);
  EXPECT_EQ(got, expect) << "arrival: " << show(got);

  // Counter-check 1: without adverts the eager-sized messages (odd, less urgent) overtake the
  // large ones, which wait for READY. This proves the order above comes from the adverts. (How
  // many overtake depends on how fast READY comes back, so up to 30 rounds are run, stopping at
  // the first inversion, and one is required. Before batched credit the 4-slot verbs ring kept
  // the order by luck in ~60% of rounds under ASan, which made 5 rounds a flaky check; see
  // below for that ring since.)
  TransportConfig no_adverts = defaults;
  no_adverts.max_adverts = 0;
  std::vector<int> without;
  const bool ring_paced = GetParam().name == "verbs_fake_small_ring";
  for (int round = 0; round < (ring_paced ? 3 : 30); ++round) {
    without = arrival_order(GetParam(), fabric_, no_adverts);
    ASSERT_EQ(without.size(), expect.size());
    if (without != expect) break;
  }
  // Exception, named: the 4-slot verbs ring (verbs_fake_small_ring). Since credit is batched
  // (wire version 3) no CREDIT frame queues ahead of READY on the reverse ring, and the ring's own
  // back-pressure then holds the sender until READY of the most urgent message is back: the
  // order held in every round measured, without adverts too. Counter-check 2 (FIFO) still
  // proves the order comes from the SendQueue there; every other backend must invert here.
  if (ring_paced && without == expect) {
    std::cout << "[ NOTE     ] " << GetParam().name
              << ": order held without adverts (ring back-pressure paces READY); see the comment\n";
  } else {
    EXPECT_NE(without, expect) << "order held without adverts in 30 rounds: the test proves nothing";
  }
  // ... and what overtakes is an eager-sized message (odd index), not a large one.
  std::size_t first = 0;
  while (first < without.size() && without[first] == static_cast<int>(first)) ++first;
  if (first < without.size()) {
    EXPECT_EQ(without[first] % 2, 1) << "the first message out of order should be eager-sized: " << show(without);
  }

  // Counter-check 2: with priorities off, the posting order (reverse priority) wins.
  TransportConfig fifo = defaults;
  fifo.enforce_priority = false;
  std::vector<int> reversed(expect.rbegin(), expect.rend());
  const std::vector<int> posting = arrival_order(GetParam(), fabric_, fifo);
  EXPECT_EQ(posting, reversed) << "arrival: " << show(posting);
}

}  // namespace
}  // namespace tictac::transport::testing
