// Context batches: a thread's requests are held between begin_batch() and end_batch() and reach
// the loop as one task (checked in manual mode, where nothing runs outside progress()); nesting;
// another thread's requests are not held. (The order effect of a batch is in the conformance
// suite: PriorityOrderAtDefaultSettingsWithReceivesPostedFirst.)
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "transport/context.h"

namespace tictac::transport {
namespace {

std::unique_ptr<Context> manual_context() {
  ContextOptions o;
  o.name = "batch-test";
  o.mode = ProgressEngine::Mode::manual;
  o.config = TransportConfig{};
  o.auth_token = "";
  Result<std::unique_ptr<Context>> c = Context::create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(c).value() : nullptr;
}

void drain(Context& ctx) {
  for (int i = 0; i < 10; ++i) ctx.progress(std::chrono::milliseconds(0));
}

TEST(ContextBatch, HeldUntilTheOutermostEnd) {
  auto ctx = manual_context();
  ASSERT_TRUE(ctx);
  std::vector<std::byte> buf(16);
  MemoryRegion region = MemoryRegion::host(buf.data(), buf.size()).value();
  std::atomic<int> done{0};
  auto cb = [&](const Status& s, std::uint64_t, PeerId) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);  // peer 4242 does not exist
    ++done;
  };
  ctx->begin_batch();
  EXPECT_NE(ctx->send(4242, 1, region, 0, 16, 0, cb), kNoRequest);
  ctx->begin_batch();  // nested
  EXPECT_NE(ctx->send(4242, 2, region, 0, 16, 0, cb), kNoRequest);
  ctx->end_batch();
  drain(*ctx);
  EXPECT_EQ(done.load(), 0) << "a held request reached the loop before the outermost end_batch()";
  ctx->end_batch();
  drain(*ctx);
  EXPECT_EQ(done.load(), 2);
}

TEST(ContextBatch, OtherThreadsAreNotHeld) {
  auto ctx = manual_context();
  ASSERT_TRUE(ctx);
  std::vector<std::byte> buf(16);
  MemoryRegion region = MemoryRegion::host(buf.data(), buf.size()).value();
  std::atomic<int> done{0};
  auto cb = [&](const Status&, std::uint64_t, PeerId) { ++done; };
  Context::Batch batch(*ctx);
  std::thread other([&] { ctx->send(4242, 1, region, 0, 16, 0, cb); });
  other.join();
  drain(*ctx);
  EXPECT_EQ(done.load(), 1);
}

}  // namespace
}  // namespace tictac::transport
