// GpuRegistrar against the fake fabric and the scripted CUDA table: dma-buf first, then
// nvidia-peermem, a refusal naming the reason otherwise, and the dma-buf fd's lifetime.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "cuda/gpudirect.h"
#include "tests/unit/cuda/fake_api.h"
#include "transport/verbs/backend/gpu_registration.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac::verbs {
namespace {

namespace fs = std::filesystem;
using cuda::testing::FakeApi;

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::size_t open_fds() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) n += e.is_symlink() ? 1 : 0;
  return n;
}

class GpuRegistrationTest : public ::testing::Test {
 protected:
  explicit GpuRegistrationTest(fake::FabricOptions options = {}) : fabric_(options) {}
  void SetUp() override {
    api_ = fabric_.api();
    int n = 0;
    ibv_device** list = api_.get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ctx_ = api_.open_device(list[0]);
    api_.free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = api_.alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    root_ = fs::temp_directory_path() /
            ("tictac_gpureg_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    EXPECT_EQ(api_.dealloc_pd(pd_), 0);
    EXPECT_EQ(api_.close_device(ctx_), 0);
    EXPECT_EQ(fabric_.live_objects(), 0U);
    fs::remove_all(root_);
  }
  void load_peermem() { fs::create_directories(root_ / "module/nvidia_peermem"); }
  void no_dmabuf() { cuda_.set_caps(cuda::DeviceCaps{true, false, false, true}); }
  cuda::GpuDirectSupport detect() { return cuda::detect_gpudirect(cuda_, 0, root_.string()); }

  fake::FakeFabric fabric_;
  IbvApi api_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  FakeApi cuda_;
  fs::path root_;
};

TEST_F(GpuRegistrationTest, DmaBufIsChosenWhenAvailableAndKeepsTheFdWithTheMr) {
  load_peermem();  // both available: dma-buf wins
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  ASSERT_TRUE(reg.viability().ok()) << reg.viability().to_string();
  ASSERT_EQ(reg.path(), GpuPath::dma_buf);
  auto* dev = static_cast<char*>(cuda_.alloc_device(3 * 4096));
  const auto ptr = reinterpret_cast<cuda::DevicePtr>(dev + 100);  // not page-aligned
  auto r = reg.register_range(ptr, 5000, kAccess, "test buffer");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GpuRegistration& g = **r;
  EXPECT_EQ(g.path(), GpuPath::dma_buf);
  EXPECT_EQ(g.mr().begin(), ptr);  // iova = the device pointer
  EXPECT_EQ(g.mr().length(), 5000U);
  EXPECT_TRUE(g.mr().covers(dev + 100, 5000, kAccess));
  EXPECT_EQ(cuda_.last_dmabuf_ptr() % 4096, 0U);
  EXPECT_LE(cuda_.last_dmabuf_ptr(), ptr);
  ASSERT_GE(g.dmabuf_fd(), 0);
  EXPECT_EQ(fabric_.dmabuf_fds(), std::vector<int>{g.dmabuf_fd()});
  const int fd = g.dmabuf_fd();
  EXPECT_GE(::fcntl(fd, F_GETFD), 0);
  r = Status(StatusCode::cancelled, "release");  // drops the registration
  EXPECT_TRUE(fabric_.dmabuf_fds().empty());
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed with the MR: no leak
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(fabric_.dmabuf_closed_before_dereg(), 0U);  // and only after the MR was deregistered
}

TEST_F(GpuRegistrationTest, PeerMemoryWhenOnlyThat) {
  no_dmabuf();
  load_peermem();
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  ASSERT_EQ(reg.path(), GpuPath::peer_memory);
  auto* dev = static_cast<char*>(cuda_.alloc_device(4096));
  auto r = reg.register_range(reinterpret_cast<cuda::DevicePtr>(dev), 4096, kAccess, "buf");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->path(), GpuPath::peer_memory);
  EXPECT_EQ((*r)->dmabuf_fd(), -1);
  EXPECT_EQ((*r)->mr().begin(), reinterpret_cast<std::uintptr_t>(dev));
  EXPECT_TRUE(fabric_.dmabuf_fds().empty());
  EXPECT_EQ(cuda_.last_dmabuf_ptr(), 0U);  // never exported
}

