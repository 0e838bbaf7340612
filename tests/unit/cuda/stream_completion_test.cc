// Receive-side sequencing against the scripted CUDA model: flag values, wrap-around, the timeout
// sentinel, pool exhaustion and the event fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "cuda/stream_completion.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

using namespace std::chrono_literals;
using Clock = StreamCompletion::Clock;
using testing::FakeApi;

class StreamCompletionTest : public ::testing::Test {
 protected:
  void make(StreamCompletionOptions o) {
    Result<std::unique_ptr<EventPool>> e = EventPool::create(api, 0, 4);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    events = std::move(*e);
    Result<std::unique_ptr<StreamCompletion>> s = StreamCompletion::create(api, *events, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    sc = std::move(*s);
  }
  StreamCompletionOptions small(std::size_t flags, std::uint32_t initial = 0) {
    StreamCompletionOptions o;
    o.max_outstanding = flags;
    o.initial_sequence = initial;
    o.timeout = 5s;
    return o;
  }
  Stream stream() {
    Result<Stream> s = api.create_stream();
    EXPECT_TRUE(s.ok());
    return *s;
  }
  ArrivalTicket wait(Stream s) {
    Result<ArrivalTicket> t = sc->wait_on_stream(s, t0);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : ArrivalTicket{};
  }

  FakeApi api;
  std::unique_ptr<EventPool> events;
  std::unique_ptr<StreamCompletion> sc;
  const Clock::time_point t0 = Clock::time_point{} + 1h;
};

TEST_F(StreamCompletionTest, FlagsAreCacheLineAlignedAndHoldTheInitialSequence) {
  make(small(4, 7));
  ASSERT_EQ(sc->mode(), ArrivalMode::stream_wait);
  const FlagPool* flags = sc->flags();
  ASSERT_NE(flags, nullptr);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(flags->device_sequence_address(i) % 64, 0u);
    EXPECT_EQ(flags->device_sequence_address(i), flags->device_sequence_address(0) + 64u * i);
    EXPECT_EQ(flags->device_error_address(i), flags->device_sequence_address(i) + 4);
    EXPECT_EQ(flags->load_sequence(i), 7u);
    EXPECT_EQ(flags->load_error(i), 0u);
  }
}

TEST_F(StreamCompletionTest, ConsumerRunsOnlyAfterTheHostStoresTheSequence) {
  make(small(4, 7));
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  EXPECT_TRUE(t.stream_waits);
  EXPECT_EQ(t.sequence, 8u);
  api.enqueue_marker(c, "kernel");
  api.run();
  EXPECT_TRUE(api.trace().empty());
  EXPECT_EQ(sc->flags()->load_sequence(t.flag), 7u);
  EXPECT_EQ(sc->outstanding(), 1u);

  ASSERT_TRUE(sc->complete(t).ok());
  EXPECT_EQ(sc->flags()->load_sequence(t.flag), 8u);
  EXPECT_EQ(sc->flags()->load_error(t.flag), 0u);
  EXPECT_EQ(sc->outstanding(), 0u);
  EXPECT_EQ(sc->flags()->in_use(), 0u);
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"kernel"});
}

TEST_F(StreamCompletionTest, OutOfOrderArrivalsReleaseOnlyTheirOwnStream) {
  make(small(4));
  Stream a = stream();
  Stream b = stream();
  const ArrivalTicket ta = wait(a);
  api.enqueue_marker(a, "layer1");
  const ArrivalTicket tb = wait(b);
  api.enqueue_marker(b, "layer2");
  EXPECT_NE(ta.flag, tb.flag);
  ASSERT_TRUE(sc->complete(tb).ok());  // the higher-priority tensor landed first
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"layer2"});
  ASSERT_TRUE(sc->complete(ta).ok());
  api.run();
  EXPECT_EQ(api.trace(), (std::vector<std::string>{"layer2", "layer1"}));
}

TEST_F(StreamCompletionTest, SequenceWrapsAroundWithoutAReset) {
  make(small(1, 0xFFFFFFFEu));
  Stream c = stream();
  const std::uint32_t expected[] = {0xFFFFFFFFu, 0u, 1u, 2u};
  for (std::uint32_t want : expected) {
    const ArrivalTicket t = wait(c);
    EXPECT_EQ(t.flag, 0u);
    EXPECT_EQ(t.sequence, want);
    api.enqueue_marker(c, std::to_string(want));
    const std::size_t before = api.trace().size();
    api.run();
    EXPECT_EQ(api.trace().size(), before) << "the wait for " << want << " passed before its arrival";
    ASSERT_TRUE(sc->complete(t).ok());
    api.run();
    ASSERT_EQ(api.trace().size(), before + 1);
    EXPECT_EQ(api.trace().back(), std::to_string(want));
  }
}

