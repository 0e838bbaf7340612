// TensorChannel (integration/tf/rendezvous, TF-free) over loopback TCP: the payload receive that
// the consumer pre-posts from a key's previous size. Same size: the payload lands in the
// pre-posted buffer (one allocation, before the header). Another size, the same size with other
// dims, an error or an empty tensor: the producer releases the pre-posted receive and the fetch
// still gets exactly the producer's bytes and header.
#include "integration/tf/rendezvous/tensor_channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

namespace tictac::tfrdv {
namespace {

struct Answer {
  int code = kCodeOk;
  std::vector<std::int64_t> dims;  // float32 elements
};

struct Result {
  int code = -1;
  std::string message;
  TensorHeader header;
  std::vector<char> data;   // the last allocation: where the payload landed
  int allocations = 0;
};

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    producer_ = TensorChannel::create(
        "tcp://127.0.0.1:0",
        [this](const FetchRequest& req, ReplyFn reply) {
          Answer a;
          {
            std::lock_guard<std::mutex> lock(mu_);
            a = answers_[req.key];
          }
          TensorHeader h;
          h.code = a.code;
          if (a.code != kCodeOk) {
            h.message = "producer failed";
            reply(std::move(h), nullptr, nullptr);
            return;
          }
          h.dtype = 1;  // DT_FLOAT
          h.dims = a.dims;
          const std::int64_t n = std::accumulate(a.dims.begin(), a.dims.end(), std::int64_t{1},
                                                 std::multiplies<>());
          auto data = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n));
          std::iota(data->begin(), data->end(), static_cast<float>(req.step_id));
          h.payload_bytes = data->size() * sizeof(float);
          reply(std::move(h), data->data(), data);
        },
        &error);
    ASSERT_TRUE(producer_) << error;
    consumer_ = TensorChannel::create("tcp://127.0.0.1:0", [](const FetchRequest&, ReplyFn) {},
                                      &error);
    ASSERT_TRUE(consumer_) << error;
  }

  Result fetch(std::int64_t step, Answer answer) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers_["k"] = answer;
    }
    auto r = std::make_shared<Result>();
    auto buffers = std::make_shared<std::vector<std::shared_ptr<std::vector<char>>>>();
    std::promise<void> done;
    consumer_->fetch(
        producer_->address(), "producer", step, "k", 0,
        [r, buffers](const TensorHeader& h, std::string*) -> void* {
          r->allocations++;
          buffers->push_back(std::make_shared<std::vector<char>>(h.payload_bytes));
          return buffers->back()->data();
        },
        [&, r, buffers](int code, const std::string& message, const TensorHeader& h) {
          r->code = code;
          r->message = message;
          r->header = h;
          if (!buffers->empty()) r->data = *buffers->back();
          done.set_value();
        });
    EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
    return *r;
  }

  static std::vector<char> expected(std::int64_t step, std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), static_cast<float>(step));
    const char* p = reinterpret_cast<const char*>(v.data());
    return std::vector<char>(p, p + v.size() * sizeof(float));
  }

  std::mutex mu_;
  std::map<std::string, Answer> answers_;
  std::unique_ptr<TensorChannel> producer_, consumer_;
};

TEST_F(ChannelTest, PrepostedPayloadReceiveAndEveryWayOut) {
  // 1. First fetch of the key: nothing to predict, one allocation from the real header.
  Result r = fetch(1, {kCodeOk, {100}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.allocations, 1);
  EXPECT_EQ(r.data, expected(1, 100));
  // 2. Same size: pre-posted, the payload lands in it, still one allocation.
  r = fetch(2, {kCodeOk, {100}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.allocations, 1);
  EXPECT_FALSE(r.header.alt);
  EXPECT_EQ(r.data, expected(2, 100));
  // 3. Other size: released, the payload comes on the alternate tag into a second buffer.
  r = fetch(3, {kCodeOk, {300}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.allocations, 2);
  EXPECT_TRUE(r.header.alt);
  EXPECT_EQ(r.data, expected(3, 300));
  // 4. Same bytes, other dims: the fast path; the header carries the producer's dims.
  r = fetch(4, {kCodeOk, {10, 30}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.allocations, 1);
  EXPECT_EQ(r.header.dims, (std::vector<std::int64_t>{10, 30}));
  EXPECT_EQ(r.data, expected(4, 300));
  // 5. The producer fails: its error, and the pre-posted receive was released.
  r = fetch(5, {kCodeInvalidArgument, {}});
  EXPECT_EQ(r.code, kCodeInvalidArgument);
  EXPECT_NE(r.message.find("producer failed"), std::string::npos) << r.message;
  // 6. An empty tensor, then the old size again.
  r = fetch(6, {kCodeOk, {0}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.header.payload_bytes, 0u);
  r = fetch(7, {kCodeOk, {10, 30}});
  ASSERT_EQ(r.code, kCodeOk) << r.message;
  EXPECT_EQ(r.allocations, 1);
  EXPECT_EQ(r.data, expected(7, 300));
  const ChannelStats s = process_stats();
  EXPECT_EQ(s.recv_tensors, 6);  // every fetch but the failed one
}

}  // namespace
}  // namespace tictac::tfrdv