TEST_F(GpuRegistrationTest, PeerMemoryWhenLibibverbsLacksRegDmabufMr) {
  load_peermem();
  api_.reg_dmabuf_mr = nullptr;  // rdma-core < 34
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  EXPECT_EQ(reg.path(), GpuPath::peer_memory);
}

TEST_F(GpuRegistrationTest, RefusesWithTheLibraryReasonWhenRegDmabufMrIsMissing) {
  api_.reg_dmabuf_mr = nullptr;
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  EXPECT_FALSE(reg.path().has_value());
  EXPECT_EQ(reg.viability().code(), StatusCode::unavailable);
  EXPECT_NE(reg.viability().message().find("GPUDirect not viable: libibverbs lacks "
                                           "ibv_reg_dmabuf_mr (rdma-core < 34)"),
            std::string::npos)
      << reg.viability().to_string();
}

TEST_F(GpuRegistrationTest, RefusesWithTheDetectReasonWhenNeitherPathExists) {
  no_dmabuf();
  const cuda::GpuDirectSupport support = detect();
  GpuRegistrar reg(api_, pd_, cuda_, support);
  ASSERT_FALSE(reg.path().has_value());
  EXPECT_EQ(reg.viability().message(), "GPUDirect not viable: " + support.reason);
  EXPECT_NE(reg.viability().message().find("nvidia-peermem not loaded"), std::string::npos);
  auto* dev = cuda_.alloc_device(4096);
  auto r = reg.register_range(reinterpret_cast<cuda::DevicePtr>(dev), 4096, kAccess, "buf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::unavailable);
  EXPECT_EQ(r.status().message(), reg.viability().message());
}

TEST_F(GpuRegistrationTest, RefusesWhenCudaIsNotViable) {
  FakeApi off(0, Status(StatusCode::unavailable, "no CUDA driver (libcuda.so.1 not found)"));
  GpuRegistrar reg(api_, pd_, off, cuda::detect_gpudirect(off, 0, root_.string()));
  EXPECT_FALSE(reg.path().has_value());
  EXPECT_NE(reg.viability().message().find("libcuda.so.1 not found"), std::string::npos)
      << reg.viability().to_string();
}

TEST_F(GpuRegistrationTest, ExportFailureIsReportedAndNothingIsRegistered) {
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  cuda_.fail_next("dmabuf_fd", Status(StatusCode::cuda_error, "CUDA_ERROR_NOT_SUPPORTED"));
  auto* dev = cuda_.alloc_device(4096);
  auto r = reg.register_range(reinterpret_cast<cuda::DevicePtr>(dev), 4096, kAccess, "buf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::cuda_error);
  EXPECT_NE(r.status().message().find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos);
}

TEST_F(GpuRegistrationTest, EmptyRangeIsInvalid) {
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  auto* dev = cuda_.alloc_device(4096);
  EXPECT_EQ(reg.register_range(reinterpret_cast<cuda::DevicePtr>(dev), 0, kAccess, "buf")
                .status().code(),
            StatusCode::invalid_argument);
}

class GpuRegistrationLimitTest : public GpuRegistrationTest {
 protected:
  GpuRegistrationLimitTest() : GpuRegistrationTest(limited()) {}
  static fake::FabricOptions limited() {
    fake::FabricOptions o;
    o.max_locked_bytes = 1024;
    return o;
  }
};

TEST_F(GpuRegistrationLimitTest, EnomemNamesTheLockedMemoryLimitAndClosesTheFd) {
  GpuRegistrar reg(api_, pd_, cuda_, detect());
  ASSERT_EQ(reg.path(), GpuPath::dma_buf);
  auto* dev = cuda_.alloc_device(4096);
  const std::size_t fds = open_fds();
  auto r = reg.register_range(reinterpret_cast<cuda::DevicePtr>(dev), 4096, kAccess, "buf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(r.status().message().find("ibv_reg_dmabuf_mr"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("ulimit -l"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(open_fds(), fds);  // the exported fd did not leak
}

}  // namespace
}  // namespace tictac::verbs