TEST_F(StreamCompletionTest, LateStreamStillPassesAStaleWaitAfterTheFlagWrapped) {
  make(small(1, 0xFFFFFFFEu));
  Stream late = stream();
  Stream other = stream();
  api.enqueue_hold(late);  // the late stream has not reached its wait yet
  const ArrivalTicket first = wait(late);
  api.enqueue_marker(late, "late consumer");
  ASSERT_TRUE(sc->complete(first).ok());
  // The same flag is reused across the wrap while `late` is still held.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sc->complete(wait(other)).ok());
  EXPECT_EQ(sc->flags()->load_sequence(0), 2u);
  api.release_hold(late);
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"late consumer"});
}

TEST_F(StreamCompletionTest, TimeoutWritesTheSentinelAndReleasesTheStream) {
  make(small(2));
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  api.enqueue_marker(c, "kernel");
  EXPECT_TRUE(sc->poll(t0 + 4s).empty());
  api.run();
  EXPECT_TRUE(api.trace().empty());

  std::vector<ArrivalFailure> failed = sc->poll(t0 + 5s);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].ticket.id, t.id);
  EXPECT_EQ(failed[0].stream, c);
  EXPECT_EQ(failed[0].status.code(), StatusCode::timeout);
  EXPECT_NE(failed[0].status.message().find("error sentinel"), std::string::npos) << failed[0].status.message();
  EXPECT_NE(failed[0].status.message().find("mark the endpoint failed"), std::string::npos);
  EXPECT_EQ(sc->flags()->load_error(t.flag), kFlagErrorSentinel);
  EXPECT_EQ(sc->flags()->load_sequence(t.flag), t.sequence);
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"kernel"});  // the stream did not hang

  EXPECT_EQ(sc->complete(t).code(), StatusCode::invalid_argument);  // a late arrival is refused
  EXPECT_EQ(sc->flags()->retired(), 1u);
  const ArrivalTicket next = wait(c);
  EXPECT_NE(next.flag, t.flag);  // the retired flag is never reused
  EXPECT_TRUE(sc->poll(t0 + 9s).size() == 1u);
}

TEST_F(StreamCompletionTest, PollReportsOnlyExpiredWaitsInDeadlineOrder) {
  make(small(4));
  Stream c = stream();
  Result<ArrivalTicket> early = sc->wait_on_stream(c, t0);
  Result<ArrivalTicket> late = sc->wait_on_stream(c, t0 + 3s);
  ASSERT_TRUE(early.ok() && late.ok());
  std::vector<ArrivalFailure> f = sc->poll(t0 + 6s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ticket.id, early->id);
  ASSERT_TRUE(sc->complete(*late).ok());
  EXPECT_TRUE(sc->poll(t0 + 100s).empty());
}

TEST_F(StreamCompletionTest, ExhaustedFlagPoolIsResourceExhaustedUntilACompletion) {
  make(small(2));
  Stream c = stream();
  const ArrivalTicket a = wait(c);
  wait(c);
  Result<ArrivalTicket> third = sc->wait_on_stream(c, t0);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(third.status().message().find("TICTAC_CUDA_STREAM_FLAGS"), std::string::npos);
  ASSERT_TRUE(sc->complete(a).ok());
  EXPECT_TRUE(sc->wait_on_stream(c, t0).ok());
}

TEST_F(StreamCompletionTest, RetiredFlagsShrinkThePoolAndSaySo) {
  make(small(1));
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  ASSERT_TRUE(sc->fail(t).ok());
  EXPECT_EQ(sc->flags()->load_error(t.flag), kFlagErrorSentinel);
  Result<ArrivalTicket> next = sc->wait_on_stream(c, t0);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(next.status().message().find("1 retired"), std::string::npos) << next.status().message();
}

TEST_F(StreamCompletionTest, FailedEnqueueHandsTheFlagBackLevelWithItsSequence) {
  make(small(1));
  Stream c = stream();
  api.fail_next("wait_value32", Status(StatusCode::cuda_error, "cuStreamWaitValue32 failed: scripted"));
  Result<ArrivalTicket> bad = sc->wait_on_stream(c, t0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::cuda_error);
  EXPECT_EQ(sc->flags()->in_use(), 0u);
  EXPECT_EQ(sc->outstanding(), 0u);
  EXPECT_EQ(sc->flags()->load_sequence(0), 1u);
  const ArrivalTicket t = wait(c);
  EXPECT_EQ(t.sequence, 2u);
  api.enqueue_marker(c, "kernel");
  api.run();
  EXPECT_TRUE(api.trace().empty());  // the wait for 2 is not satisfied by the level flag (1)
  ASSERT_TRUE(sc->complete(t).ok());
  api.run();
  EXPECT_EQ(api.trace().size(), 1u);
}

