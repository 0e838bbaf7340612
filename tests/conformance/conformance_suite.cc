// The transport conformance suite, written once for every backend. The tests here are
// instantiated per backend by the *_conformance_test.cc files (tcp and loopback in
// transport_conformance_test.cc, ucx and the fake-verbs backend in their own executables).
// Peers are Contexts in this process.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <numeric>
#include <random>

#include "tests/conformance/conformance_fixture.h"

namespace tictac::transport::testing {
namespace {

TEST_P(Conformance, HandshakeExchangesNames) {
  make_pair();
  EXPECT_EQ(*a_->peer_name(ab_), "bob");
  EXPECT_EQ(*b_->peer_name(ba_), "alice");
  EXPECT_FALSE(a_->peer_name(12345).ok());
}

TEST_P(Conformance, SizesFromZeroToLargeAreByteExact) {
  // 256 MiB as the issue asks; chunks of 1 MiB keep the frame count reasonable.
  TransportConfig config = small_config();
  config.chunk_bytes = 1 << 20;
  make_pair(config);
  const std::vector<std::size_t> sizes = {0,           1,           7,           4096,
                                          (1 << 20) - 1, 1 << 20,   (1 << 20) + 1, (3 << 20) + 5,
                                          std::size_t{256} << 20};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t n = sizes[i];
    Buffer src(n, i + 1, true);
    Buffer dst(n + 16);  // larger than needed: only n bytes may be written
    std::fill(dst.bytes.begin(), dst.bytes.end(), std::byte{0xAB});
    Recorder rec;
    b_->recv(ba_, 100 + i, dst.region, 0, n + 16, rec.make("recv"));
    a_->send(ab_, 100 + i, src.region, 0, n, 0, rec.make("send"));
    ASSERT_TRUE(rec.wait(2)) << "size " << n;
    Completion r = rec.find("recv"), s = rec.find("send");
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_TRUE(s.status.ok()) << s.status.to_string();
    EXPECT_EQ(r.bytes, n);
    EXPECT_EQ(s.bytes, n);
    EXPECT_EQ(r.source, ba_);
    EXPECT_TRUE(same_bytes(dst.bytes.data(), n, i + 1)) << "payload differs at size " << n;
    for (std::size_t k = n; k < n + 16; ++k) ASSERT_EQ(dst.bytes[k], std::byte{0xAB}) << "wrote past the message";
  }
}

TEST_P(Conformance, OffsetsWithinRegions) {
  make_pair();
  Buffer src(1000, 5, true);
  Buffer dst(1000);
  Recorder rec;
  b_->recv(ba_, 1, dst.region, 300, 500, rec.make("recv"));
  a_->send(ab_, 1, src.region, 100, 400, 0, rec.make("send"));
  ASSERT_TRUE(rec.wait(2));
  ASSERT_TRUE(rec.find("recv").status.ok());
  EXPECT_EQ(rec.find("recv").bytes, 400u);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + 300, src.bytes.data() + 100, 400), 0);
  EXPECT_EQ(dst.bytes[299], std::byte{0});
  EXPECT_EQ(dst.bytes[700], std::byte{0});
}

TEST_P(Conformance, OutOfOrderReceivesMatchByTag) {
  make_pair();
  // Mix of eager-sized and rendezvous-sized messages, all sent before any receive is posted.
  const int n = 12;
  std::vector<std::unique_ptr<Buffer>> src, dst;
  Recorder sends, recvs;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = (i % 3 == 0) ? 300 << 10 : 1000 + 17 * i;
    src.push_back(std::make_unique<Buffer>(size, 1000 + i, true));
    dst.push_back(std::make_unique<Buffer>(size));
    a_->send(ab_, 50 + i, src[i]->region, 0, size, i % 4, sends.make(L("s", i)));
  }
  // Eager messages completed on the sender without any receive: they wait in the eager pool.
  for (int i = n - 1; i >= 0; --i) {
    b_->recv(ba_, 50 + i, dst[i]->region, 0, dst[i]->bytes.size(), recvs.make(L("r", i)));
  }
  ASSERT_TRUE(sends.wait(n));
  ASSERT_TRUE(recvs.wait(n));
  for (int i = 0; i < n; ++i) {
    Completion r = recvs.find(L("r", i));
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), dst[i]->bytes.size(), 1000 + i)) << "message " << i;
    EXPECT_TRUE(sends.find(L("s", i)).status.ok());
  }
}

