// UcxWorker's scheduling contract, on a real UCP worker in a manual-mode loop: a callback that
// later() queues (a delivery, a failure report) runs without waiting for another UCX event, even
// when it was queued while the pump had yielded to the loop's own tasks. Before the fix such a
// callback waited in the queue while the loop slept on the armed event fd: a killed peer's failure
// then surfaced only at the heartbeat timeout (UcxBackend.KilledPeerIsConnectionLostThroughUcx
// failed about 1 run in 25).
#include <gtest/gtest.h>

#include <chrono>

#include "transport/progress_engine.h"
#include "transport/ucx/ucp_context.h"
#include "transport/ucx/worker.h"

namespace tictac::transport::ucx {
namespace {

using std::chrono::milliseconds;

struct Loop {
  std::unique_ptr<ProgressEngine> engine;
  std::unique_ptr<UcxWorker> worker;
};

Loop make_loop() {
  Loop l;
  auto engine = ProgressEngine::create(ProgressEngine::Mode::manual, std::chrono::microseconds(0));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return l;
  l.engine = std::move(engine).value();
  auto context = UcpContext::create();
  EXPECT_TRUE(context.ok()) << context.status().to_string();
  if (!context.ok()) return l;
  auto worker = UcxWorker::create(*l.engine, std::move(context).value());
  EXPECT_TRUE(worker.ok()) << worker.status().to_string();
  if (worker.ok()) l.worker = std::move(worker).value();
  // Settle: the creation's pump, then an armed worker (the loop would sleep now).
  for (int i = 0; i < 10 && l.engine->progress() > 0; ++i) {
  }
  return l;
}

// Up to `rounds` loop iterations of up to 100 ms each, until `done`.
void run_until(ProgressEngine& engine, const bool& done, int rounds) {
  for (int i = 0; i < rounds && !done; ++i) engine.progress(milliseconds(100));
}

TEST(UcxWorker, LaterCallbackQueuedWhileThePumpYieldsStillRuns) {
  Loop l = make_loop();
  ASSERT_TRUE(l.worker);
  UcxWorker& w = *l.worker;
  bool first = false, yielded_task = false, second = false;
  w.later([&] {
    first = true;
    l.engine->post([&] { yielded_task = true; });  // a task waiting: the pump returns to the loop
    w.later([&] { second = true; });               // queued behind it, as a failure drain does
    w.kick();
  });
  w.kick();
  run_until(*l.engine, second, 10);
  EXPECT_TRUE(first);
  EXPECT_TRUE(yielded_task);
  EXPECT_TRUE(second) << "a later() callback stayed queued while the loop slept";
}

TEST(UcxWorker, LaterCallbackFromALoopTaskRuns) {
  // Counter-check of the plain path: later() plus kick() from an ordinary posted task.
  Loop l = make_loop();
  ASSERT_TRUE(l.worker);
  UcxWorker& w = *l.worker;
  bool ran = false;
  l.engine->post([&] {
    w.later([&] { ran = true; });
    w.kick();
  });
  run_until(*l.engine, ran, 10);
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace tictac::transport::ucx
