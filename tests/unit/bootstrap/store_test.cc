// Semantics shared by every Store implementation, run against all three.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "tests/unit/bootstrap/store_fixture.h"

namespace tictac::bootstrap {
namespace {

using namespace std::chrono_literals;
using testing::StoreWorld;

struct Impl {
  const char* name;
  std::function<std::unique_ptr<StoreWorld>()> make;
};

class StoreTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    world_ = GetParam().make();
    store_ = world_->client();
    ASSERT_NE(store_, nullptr);
  }
  std::shared_ptr<Store> client() {
    auto c = world_->client();
    EXPECT_NE(c, nullptr);
    return c;
  }

  std::unique_ptr<StoreWorld> world_;
  std::shared_ptr<Store> store_;
};

Bytes bytes(std::initializer_list<int> v) {
  Bytes out;
  for (int x : v) out.push_back(static_cast<std::uint8_t>(x));
  return out;
}

TEST_P(StoreTest, SetThenGetReturnsExactBytes) {
  const Bytes value = bytes({0, 1, 2, 255, 0, 10});
  ASSERT_TRUE(store_->set("addr/0", value).ok());
  Result<Bytes> got = store_->get("addr/0", 1s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, value);
  // Empty values are values.
  ASSERT_TRUE(store_->set("empty", Bytes{}).ok());
  Result<Bytes> empty = store_->get("empty", 1s);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_P(StoreTest, OverwriteKeepsLastValueAndOtherClientsSeeIt) {
  ASSERT_TRUE(store_->set_string("k", "first").ok());
  ASSERT_TRUE(store_->set_string("k", "second").ok());
  auto other = client();
  Result<std::string> got = other->get_string("k", 1s);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "second");
}

TEST_P(StoreTest, KeysWithSlashesAndBinaryBytesAreDistinct) {
  const std::string a = "a/b", b = std::string("a\0b", 3), c = "a%2Fb";
  ASSERT_TRUE(store_->set_string(a, "1").ok());
  ASSERT_TRUE(store_->set_string(b, "2").ok());
  ASSERT_TRUE(store_->set_string(c, "3").ok());
  EXPECT_EQ(*store_->get_string(a, 1s), "1");
  EXPECT_EQ(*store_->get_string(b, 1s), "2");
  EXPECT_EQ(*store_->get_string(c, 1s), "3");
}

TEST_P(StoreTest, LargeValueRoundTrips) {
  Bytes value(3 << 20);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::uint8_t>(i * 131 + 7);
  ASSERT_TRUE(store_->set("big", value).ok());
  Result<Bytes> got = client()->get("big", 5s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, value);
}

TEST_P(StoreTest, GetTimeoutNamesTheMissingKey) {
  Result<Bytes> got = store_->get("never/set", 30ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::timeout);
  EXPECT_NE(got.status().message().find("never/set"), std::string::npos) << got.status().message();
}

TEST_P(StoreTest, ExtremeTimeoutsAreClamped) {
  ASSERT_TRUE(store_->set_string("there", "v").ok());
  // Millis::max() must not overflow a deadline: the key exists, so this returns at once.
  EXPECT_TRUE(store_->get("there", Millis::max()).ok());
  EXPECT_TRUE(store_->wait({"there"}, Millis::max()).ok());
  // A negative timeout means "do not wait".
  EXPECT_EQ(store_->get("absent", Millis(-5)).status().code(), StatusCode::timeout);
  EXPECT_EQ(store_->wait({"absent"}, Millis::min()).code(), StatusCode::timeout);
}