TEST_P(Conformance, EqualKeysAreFirstInFirstOut) {
  make_pair();
  const int n = 30;
  std::vector<std::unique_ptr<Buffer>> src, dst;
  Recorder rec;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = (i % 5 == 0) ? 200 << 10 : 64 + i;
    src.push_back(std::make_unique<Buffer>(size, 7000 + i, true));
    dst.push_back(std::make_unique<Buffer>(200 << 10));
  }
  // Half the receives before the sends, half after.
  for (int i = 0; i < n / 2; ++i) b_->recv(ba_, 9, dst[i]->region, 0, 200 << 10, rec.make(L("r", i)));
  for (int i = 0; i < n; ++i) {
    a_->send(ab_, 9, src[i]->region, 0, src[i]->bytes.size(), /*priority=*/0, rec.make(L("s", i)));
  }
  for (int i = n / 2; i < n; ++i) b_->recv(ba_, 9, dst[i]->region, 0, 200 << 10, rec.make(L("r", i)));
  ASSERT_TRUE(rec.wait(2 * n));
  for (int i = 0; i < n; ++i) {
    Completion r = rec.find(L("r", i));
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_EQ(r.bytes, src[i]->bytes.size()) << "receive " << i << " got another message";
    EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), r.bytes, 7000 + i));
  }
}

TEST_P(Conformance, AnySourceReceive) {
  make_pair();
  auto c = make_context(GetParam(), fabric_, {"carol"});
  ASSERT_TRUE(c);
  PeerId cb = 0, bc = 0;
  ASSERT_TRUE(connect_pair(*c, *b_, GetParam().listen_address, &cb, &bc));
  Buffer from_a(5000, 1, true), from_c(6000, 2, true);
  Buffer d1(8000), d2(8000);
  Recorder rec;
  b_->recv(kAnyPeer, 3, d1.region, 0, 8000, rec.make("r1"));
  b_->recv(kAnyPeer, 3, d2.region, 0, 8000, rec.make("r2"));
  a_->send(ab_, 3, from_a.region, 0, 5000, 0, rec.make("sa"));
  c->send(cb, 3, from_c.region, 0, 6000, 0, rec.make("sc"));
  ASSERT_TRUE(rec.wait(4));
  std::map<PeerId, std::pair<std::uint64_t, Buffer*>> got;
  for (auto [label, buf] : {std::pair{"r1", &d1}, std::pair{"r2", &d2}}) {
    Completion r = rec.find(label);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    got[r.source] = {r.bytes, buf};
  }
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got.count(ba_) && got.count(bc));
  EXPECT_EQ(got[ba_].first, 5000u);
  EXPECT_TRUE(same_bytes(got[ba_].second->bytes.data(), 5000, 1));
  EXPECT_EQ(got[bc].first, 6000u);
  EXPECT_TRUE(same_bytes(got[bc].second->bytes.data(), 6000, 2));
}

TEST_P(Conformance, ManyConcurrentTransfersBothWays) {
  make_pair();
  std::mt19937 rng(42);
  const int n = 150;
  struct Msg {
    std::unique_ptr<Buffer> src, dst;
    Tag tag;
  };
  std::vector<Msg> ab(n), ba(n);
  Recorder rec;
  for (int i = 0; i < n; ++i) {
    for (auto* list : {&ab, &ba}) {
      const std::size_t size = rng() % 3 == 0 ? rng() % (400 << 10) : rng() % 3000;
      const std::uint64_t seed = (list == &ab ? 1 : 2) * 100000 + i;
      (*list)[i] = Msg{std::make_unique<Buffer>(size, seed, true), std::make_unique<Buffer>(size), Tag(i)};
    }
  }
  // Submit from several threads at once.
  std::thread t1([&] {
    for (int i = 0; i < n; ++i) a_->send(ab_, i, ab[i].src->region, 0, ab[i].src->bytes.size(), rng() % 5, rec.make("as"));
  });
  std::thread t2([&] {
    for (int i = 0; i < n; ++i) b_->send(ba_, i, ba[i].src->region, 0, ba[i].src->bytes.size(), i % 3, rec.make("bs"));
  });
  std::thread t3([&] {
    for (int i = n - 1; i >= 0; --i) b_->recv(ba_, i, ab[i].dst->region, 0, ab[i].dst->bytes.size(), rec.make(L("br", i)));
  });
  std::thread t4([&] {
    for (int i = 0; i < n; ++i) a_->recv(kAnyPeer, i, ba[i].dst->region, 0, ba[i].dst->bytes.size(), rec.make(L("ar", i)));
  });
  t1.join();
  t2.join();
  t3.join();
  t4.join();
  ASSERT_TRUE(rec.wait(4 * n));
  for (const Completion& c : rec.all()) ASSERT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(same_bytes(ab[i].dst->bytes.data(), ab[i].dst->bytes.size(), 100000 + i)) << "a->b " << i;
    EXPECT_TRUE(same_bytes(ba[i].dst->bytes.data(), ba[i].dst->bytes.size(), 200000 + i)) << "b->a " << i;
  }
}

