// Memory-type detection for user pointers and the buffer's device/stream.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/device_buffer.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

using testing::FakeApi;

TEST(DeviceBuffer, DetectsEachMemoryType) {
  FakeApi api(2);
  std::vector<char> plain(64), pinned(64), managed(64);
  api.register_memory(pinned.data(), pinned.size(), MemoryType::pinned_host, -1);
  api.register_memory(managed.data(), managed.size(), MemoryType::managed, 0);
  void* dev = api.alloc_device(1024, 1);
  Stream s = *api.create_stream();

  Result<DeviceBuffer> b = describe_buffer(api, plain.data(), plain.size());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->type, MemoryType::host);
  EXPECT_EQ(b->device, -1);
  b = describe_buffer(api, pinned.data(), 64);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->type, MemoryType::pinned_host);
  EXPECT_FALSE(b->on_device());
  b = describe_buffer(api, managed.data() + 8, 56, s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->type, MemoryType::managed);
  EXPECT_TRUE(b->on_device());
  b = describe_buffer(api, static_cast<char*>(dev) + 512, 512, s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->type, MemoryType::device);
  EXPECT_EQ(b->device, 1);
  EXPECT_EQ(b->stream, s);
  EXPECT_TRUE(b->on_device());
  EXPECT_NE(b->describe().find("device (device 1) buffer of 512 bytes"), std::string::npos) << b->describe();
}

TEST(DeviceBuffer, RejectsRangesPastTheAllocationAndNullAddresses) {
  FakeApi api;
  void* dev = api.alloc_device(1024);
  Result<DeviceBuffer> b = describe_buffer(api, static_cast<char*>(dev) + 512, 513);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(b.status().message().find("runs past the end"), std::string::npos);
  EXPECT_EQ(describe_buffer(api, nullptr, 8).status().code(), StatusCode::invalid_argument);
  Result<DeviceBuffer> empty = describe_buffer(api, nullptr, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size, 0u);
}

TEST(DeviceBuffer, PointerQueryFailureIsACudaError) {
  FakeApi api;
  char byte = 0;
  api.fail_next("pointer_info", Status(StatusCode::cuda_error, "cuPointerGetAttributes failed: scripted"));
  EXPECT_EQ(describe_buffer(api, &byte, 1).status().code(), StatusCode::cuda_error);
}

TEST(DeviceBuffer, MemoryTypeNames) {
  EXPECT_EQ(to_string(MemoryType::host), "host");
  EXPECT_EQ(to_string(MemoryType::pinned_host), "pinned_host");
  EXPECT_EQ(to_string(MemoryType::device), "device");
  EXPECT_EQ(to_string(MemoryType::managed), "managed");
}

TEST(DeviceBuffer, DescribeSummarisesTheTable) {
  FakeApi api(2);
  EXPECT_EQ(describe(api),
            "CUDA viable: 2 device(s); device 0: stream memory operations yes, dma-buf yes, GPUDirect RDMA yes; "
            "device 1: stream memory operations yes, dma-buf yes, GPUDirect RDMA yes");
  DeviceCaps none;
  api.set_caps(none);
  EXPECT_NE(describe(api).find("stream memory operations unsupported (event fallback)"), std::string::npos);
}

}  // namespace
}  // namespace tictac::cuda
