// GPUDirect detection (dma-buf, nvidia-peermem through a scratch sysfs tree) and dma-buf
// export alignment.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cuda/gpudirect.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

using testing::FakeApi;
namespace fs = std::filesystem;

class GpuDirectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("tictac_sysfs_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  fs::path root;
};

TEST_F(GpuDirectTest, DmaBufWhenTheDeviceSupportsIt) {
  FakeApi api;
  GpuDirectSupport s = detect_gpudirect(api, 0, root.string());
  EXPECT_TRUE(s.dma_buf);
  EXPECT_FALSE(s.peer_memory);
  EXPECT_TRUE(s.available());
  EXPECT_TRUE(s.reason.empty());
}

TEST_F(GpuDirectTest, NeitherPathGivesAReasonNamingBoth) {
  FakeApi api;
  DeviceCaps caps;
  caps.stream_mem_ops = true;
  api.set_caps(caps);
  GpuDirectSupport s = detect_gpudirect(api, 0, root.string());
  EXPECT_FALSE(s.available());
  EXPECT_NE(s.reason.find("dma-buf unavailable"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("nvidia-peermem not loaded"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("memory_peers/nv_mem/version"), std::string::npos) << s.reason;
}

TEST_F(GpuDirectTest, PeerMemoryFromEitherSysfsMarker) {
  FakeApi api;
  api.set_caps(DeviceCaps{});
  fs::create_directories(root / "kernel/mm/memory_peers/nv_mem");
  std::ofstream(root / "kernel/mm/memory_peers/nv_mem/version") << "1.3\n";
  EXPECT_TRUE(detect_gpudirect(api, 0, root.string()).peer_memory);
  fs::remove_all(root / "kernel");
  EXPECT_FALSE(detect_gpudirect(api, 0, root.string()).peer_memory);
  fs::create_directories(root / "module/nvidia_peermem");
  GpuDirectSupport s = detect_gpudirect(api, 0, root.string());
  EXPECT_TRUE(s.peer_memory);
  EXPECT_FALSE(s.dma_buf);
  EXPECT_TRUE(s.reason.empty());
}

TEST_F(GpuDirectTest, DeviceQueryFailureIsPartOfTheReason) {
  FakeApi api;
  api.fail_next("device_caps", Status(StatusCode::cuda_error, "cuDeviceGetAttribute failed: scripted"));
  GpuDirectSupport s = detect_gpudirect(api, 0, root.string());
  EXPECT_FALSE(s.available());
  EXPECT_NE(s.reason.find("scripted"), std::string::npos) << s.reason;
}

TEST(DmaBufExport, AlignsTheRangeToPagesAndOwnsTheFd) {
  FakeApi api;
  int fd = -1;
  {
    Result<DmaBuf> buf = export_dmabuf(api, 0x10000 + 100, 5000, 4096);
    ASSERT_TRUE(buf.ok()) << buf.status().to_string();
    EXPECT_EQ(api.last_dmabuf_ptr(), 0x10000u);
    EXPECT_EQ(api.last_dmabuf_bytes(), 8192u);
    EXPECT_EQ(buf->aligned_start(), 0x10000u);
    EXPECT_EQ(buf->aligned_bytes(), 8192u);
    EXPECT_EQ(buf->offset(), 100u);
    fd = buf->fd();
    ASSERT_GE(fd, 0);
    DmaBuf moved = std::move(*buf);
    EXPECT_EQ(moved.fd(), fd);
    EXPECT_EQ(buf->fd(), -1);
    EXPECT_NE(::fcntl(fd, F_GETFD), -1);
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed with its owner
  Result<DmaBuf> exact = export_dmabuf(api, 0x20000, 4096, 4096);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->aligned_bytes(), 4096u);
  EXPECT_EQ(exact->offset(), 0u);
  Result<DmaBuf> host_page = export_dmabuf(api, 0x20000, 1);
  ASSERT_TRUE(host_page.ok());
  EXPECT_EQ(host_page->aligned_bytes(), static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(DmaBufExport, RejectsBadRangesAndReportsExportFailures) {
  FakeApi api;
  EXPECT_EQ(export_dmabuf(api, 0, 10).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(export_dmabuf(api, 4096, 0).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(export_dmabuf(api, 4096, 10, 3000).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(export_dmabuf(api, ~std::uint64_t{0} - 10, 100).status().code(), StatusCode::invalid_argument);
  api.fail_next("dmabuf_fd", Status(StatusCode::cuda_error, "cuMemGetHandleForAddressRange failed: scripted"));
  Result<DmaBuf> failed = export_dmabuf(api, 4096, 10);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::cuda_error);
  EXPECT_NE(failed.status().message().find("GPUDirect"), std::string::npos);
}

}  // namespace
}  // namespace tictac::cuda