// With a window of one chunk, every message eligible at once and the sender's loop paused while
// they are submitted, the receiver must see the messages complete in priority order (ties in
// submission order). With priorities off it must see submission order: this proves the check
// can fail.
void priority_order_case(const BackendKind& kind, bool enforce, std::shared_ptr<loopback::Fabric> fabric) {
  TransportConfig config = small_config();
  config.chunk_bytes = 4096;
  config.window_chunks = 1;
  config.eager_bytes = 4 << 20;  // every message eager: eligible the moment it is submitted
  config.enforce_priority = enforce;
  auto sender = make_context(kind, fabric, {"sender", ProgressEngine::Mode::manual, config});
  auto receiver = make_context(kind, fabric, {"receiver", ProgressEngine::Mode::thread, config});
  ASSERT_TRUE(sender && receiver);
  PeerId sr = 0, rs = 0;
  ASSERT_TRUE(connect_pair(*sender, *receiver, kind.listen_address, &sr, &rs));

  const int n = 24;
  std::vector<Priority> prio(n);
  for (int i = 0; i < n; ++i) prio[i] = (i * 7) % 5 - 2;  // -2..2 with ties, shuffled
  std::vector<std::unique_ptr<Buffer>> src, dst;
  std::mutex m;
  std::vector<int> arrival;
  Recorder rec;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = 3 * 4096 + 100 * i;  // several chunks each
    src.push_back(std::make_unique<Buffer>(size, 300 + i, true));
    dst.push_back(std::make_unique<Buffer>(size));
    Callback record = rec.make("r");
    receiver->recv(rs, i, dst[i]->region, 0, size, [&, i, record](const Status& s, std::uint64_t b, PeerId p) {
      {
        std::lock_guard<std::mutex> lock(m);
        arrival.push_back(i);
      }
      record(s, b, p);
    });
  }
  // Barrier: the receiver's loop has processed every recv above (its inbox is FIFO).
  ASSERT_TRUE(receiver->peer_name(rs).ok());
  for (int i = 0; i < n; ++i) sender->send(sr, i, src[i]->region, 0, src[i]->bytes.size(), prio[i], rec.make("s"));
  // Drive the sender until all sends and receives completed (bounded).
  const auto deadline = Clock::now() + kWait;
  while (rec.count() < 2u * n && Clock::now() < deadline) sender->progress(std::chrono::milliseconds(1));
  ASSERT_EQ(rec.count(), 2u * n);
  for (const Completion& c : rec.all()) ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  std::vector<int> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  if (enforce) {
    std::stable_sort(expect.begin(), expect.end(), [&](int x, int y) { return prio[x] < prio[y]; });
  }
  EXPECT_EQ(arrival, expect);
  for (int i = 0; i < n; ++i) EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), dst[i]->bytes.size(), 300 + i));
  sender->close();
  sender->join();  // manual mode: join drives the loop itself
}

TEST_P(Conformance, PriorityOrderObservedAtReceiverWithOneChunkWindow) {
  priority_order_case(GetParam(), /*enforce=*/true, fabric_);
}

TEST_P(Conformance, FifoModeKeepsSubmissionOrder) {
  priority_order_case(GetParam(), /*enforce=*/false, fabric_);
}

