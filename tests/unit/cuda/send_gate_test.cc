// Send-side gating against the scripted CUDA model: a transfer is released only after the
// producer stream's event fired; the event pool provides back-pressure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "cuda/send_gate.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

using testing::FakeApi;

class SendGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<EventPool>> e = EventPool::create(api, 0, 3);
    ASSERT_TRUE(e.ok());
    events = std::move(*e);
    gate = std::make_unique<SendGate>(*events);
    producer = *api.create_stream();
    other = *api.create_stream();
  }
  std::uint64_t gated(Stream s) {
    Result<std::uint64_t> id = gate->after_producer(s);
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    return id.ok() ? *id : 0;
  }

  FakeApi api;
  std::unique_ptr<EventPool> events;
  std::unique_ptr<SendGate> gate;
  Stream producer = nullptr;
  Stream other = nullptr;
};

TEST_F(SendGateTest, TransferIsNotReleasedBeforeTheProducerEventFires) {
  api.enqueue_hold(producer);  // the kernel that fills the buffer is still running
  const std::uint64_t id = gated(producer);
  EXPECT_TRUE(gate->poll().empty());
  api.run();
  EXPECT_TRUE(gate->poll().empty());
  api.release_hold(producer);
  api.run();
  std::vector<GateRelease> r = gate->poll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, id);
  EXPECT_TRUE(r[0].status.ok());
  EXPECT_EQ(gate->pending(), 0u);
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(SendGateTest, StreamsAreIndependentAndEachReleasesInOrder) {
  api.enqueue_hold(producer);
  const std::uint64_t a1 = gated(producer);
  const std::uint64_t b1 = gated(other);
  const std::uint64_t a2 = gated(producer);
  api.run();
  std::vector<GateRelease> r = gate->poll();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, b1);
  api.release_hold(producer);
  api.run();
  r = gate->poll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, a1);
  EXPECT_EQ(r[1].id, a2);
}

TEST_F(SendGateTest, PollQueriesAStreamOnlyUpToItsFirstPendingEvent) {
  api.enqueue_hold(producer);
  gated(producer);
  gated(producer);
  gated(producer);
  const auto queries = [&] { return std::count(api.calls().begin(), api.calls().end(), "event_fired"); };
  const auto before = queries();
  EXPECT_TRUE(gate->poll().empty());
  EXPECT_EQ(queries() - before, 1);
}

TEST_F(SendGateTest, EmptyEventPoolIsBackPressure) {
  api.enqueue_hold(producer);
  gated(producer);
  gated(producer);
  gated(producer);
  Result<std::uint64_t> fourth = gate->after_producer(producer);
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(fourth.status().message().find("TICTAC_CUDA_EVENTS"), std::string::npos);
  api.release_hold(producer);
  api.run();
  EXPECT_EQ(gate->poll().size(), 3u);
  EXPECT_TRUE(gate->after_producer(producer).ok());
}

TEST_F(SendGateTest, FailedQueryFailsThatTransferOnly) {
  gated(producer);
  const std::uint64_t ok_id = gated(other);
  api.run();
  api.fail_next("event_fired", Status(StatusCode::cuda_error, "cudaEventQuery failed: scripted"));
  std::vector<GateRelease> r = gate->poll();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status.code(), StatusCode::cuda_error);
  EXPECT_NE(r[0].status.message().find("producer stream"), std::string::npos);
  EXPECT_EQ(r[1].id, ok_id);
  EXPECT_TRUE(r[1].status.ok());
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(SendGateTest, FailedRecordReturnsTheEvent) {
  api.fail_next("record_event", Status(StatusCode::cuda_error, "cudaEventRecord failed: scripted"));
  Result<std::uint64_t> id = gate->after_producer(producer);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::cuda_error);
  EXPECT_EQ(events->available(), events->capacity());
  EXPECT_EQ(gate->pending(), 0u);
}

TEST_F(SendGateTest, CancelledTransferIsNeverReleasedButItsEventIsRecycled) {
  api.enqueue_hold(producer);
  const std::uint64_t id = gated(producer);
  ASSERT_TRUE(gate->cancel(id).ok());
  EXPECT_EQ(gate->cancel(id).code(), StatusCode::invalid_argument);
  EXPECT_EQ(gate->cancel(999).code(), StatusCode::invalid_argument);
  api.release_hold(producer);
  api.run();
  EXPECT_TRUE(gate->poll().empty());
  EXPECT_EQ(gate->pending(), 0u);
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(SendGateTest, DestroyingTheGateReturnsPendingEvents) {
  api.enqueue_hold(producer);
  gated(producer);
  gated(other);
  gate.reset();
  EXPECT_EQ(events->available(), events->capacity());
}

TEST(EventPool, CreatesEverythingUpFrontAndDestroysIt) {
  FakeApi api;
  {
    Result<std::unique_ptr<EventPool>> pool = EventPool::create(api, 0, 5);
    ASSERT_TRUE(pool.ok());
    EXPECT_EQ(api.live_events(), 5u);
    EXPECT_EQ((*pool)->available(), 5u);
  }
  EXPECT_EQ(api.live_events(), 0u);
  EXPECT_EQ(EventPool::create(api, 0, 0).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(EventPool::create(api, 3, 1).status().code(), StatusCode::invalid_argument);  // no device 3
  api.fail_next("create_event", Status(StatusCode::cuda_error, "cudaEventCreate failed: scripted"));
  Result<std::unique_ptr<EventPool>> failed = EventPool::create(api, 0, 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::cuda_error);
  EXPECT_EQ(api.live_events(), 0u);  // nothing leaked
}

TEST(EventPool, CapacityFromEnvironment) {
  ::unsetenv("TICTAC_CUDA_EVENTS");
  Result<std::size_t> def = EventPool::capacity_from_env();
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(*def, 1024u);
  ::setenv("TICTAC_CUDA_EVENTS", "32", 1);
  EXPECT_EQ(*EventPool::capacity_from_env(), 32u);
  ::setenv("TICTAC_CUDA_EVENTS", "0", 1);
  EXPECT_EQ(EventPool::capacity_from_env().status().code(), StatusCode::invalid_argument);
  ::setenv("TICTAC_CUDA_EVENTS", "many", 1);
  Result<std::size_t> bad = EventPool::capacity_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_CUDA_EVENTS"), std::string::npos);
  ::unsetenv("TICTAC_CUDA_EVENTS");
}

}  // namespace
}  // namespace tictac::cuda
