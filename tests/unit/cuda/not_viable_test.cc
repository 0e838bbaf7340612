// The not-viable path: the layer loads and answers every request with a clear Status.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cuda/api.h"
#include "cuda/device_buffer.h"
#include "cuda/event_pool.h"
#include "cuda/flag_pool.h"
#include "cuda/gpudirect.h"
#include "cuda/runtime_api.h"
#include "cuda/send_gate.h"
#include "cuda/staging_pool.h"
#include "cuda/stream_completion.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

// Every request on a non-viable table fails with its reason and nothing crashes.
void expect_everything_refused(Api& api) {
  const Status& why = api.viability();
  ASSERT_FALSE(why.ok());
  EXPECT_EQ(why.code(), StatusCode::unavailable);
  EXPECT_EQ(why.message().rfind("CUDA not viable: ", 0), 0u) << why.message();
  EXPECT_EQ(api.device_count(), 0);
  EXPECT_EQ(api.device_caps(0).status(), why);
  EXPECT_EQ(api.use_device(0), why);
  EXPECT_EQ(api.alloc_pinned(64, true).status(), why);
  EXPECT_EQ(api.free_pinned(nullptr), why);
  EXPECT_EQ(api.create_stream().status(), why);
  EXPECT_EQ(api.destroy_stream(nullptr), why);
  EXPECT_EQ(api.wait_value32(nullptr, 64, 1, false), why);
  char byte = 0;
  EXPECT_EQ(api.memcpy_async(&byte, &byte, 1, nullptr), why);
  EXPECT_EQ(api.create_event().status(), why);
  EXPECT_EQ(api.destroy_event(nullptr), why);
  EXPECT_EQ(api.record_event(nullptr, nullptr), why);
  EXPECT_EQ(api.event_fired(nullptr).status(), why);
  EXPECT_EQ(api.stream_wait_event(nullptr, nullptr), why);
  EXPECT_EQ(api.dmabuf_fd(4096, 4096).status(), why);

  // Plain pointers are host memory; a buffer with a stream is refused.
  std::vector<char> host(128);
  Result<PointerInfo> info = api.pointer_info(host.data());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->type, MemoryType::host);
  EXPECT_EQ(info->device, -1);
  Result<DeviceBuffer> buf = describe_buffer(api, host.data(), host.size());
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->type, MemoryType::host);
  EXPECT_FALSE(buf->on_device());
  auto fake_stream = reinterpret_cast<Stream>(0x10);
  Result<DeviceBuffer> with_stream = describe_buffer(api, host.data(), host.size(), fake_stream);
  ASSERT_FALSE(with_stream.ok());
  EXPECT_EQ(with_stream.status().code(), StatusCode::unavailable);
  EXPECT_NE(with_stream.status().message().find("CUDA not viable"), std::string::npos);

  // Every object of the layer refuses to be built.
  EXPECT_EQ(EventPool::create(api, 0, 4).status(), why);
  EXPECT_EQ(FlagPool::create(api, 4).status(), why);
  const GpuDirectSupport gd = detect_gpudirect(api, 0);
  EXPECT_FALSE(gd.available());
  EXPECT_NE(gd.reason.find("CUDA not viable"), std::string::npos) << gd.reason;
  EXPECT_EQ(export_dmabuf(api, 4096, 100).status().code(), StatusCode::unavailable);
  EXPECT_EQ(describe(api), why.message());
}

TEST(CudaNotViable, RuntimeApiReportsWhyOnThisMachine) {
  std::unique_ptr<Api> api = open_runtime_api();
  ASSERT_NE(api, nullptr);
  if (api->viability().ok()) GTEST_SKIP() << "CUDA is viable here: " << describe(*api);
  std::printf("probe: %s\nbuild: %s\n", api->viability().message().c_str(), build_description().c_str());
  expect_everything_refused(*api);
}

TEST(CudaNotViable, UnavailableTableRefusesEverything) {
  std::unique_ptr<Api> api = make_unavailable_api(not_viable("no device: scripted"));
  EXPECT_EQ(api->viability().message(), "CUDA not viable: no device: scripted");
  expect_everything_refused(*api);
}

TEST(CudaNotViable, UnavailableTableNeverReportsOk) {
  std::unique_ptr<Api> api = make_unavailable_api(Status::Ok());
  EXPECT_EQ(api->viability().code(), StatusCode::unavailable);
}

TEST(CudaNotViable, LayerObjectsRefuseANonViableTableEvenWithAPool) {
  // A pool built on a viable table cannot be used to smuggle a non-viable one into the layer.
  testing::FakeApi good;
  Result<std::unique_ptr<EventPool>> events = EventPool::create(good, 0, 4);
  ASSERT_TRUE(events.ok());
  std::unique_ptr<Api> bad = make_unavailable_api(not_viable("no driver: scripted"));
  EXPECT_EQ(StreamCompletion::create(*bad, **events, StreamCompletionOptions{}).status().code(),
            StatusCode::unavailable);
  EXPECT_EQ(StagingPool::create(*bad, **events, StagingOptions{}).status().code(), StatusCode::unavailable);
}

}  // namespace
}  // namespace tictac::cuda