TEST_P(Conformance, CallbacksExactlyOnceAndNeverInline) {
  make_pair();
  // Per thread: a callback run inline would run on the submitting thread while this is set.
  static thread_local bool inside_submit = false;
  std::atomic<int> inline_calls{0};
  Recorder rec;
  std::vector<std::unique_ptr<Buffer>> bufs;
  auto guard = [&](Callback inner) {
    return [&, inner](const Status& s, std::uint64_t n, PeerId p) {
      if (inside_submit) inline_calls.fetch_add(1);
      inner(s, n, p);
    };
  };
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    bufs.push_back(std::make_unique<Buffer>(i * 1000, i, true));
    bufs.push_back(std::make_unique<Buffer>(i * 1000));
  }
  const std::thread::id me = std::this_thread::get_id();
  for (int i = 0; i < n; ++i) {
    inside_submit = true;
    b_->recv(ba_, i, bufs[2 * i + 1]->region, 0, i * 1000, guard(rec.make(L("r", i))));
    a_->send(ab_, i, bufs[2 * i]->region, 0, i * 1000, 0, guard(rec.make(L("s", i))));
    // Requests that fail validation also complete asynchronously.
    a_->send(987654, i, bufs[2 * i]->region, 0, 0, 0, guard(rec.make(L("bad", i))));
    inside_submit = false;
  }
  ASSERT_TRUE(rec.wait(3 * n));
  // Give stray duplicate completions a chance to show up: a close flushes the loops.
  a_->close();
  b_->close();
  a_->join();
  b_->join();
  EXPECT_EQ(inline_calls.load(), 0);
  EXPECT_EQ(rec.count(), 3u * n);
  for (int i = 0; i < n; ++i) {
    for (const char* p : {"r", "s", "bad"}) EXPECT_EQ(rec.count(L(p, i)), 1u) << p << i;
    EXPECT_EQ(rec.find(L("bad", i)).status.code(), StatusCode::invalid_argument);
  }
  for (const Completion& c : rec.all()) EXPECT_NE(c.thread, me);
}