TEST_F(StreamCompletionTest, UnknownOrFinishedTicketsAreInvalidArguments) {
  make(small(2));
  Stream c = stream();
  ArrivalTicket t = wait(c);
  ArrivalTicket forged = t;
  forged.sequence += 1;
  EXPECT_EQ(sc->complete(forged).code(), StatusCode::invalid_argument);
  EXPECT_EQ(sc->complete(ArrivalTicket{}).code(), StatusCode::invalid_argument);
  ASSERT_TRUE(sc->complete(t).ok());
  EXPECT_EQ(sc->complete(t).code(), StatusCode::invalid_argument);
  EXPECT_EQ(sc->fail(t).code(), StatusCode::invalid_argument);
}

TEST_F(StreamCompletionTest, FailAllReleasesEveryWaitingStreamWithTheCause) {
  make(small(4));
  Stream a = stream();
  Stream b = stream();
  wait(a);
  api.enqueue_marker(a, "a");
  wait(b);
  api.enqueue_marker(b, "b");
  wait(b);
  api.enqueue_marker(b, "b2");
  const Status why(StatusCode::connection_lost, "peer 127.0.0.1:1 went away");
  std::vector<ArrivalFailure> f = sc->fail_all(why);
  ASSERT_EQ(f.size(), 3u);
  for (const ArrivalFailure& x : f) {
    EXPECT_EQ(x.status, why);
    EXPECT_EQ(sc->flags()->load_error(x.ticket.flag), kFlagErrorSentinel);
  }
  api.run();
  EXPECT_EQ(api.trace().size(), 3u);
  EXPECT_EQ(sc->outstanding(), 0u);
}

TEST_F(StreamCompletionTest, FlushIsRequestedOnlyWhenAskedAndSupported) {
  StreamCompletionOptions o = small(2);
  o.flush_remote_writes = true;
  make(o);  // caps: no flush support
  wait(stream());
  EXPECT_EQ(std::count(api.calls().begin(), api.calls().end(), "wait_value32"), 1);
  sc.reset();
  DeviceCaps caps;
  caps.stream_mem_ops = true;
  caps.can_flush_remote_writes = true;
  api.set_caps(caps);
  make(o);
  wait(stream());
  EXPECT_EQ(std::count(api.calls().begin(), api.calls().end(), "wait_value32+flush"), 1);
}

// Lazy module loading (seen deadlocking a first kernel launch behind a stream wait on an H200)
// selects the event fallback unless stream waits are forced; the counter-check is the forced run.
TEST_F(StreamCompletionTest, LazyModuleLoadingSelectsTheEventFallbackUnlessForced) {
  DeviceCaps caps;
  caps.stream_mem_ops = true;
  caps.lazy_module_loading = true;
  api.set_caps(caps);
  make(small(2));
  EXPECT_EQ(sc->mode(), ArrivalMode::event_after_completion);
  EXPECT_EQ(sc->flags(), nullptr);
  EXPECT_FALSE(wait(stream()).stream_waits);
  EXPECT_EQ(std::count(api.calls().begin(), api.calls().end(), "wait_value32"), 0);
  sc->fail_all(Status(StatusCode::cancelled, "next case"));
  sc.reset();
  StreamCompletionOptions forced = small(2);
  forced.force_stream_mem_ops = true;
  make(forced);
  EXPECT_EQ(sc->mode(), ArrivalMode::stream_wait);
  EXPECT_TRUE(wait(stream()).stream_waits);
  EXPECT_EQ(std::count(api.calls().begin(), api.calls().end(), "wait_value32"), 1);
}

TEST_F(StreamCompletionTest, EventFallbackOrdersTheConsumerAfterCompletion) {
  DeviceCaps caps;
  caps.stream_mem_ops = false;
  api.set_caps(caps);
  Stream side = stream();
  StreamCompletionOptions o = small(2);
  o.side_stream = side;
  make(o);
  ASSERT_EQ(sc->mode(), ArrivalMode::event_after_completion);
  EXPECT_EQ(sc->flags(), nullptr);
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  EXPECT_FALSE(t.stream_waits);
  EXPECT_EQ(api.queued(c), 0u);  // nothing can be enqueued before the event is recorded
  api.enqueue_hold(side);        // e.g. a staging copy still running on the side stream
  ASSERT_TRUE(sc->complete(t).ok());
  api.enqueue_marker(c, "kernel");
  api.run();
  EXPECT_TRUE(api.trace().empty());
  api.release_hold(side);
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"kernel"});
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(StreamCompletionTest, EventFallbackWhenStreamMemOpsAreDisallowed) {
  StreamCompletionOptions o = small(1);
  o.allow_stream_mem_ops = false;
  make(o);
  EXPECT_EQ(sc->mode(), ArrivalMode::event_after_completion);
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  Result<ArrivalTicket> second = sc->wait_on_stream(c, t0);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::resource_exhausted);
  std::vector<ArrivalFailure> f = sc->poll(t0 + 5s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].status.code(), StatusCode::timeout);
  EXPECT_EQ(f[0].status.message().find("sentinel"), std::string::npos);
  EXPECT_EQ(sc->complete(t).code(), StatusCode::invalid_argument);
}