TEST_P(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  ASSERT_TRUE(store_->set_string("present", "x").ok());
  Status s = store_->wait({"present", "absent/1", "absent/2"}, 30ms);
  EXPECT_EQ(s.code(), StatusCode::timeout);
  EXPECT_NE(s.message().find("absent/1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("absent/2"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("present"), std::string::npos) << s.message();
  EXPECT_TRUE(store_->wait({}, 0ms).ok());
  EXPECT_TRUE(store_->wait({"present"}, 0ms).ok());
}

TEST_P(StoreTest, WaitAndGetAcrossThreads) {
  constexpr int kThreads = 4;
  std::vector<std::string> keys;
  for (int i = 0; i < kThreads; ++i) keys.push_back("rank/" + std::to_string(i));
  std::vector<std::thread> threads;
  std::vector<Status> results(kThreads);
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kThreads; ++i) clients.push_back(client());
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Store& s = *clients[i];
      // Every thread publishes its key, then waits for everybody's and reads a neighbour's.
      Status st = s.set_string(keys[i], "addr-" + std::to_string(i));
      if (st.ok()) st = s.wait(keys, 20s);
      if (st.ok()) {
        Result<std::string> v = s.get_string(keys[(i + 1) % kThreads], 20s);
        st = !v.ok() ? v.status()
                     : (*v == "addr-" + std::to_string((i + 1) % kThreads) ? Status() : internal_error(*v));
      }
      results[i] = st;
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST_P(StoreTest, GetBlocksUntilAnotherThreadSets) {
  auto setter = client();
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(setter->set_string("late", "here").ok());
  });
  Result<std::string> got = store_->get_string("late", 20s);
  t.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, "here");
}

TEST_P(StoreTest, AddIsAtomicUnderConcurrency) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 50;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kThreads; ++i) clients.push_back(client());
  std::vector<std::vector<std::int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kAdds; ++j) {
        Result<std::int64_t> v = clients[i]->add("counter", 1);
        if (v.ok()) seen[i].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every add returned a distinct value from 1..N: no lost or duplicated increments.
  std::vector<std::int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kThreads * kAdds));
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], static_cast<std::int64_t>(i + 1));
  EXPECT_EQ(*store_->get_string("counter", 1s), std::to_string(kThreads * kAdds));
  Result<std::int64_t> down = store_->add("counter", -kThreads * kAdds - 5);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(*down, -5);
}

TEST_P(StoreTest, AddRejectsNonCounterAndOverflow) {
  ASSERT_TRUE(store_->set_string("text", "hello").ok());
  Result<std::int64_t> bad = store_->add("text", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("text"), std::string::npos);
  ASSERT_TRUE(store_->add("big", INT64_MAX).ok());
  Result<std::int64_t> over = store_->add("big", 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(*store_->get_string("big", 1s), std::to_string(INT64_MAX));  // unchanged
  // The store still works after refused requests.
  EXPECT_EQ(*store_->add("fresh", 2), 2);
}

TEST_P(StoreTest, InvalidKeysAndValuesAreRefused) {
  EXPECT_EQ(store_->set_string("", "x").code(), StatusCode::invalid_argument);
  EXPECT_EQ(store_->get("", 1ms).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(store_->add("", 1).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(store_->wait({"ok", ""}, 1ms).code(), StatusCode::invalid_argument);
  const std::string long_key(kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(store_->set_string(long_key, "x").code(), StatusCode::invalid_argument);
  std::vector<std::string> many(kMaxWaitKeys + 1, "k");
  EXPECT_EQ(store_->wait(many, 1ms).code(), StatusCode::invalid_argument);
  Bytes huge(kMaxValueBytes + 1);
  EXPECT_EQ(store_->set("huge", huge).code(), StatusCode::invalid_argument);
  EXPECT_TRUE(store_->set_string("after", "still works").ok());
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreTest,
    ::testing::Values(Impl{"InMemory", [] { return std::make_unique<testing::InMemoryWorld>(); }},
                      Impl{"File", [] { return std::make_unique<testing::FileWorld>(); }},
                      Impl{"Tcp", [] { return std::make_unique<testing::TcpWorld>(); }}),
    [](const ::testing::TestParamInfo<Impl>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tictac::bootstrap