TEST_P(Conformance, ManualModeRunsCallbacksOnlyInsideProgress) {
  TransportConfig config = small_config();
  auto a = make_context(GetParam(), fabric_, {"m1", ProgressEngine::Mode::manual, config});
  auto b = make_context(GetParam(), fabric_, {"m2", ProgressEngine::Mode::thread, config});
  ASSERT_TRUE(a && b);
  PeerId ab = 0, ba = 0;
  ASSERT_TRUE(connect_pair(*a, *b, GetParam().listen_address, &ab, &ba));
  Buffer src(10, 1, true), dst(10);
  Recorder rec;
  b->recv(ba, 1, dst.region, 0, 10, rec.make("r"));
  a->send(ab, 1, src.region, 0, 10, 0, rec.make("s"));
  a->send(ab, 1, src.region, 5, 10, 0, rec.make("bad-range"));
  EXPECT_EQ(rec.count("s"), 0u);
  EXPECT_EQ(rec.count("bad-range"), 0u);
  const auto deadline = Clock::now() + kWait;
  while (rec.count() < 3 && Clock::now() < deadline) a->progress(std::chrono::milliseconds(1));
  ASSERT_EQ(rec.count(), 3u);
  EXPECT_TRUE(rec.find("s").status.ok());
  EXPECT_EQ(rec.find("bad-range").status.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(same_bytes(dst.bytes.data(), 10, 1));
}

// Two blocking calls in a row: when the second returns, the loop has finished the iteration that
// ran everything posted before the first, including its deferred sends.
void settle(Context& ctx, PeerId peer) {
  ASSERT_TRUE(ctx.peer_name(peer).ok());
  ASSERT_TRUE(ctx.peer_name(peer).ok());
}

// a -> b small eager message and its receive; returns when both completed: b has then processed
// everything a sent before.
void marker(Context& a, PeerId ab, Context& b, PeerId ba, Tag tag) {
  Buffer src(8, 1, true), dst(8);
  Recorder rec;
  b.recv(ba, tag, dst.region, 0, 8, rec.make("r"));
  a.send(ab, tag, src.region, 0, 8, 0, rec.make("s"));
  ASSERT_TRUE(rec.wait(2));
  ASSERT_TRUE(rec.find("r").status.ok()) << rec.find("r").status.to_string();
}

TEST_P(Conformance, CancelUnmatchedReceiveAndAnnouncedSend) {
  make_pair();
  Buffer big(1 << 20, 9, true), small(100, 8, true), dst(1 << 20);
  Recorder rec;
  const RequestId r = b_->recv(ba_, 1, dst.region, 0, dst.bytes.size(), rec.make("recv"));
  b_->cancel(r);
  ASSERT_TRUE(rec.wait(1));
  EXPECT_EQ(rec.find("recv").status.code(), StatusCode::cancelled);

  // A rendezvous send nobody receives, announced to the peer, then cancelled (ABORT): the
  // receiver must forget it and match the next message with that tag instead.
  const RequestId s = a_->send(ab_, 2, big.region, 0, big.bytes.size(), 0, rec.make("send-big"));
  settle(*a_, ab_);
  a_->cancel(s);
  ASSERT_TRUE(rec.wait(2));
  EXPECT_EQ(rec.find("send-big").status.code(), StatusCode::cancelled);
  marker(*a_, ab_, *b_, ba_, 99);
  a_->send(ab_, 2, small.region, 0, 100, 0, rec.make("send-small"));
  b_->recv(ba_, 2, dst.region, 0, dst.bytes.size(), rec.make("recv2"));
  ASSERT_TRUE(rec.wait(4));
  Completion r2 = rec.find("recv2");
  ASSERT_TRUE(r2.status.ok()) << r2.status.to_string();
  EXPECT_EQ(r2.bytes, 100u);
  EXPECT_TRUE(same_bytes(dst.bytes.data(), 100, 8));

  // A send cancelled before its loop ever ran it: the peer never hears of it.
  const RequestId s3 = a_->send(ab_, 3, big.region, 0, big.bytes.size(), 0, rec.make("send-3"));
  a_->cancel(s3);
  ASSERT_TRUE(rec.wait(5));
  EXPECT_EQ(rec.find("send-3").status.code(), StatusCode::cancelled);

  // Cancelling a completed request changes nothing.
  a_->cancel(s);
  b_->cancel(r);
  a_->close();
  a_->join();
  EXPECT_EQ(rec.count("send-big"), 1u);
  EXPECT_EQ(rec.count("recv"), 1u);
}

TEST_P(Conformance, CancelSendDuringTransferCompletesOnceEitherWay) {
  TransportConfig config = small_config();
  config.chunk_bytes = 16 << 10;
  config.window_chunks = 1;
  make_pair(config);
  const std::size_t size = 32 << 20;
  Buffer src(size, 11, true), dst(size);
  Recorder rec;
  b_->recv(ba_, 1, dst.region, 0, size, rec.make("recv"));
  settle(*b_, ba_);  // the receive is posted before the message is announced
  const RequestId s = a_->send(ab_, 1, src.region, 0, size, 0, rec.make("send"));
  settle(*a_, ab_);  // announced
  a_->cancel(s);
  ASSERT_TRUE(rec.wait(2));
  Completion sc = rec.find("send"), rc = rec.find("recv");
  // Either the cancel won (ABORT: both sides see cancelled) or the send had fully left (both ok).
  if (sc.status.code() == StatusCode::cancelled) {
    EXPECT_EQ(rc.status.code(), StatusCode::cancelled) << rc.status.to_string();
  } else {
    ASSERT_TRUE(sc.status.ok()) << sc.status.to_string();
    ASSERT_TRUE(rc.status.ok()) << rc.status.to_string();
    EXPECT_TRUE(same_bytes(dst.bytes.data(), size, 11));
  }
  // The connection stays healthy.
  Buffer s2(5000, 12, true), d2(5000);
  b_->recv(ba_, 2, d2.region, 0, 5000, rec.make("recv2"));
  a_->send(ab_, 2, s2.region, 0, 5000, 0, rec.make("send2"));
  ASSERT_TRUE(rec.wait(4));
  EXPECT_TRUE(rec.find("recv2").status.ok());
  EXPECT_TRUE(same_bytes(d2.bytes.data(), 5000, 12));
}

TEST_P(Conformance, CancelReceiveDuringTransfer) {
  TransportConfig config = small_config();
  config.chunk_bytes = 16 << 10;
  config.window_chunks = 1;
  make_pair(config);
  const std::size_t size = 32 << 20;
  Buffer src(size, 13, true), dst(size);
  Recorder rec;
  const RequestId r = b_->recv(ba_, 1, dst.region, 0, size, rec.make("recv"));
  a_->send(ab_, 1, src.region, 0, size, 0, rec.make("send"));
  b_->cancel(r);
  ASSERT_TRUE(rec.wait_label("recv"));
  const Completion rc = rec.find("recv");
  if (rc.status.ok()) {
    EXPECT_TRUE(same_bytes(dst.bytes.data(), size, 13));  // finished before the cancel
  } else {
    ASSERT_EQ(rc.status.code(), StatusCode::cancelled) << rc.status.to_string();
  }
  std::fill(dst.bytes.begin(), dst.bytes.end(), std::byte{0});
  // The cancel hit either a waiting receive (the big message is then still unexpected) or a bound
  // one (its remaining bytes are dropped). A second receive of the tag sorts it out.
  Buffer s2(3000, 14, true), d2(size);
  b_->recv(ba_, 1, d2.region, 0, size, rec.make("recv2"));
  a_->send(ab_, 1, s2.region, 0, 3000, 0, rec.make("send2"));
  ASSERT_TRUE(rec.wait_label("recv2"));
  Completion r2 = rec.find("recv2");
  ASSERT_TRUE(r2.status.ok()) << r2.status.to_string();
  if (r2.bytes == size) {
    EXPECT_TRUE(same_bytes(d2.bytes.data(), size, 13));
    Buffer d3(3000);
    b_->recv(ba_, 1, d3.region, 0, 3000, rec.make("recv3"));
    ASSERT_TRUE(rec.wait_label("recv3"));
    ASSERT_TRUE(rec.find("recv3").status.ok());
    EXPECT_TRUE(same_bytes(d3.bytes.data(), 3000, 14));
  } else {
    ASSERT_EQ(r2.bytes, 3000u);
    EXPECT_TRUE(same_bytes(d2.bytes.data(), 3000, 14));
  }
  ASSERT_TRUE(rec.wait_label("send"));
  ASSERT_TRUE(rec.wait_label("send2"));
  EXPECT_TRUE(rec.find("send").status.ok());
  EXPECT_TRUE(rec.find("send2").status.ok());
  if (!rc.status.ok()) {
    // After the cancel callback nothing wrote into the old buffer any more.
    EXPECT_TRUE(std::all_of(dst.bytes.begin(), dst.bytes.end(), [](std::byte x) { return x == std::byte{0}; }));
  }
}

TEST_P(Conformance, TooSmallReceiveIsRefusedAndTheConnectionSurvives) {
  make_pair();
  Buffer big(300 << 10, 1, true), eager(1000, 2, true), dst(100);
  Recorder rec;
  b_->recv(ba_, 1, dst.region, 0, 100, rec.make("r-rdv"));
  a_->send(ab_, 1, big.region, 0, big.bytes.size(), 0, rec.make("s-rdv"));
  b_->recv(ba_, 2, dst.region, 0, 100, rec.make("r-eager"));
  a_->send(ab_, 2, eager.region, 0, 1000, 0, rec.make("s-eager"));
  ASSERT_TRUE(rec.wait(4));
  EXPECT_EQ(rec.find("r-rdv").status.code(), StatusCode::invalid_argument);
  EXPECT_EQ(rec.find("s-rdv").status.code(), StatusCode::invalid_argument);  // REJECT
  EXPECT_EQ(rec.find("r-eager").status.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(rec.find("s-eager").status.ok());  // eager bytes were delivered, then dropped
  Buffer s3(50, 3, true);
  b_->recv(ba_, 3, dst.region, 0, 100, rec.make("r3"));
  a_->send(ab_, 3, s3.region, 0, 50, 0, rec.make("s3"));
  ASSERT_TRUE(rec.wait(6));
  EXPECT_TRUE(rec.find("r3").status.ok());
  EXPECT_TRUE(same_bytes(dst.bytes.data(), 50, 3));
}

TEST_P(Conformance, BadArgumentsCompleteWithInvalidArgument) {
  make_pair();
  Buffer buf(100);
  Recorder rec;
  a_->send(424242, 1, buf.region, 0, 10, 0, rec.make("unknown-peer"));
  a_->send(kAnyPeer, 1, buf.region, 0, 10, 0, rec.make("any-peer-send"));
  a_->send(ab_, 1, buf.region, 90, 20, 0, rec.make("range"));
  a_->recv(ab_, 1, buf.region, 101, 0, rec.make("recv-range"));
  a_->recv(777, 1, buf.region, 0, 10, rec.make("recv-unknown"));
  ASSERT_TRUE(rec.wait(5));
  for (const Completion& c : rec.all()) {
    EXPECT_EQ(c.status.code(), StatusCode::invalid_argument) << c.label << ": " << c.status.to_string();
    EXPECT_FALSE(c.status.message().empty());
  }
}

TEST_P(Conformance, CloseCompletesEverythingAndPeersSeeConnectionLost) {
  make_pair();
  Buffer big(1 << 20, 1, true), dst(1 << 20), dst2(100);
  Recorder rec;
  a_->recv(ab_, 1, dst.region, 0, dst.bytes.size(), rec.make("a-recv"));
  a_->recv(kAnyPeer, 2, dst2.region, 0, 100, rec.make("a-recv-any"));
  a_->send(ab_, 3, big.region, 0, big.bytes.size(), 0, rec.make("a-send"));  // never received
  b_->recv(ba_, 4, dst2.region, 0, 100, rec.make("b-recv"));
  ASSERT_TRUE(b_->peer_name(ba_).ok());  // b's receive is posted
  a_->close();
  ASSERT_TRUE(rec.wait(4));
  EXPECT_EQ(rec.find("a-recv").status.code(), StatusCode::cancelled);
  EXPECT_EQ(rec.find("a-recv-any").status.code(), StatusCode::cancelled);
  EXPECT_EQ(rec.find("a-send").status.code(), StatusCode::cancelled);
  const Completion br = rec.find("b-recv");
  EXPECT_EQ(br.status.code(), StatusCode::connection_lost) << br.status.to_string();
  EXPECT_NE(br.status.message().find("alice"), std::string::npos) << br.status.message();
  // Later requests: cancelled on the closed side, the terminal status on the peer's side.
  a_->send(ab_, 5, big.region, 0, 10, 0, rec.make("a-late"));
  b_->send(ba_, 5, big.region, 0, 10, 0, rec.make("b-late"));
  ASSERT_TRUE(rec.wait(6));
  EXPECT_EQ(rec.find("a-late").status.code(), StatusCode::cancelled);
  EXPECT_EQ(rec.find("b-late").status.code(), StatusCode::connection_lost);
  // b has freed the failed connection by now (only its name and terminal status are kept, so a
  // long-running server does not grow with every peer it ever saw: bench/soak.sh): the id still
  // names the peer and still fails with the status that names it.
  EXPECT_NE(rec.find("b-late").status.message().find("alice"), std::string::npos)
      << rec.find("b-late").status.message();
  Result<std::string> name = b_->peer_name(ba_);
  ASSERT_TRUE(name.ok()) << name.status().to_string();
  EXPECT_NE(name->find("alice"), std::string::npos) << *name;
  a_->join();
  EXPECT_EQ(a_->send(ab_, 6, big.region, 0, 10, 0, rec.make("after-join")), kNoRequest);
}

TEST_P(Conformance, ConnectToNobodyTimesOut) {
  TransportConfig config = small_config();
  config.timeout = std::chrono::milliseconds(300);
  auto a = make_context(GetParam(), fabric_, {"lonely", ProgressEngine::Mode::thread, config});
  ASSERT_TRUE(a);
  // A listener that is closed again gives an address nobody listens on.
  std::string addr;
  {
    auto tmp = make_context(GetParam(), fabric_, {"tmp", ProgressEngine::Mode::thread, config});
    ASSERT_TRUE(tmp);
    addr = *tmp->listen(GetParam().listen_address);
  }
  Result<PeerId> p = a->connect(addr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::timeout) << p.status().to_string();
  EXPECT_FALSE(a->connect("nonsense").ok());
  EXPECT_FALSE(a->connect("udp://127.0.0.1:1").ok());
  Result<PeerId> none = a->accept(std::chrono::milliseconds(20));
  EXPECT_EQ(none.status().code(), StatusCode::timeout);
}

}  // namespace
}  // namespace tictac::transport::testing