TEST_F(StreamCompletionTest, EventFallbackCompletionWithoutAnEventStaysPending) {
  StreamCompletionOptions o = small(2);
  o.allow_stream_mem_ops = false;
  make(o);
  Stream c = stream();
  const ArrivalTicket t = wait(c);
  std::vector<Event> held;
  while (events->available() > 0) held.push_back(*events->acquire());
  EXPECT_EQ(sc->complete(t).code(), StatusCode::resource_exhausted);
  EXPECT_EQ(sc->outstanding(), 1u);
  for (Event e : held) events->release(e);
  EXPECT_TRUE(sc->complete(t).ok());
}

TEST_F(StreamCompletionTest, CreateRejectsBadOptions) {
  Result<std::unique_ptr<EventPool>> e = EventPool::create(api, 0, 1);
  ASSERT_TRUE(e.ok());
  StreamCompletionOptions o;
  o.timeout = 0s;
  EXPECT_EQ(StreamCompletion::create(api, **e, o).status().code(), StatusCode::invalid_argument);
  FakeApi two(2);
  Result<std::unique_ptr<EventPool>> e1 = EventPool::create(two, 1, 1);
  ASSERT_TRUE(e1.ok());
  StreamCompletionOptions dev0;
  EXPECT_EQ(StreamCompletion::create(two, **e1, dev0).status().code(), StatusCode::invalid_argument);
  StreamCompletionOptions huge;
  huge.max_outstanding = std::size_t{1} << 24;
  EXPECT_EQ(StreamCompletion::create(api, **e, huge).status().code(), StatusCode::invalid_argument);
  api.fail_next("alloc_pinned", Status(StatusCode::cuda_error, "cudaHostAlloc failed: scripted"));
  EXPECT_EQ(StreamCompletion::create(api, **e, StreamCompletionOptions{}).status().code(), StatusCode::cuda_error);
}

TEST(StreamCompletionOptions, FromEnvironment) {
  ::setenv("TICTAC_CUDA_STREAM_FLAGS", "16", 1);
  ::setenv("TICTAC_CUDA_ARRIVAL_TIMEOUT", "250ms", 1);
  ::setenv("TICTAC_CUDA_STREAM_MEM_OPS", "0", 1);
  Result<StreamCompletionOptions> o = StreamCompletionOptions::from_env(0);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->max_outstanding, 16u);
  EXPECT_EQ(o->timeout, 250ms);
  EXPECT_FALSE(o->allow_stream_mem_ops);
  ::setenv("TICTAC_CUDA_STREAM_FLAGS", "lots", 1);
  Result<StreamCompletionOptions> bad = StreamCompletionOptions::from_env(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_CUDA_STREAM_FLAGS"), std::string::npos);
  ::setenv("TICTAC_CUDA_STREAM_FLAGS", "0", 1);
  EXPECT_EQ(StreamCompletionOptions::from_env(0).status().code(), StatusCode::invalid_argument);
  ::unsetenv("TICTAC_CUDA_STREAM_FLAGS");
  ::unsetenv("TICTAC_CUDA_ARRIVAL_TIMEOUT");
  ::unsetenv("TICTAC_CUDA_STREAM_MEM_OPS");
  Result<StreamCompletionOptions> def = StreamCompletionOptions::from_env(0);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->max_outstanding, 1024u);
  EXPECT_TRUE(def->allow_stream_mem_ops);
  EXPECT_FALSE(def->force_stream_mem_ops);
  ::setenv("TICTAC_CUDA_STREAM_MEM_OPS", "1", 1);
  Result<StreamCompletionOptions> forced = StreamCompletionOptions::from_env(0);
  ASSERT_TRUE(forced.ok());
  EXPECT_TRUE(forced->allow_stream_mem_ops);
  EXPECT_TRUE(forced->force_stream_mem_ops);
  ::setenv("TICTAC_CUDA_STREAM_MEM_OPS", "sometimes", 1);
  Result<StreamCompletionOptions> wrong = StreamCompletionOptions::from_env(0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("TICTAC_CUDA_STREAM_MEM_OPS"), std::string::npos);
  ::unsetenv("TICTAC_CUDA_STREAM_MEM_OPS");
}

}  // namespace
}  // namespace tictac::cuda
