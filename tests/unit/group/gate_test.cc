// Gate: opened from another thread it releases the waiter; the first decision wins; a failure
// carries its reason; a gate nobody opens times out with an error that says so; GateScope nests;
// PendingGates waits once, names the collective in its error and restores the outer one.
#include "integration/group/gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tictac::group {
namespace {

using namespace std::chrono_literals;

TEST(Gate, OpenedFromAnotherThreadReleasesTheWaiter) {
  auto gate = std::make_shared<Gate>();
  EXPECT_FALSE(gate->decided());
  std::thread opener([gate] {
    std::this_thread::sleep_for(20ms);
    gate->open();
  });
  EXPECT_TRUE(gate->wait(10s).ok());
  opener.join();
  EXPECT_TRUE(gate->decided());
}

TEST(Gate, TheFirstDecisionWins) {
  Gate opened;
  opened.open();
  opened.fail("too late");
  EXPECT_TRUE(opened.wait(0ms).ok());
  Gate failed;
  failed.fail("the update raised");
  failed.open();
  Status s = failed.wait(0ms);
  EXPECT_EQ(s.code(), StatusCode::cancelled);
  EXPECT_NE(s.message().find("the update raised"), std::string::npos) << s.message();
}

TEST(Gate, AGateNobodyOpensTimesOutSayingSo) {
  Gate gate;
  Status s = gate.wait(30ms);
  EXPECT_EQ(s.code(), StatusCode::timeout);
  EXPECT_NE(s.message().find("stayed closed"), std::string::npos) << s.message();
}

TEST(GateScope, ScopesNestPerThread) {
  auto a = std::make_shared<Gate>();
  auto b = std::make_shared<Gate>();
  EXPECT_TRUE(GateScope::current().empty());
  {
    GateScope outer(a);
    {
      GateScope inner(b);
      EXPECT_EQ(GateScope::current().size(), 2u);
      std::thread other([] { EXPECT_TRUE(GateScope::current().empty()); });
      other.join();
    }
    ASSERT_EQ(GateScope::current().size(), 1u);
    EXPECT_EQ(GateScope::current()[0], a);
  }
  EXPECT_TRUE(GateScope::current().empty());
  EXPECT_FALSE(GateScope::pop());
}

TEST(PendingGates, WaitsOnceAndNamesTheCollective) {
  EXPECT_TRUE(PendingGates::wait().ok());  // none installed
  EXPECT_TRUE(PendingGates::waited());
  auto open = std::make_shared<Gate>();
  auto failed = std::make_shared<Gate>();
  {
    PendingGates outer({open}, 1s, "allgather_base");
    EXPECT_FALSE(PendingGates::waited());
    {
      PendingGates inner({failed}, 1s, "reduce_scatter");
      failed->fail("the update raised");
      Status s = PendingGates::wait();
      EXPECT_EQ(s.code(), StatusCode::cancelled);
      EXPECT_NE(s.message().find("reduce_scatter: not started: the update raised"),
                std::string::npos)
          << s.message();
      EXPECT_EQ(PendingGates::wait().message(), s.message());  // decided once
    }
    EXPECT_FALSE(PendingGates::waited());  // the outer one again, not yet waited
    std::thread opener([open] {
      std::this_thread::sleep_for(20ms);
      open->open();
    });
    EXPECT_TRUE(PendingGates::wait().ok());
    opener.join();
    EXPECT_TRUE(PendingGates::waited());
  }
  EXPECT_TRUE(PendingGates::waited());
}

}  // namespace
}  // namespace tictac::group
