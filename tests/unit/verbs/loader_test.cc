// The libibverbs loader and the viability probe: on this machine (library present or not, no
// RDMA devices) and on fake tables that reproduce each "not viable" case deterministically.
#include <gtest/gtest.h>

#include <cerrno>

#include "transport/verbs/fake/fake_fabric.h"
#include "transport/verbs/ibv_api.h"
#include "transport/verbs/ibv_loader.h"
#include "transport/verbs/probe.h"

namespace tictac::verbs {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(Loader, LoadsOrSaysWhyNot) {
  Result<IbvApi> api = load_libibverbs();
  if (!api.ok()) {
    EXPECT_EQ(api.status().code(), StatusCode::unavailable);
    EXPECT_TRUE(starts_with(api.status().message(), "verbs not viable: ")) << api.status().to_string();
    return;
  }
  EXPECT_EQ(api->provider, "libibverbs.so.1");
  EXPECT_TRUE(check_complete(*api).ok());
  // The loader caches: a second call gives the same table.
  Result<IbvApi> again = load_libibverbs();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->open_device, api->open_device);
  EXPECT_EQ(again->reg_mr_iova2, api->reg_mr_iova2);
}

TEST(Loader, RealDeviceScanNeverCrashesAndExplains) {
  Result<IbvApi> api = load_libibverbs();
  if (!api.ok()) {
    GTEST_SKIP() << api.status().message();
  }
  Result<std::vector<ActivePort>> ports = find_active_ports(*api);
  if (ports.ok()) {
    ASSERT_FALSE(ports->empty());
    EXPECT_EQ(ports->front().attr.state, IBV_PORT_ACTIVE);
    return;
  }
  EXPECT_EQ(ports.status().code(), StatusCode::unavailable);
  EXPECT_TRUE(starts_with(ports.status().message(), "verbs not viable: ")) << ports.status().to_string();
  std::cout << "[ probe    ] " << ports.status().message() << "\n";
}

TEST(Probe, IsOneLine) {
  const std::string line = probe();
  EXPECT_TRUE(starts_with(line, "verbs: viable via ") || starts_with(line, "verbs not viable: "))
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  std::cout << "[ probe    ] " << line << "\n";
}

TEST(Probe, KernelWithoutRdmaIsNotViable) {
  fake::FakeFabric fabric;
  IbvApi api = fabric.api();
  api.get_device_list = [](int*) -> ibv_device** {
    errno = ENOSYS;
    return nullptr;
  };
  const std::string line = probe(api);
  EXPECT_TRUE(starts_with(line, "verbs not viable: no RDMA support in the kernel")) << line;
  EXPECT_NE(line.find("Function not implemented"), std::string::npos) << line;
}

TEST(Probe, OtherDeviceListErrorsNameTheErrno) {
  fake::FakeFabric fabric;
  IbvApi api = fabric.api();
  api.get_device_list = [](int*) -> ibv_device** {
    errno = EACCES;
    return nullptr;
  };
  Result<std::vector<ActivePort>> ports = find_active_ports(api);
  ASSERT_FALSE(ports.ok());
  EXPECT_NE(ports.status().message().find("Permission denied"), std::string::npos)
      << ports.status().to_string();
}

TEST(Probe, EmptyDeviceListIsNotViable) {
  fake::FabricOptions options;
  options.devices.clear();
  fake::FakeFabric fabric(options);
  const std::string line = probe(fabric.api());
  EXPECT_TRUE(starts_with(line, "verbs not viable: no RDMA devices found")) << line;
}

TEST(Probe, NoActivePortIsNotViableAndListsThePorts) {
  fake::FabricOptions options;
  options.devices = {fake::DeviceSpec{"fake0", {fake::PortSpec{}, fake::PortSpec{}}}};
  options.devices[0].ports[0].state = IBV_PORT_DOWN;
  options.devices[0].ports[1].state = IBV_PORT_INIT;
  fake::FakeFabric fabric(options);
  const std::string line = probe(fabric.api());
  EXPECT_TRUE(starts_with(line, "verbs not viable: no ACTIVE port")) << line;
  EXPECT_NE(line.find("fake0 port 1 is PORT_DOWN"), std::string::npos) << line;
  EXPECT_NE(line.find("fake0 port 2 is PORT_INIT"), std::string::npos) << line;
  EXPECT_EQ(fabric.live_objects(), 0U);  // the probe closed what it opened
}

TEST(Probe, ViableFabricListsActivePorts) {
  fake::FabricOptions options;
  options.devices = {
      fake::DeviceSpec{"fake_ib0", {fake::PortSpec{}}},
      fake::DeviceSpec{"fake_roce0", {fake::PortSpec{IBV_LINK_LAYER_ETHERNET, IBV_MTU_1024}}}};
  fake::FakeFabric fabric(options);
  Result<std::vector<ActivePort>> ports = find_active_ports(fabric.api());
  ASSERT_TRUE(ports.ok()) << ports.status().to_string();
  ASSERT_EQ(ports->size(), 2U);
  EXPECT_EQ((*ports)[0].device, "fake_ib0");
  EXPECT_EQ((*ports)[1].attr.link_layer, IBV_LINK_LAYER_ETHERNET);
  const std::string line = probe(fabric.api());
  EXPECT_EQ(line,
            "verbs: viable via fake fabric: fake_ib0 port 1 (InfiniBand, MTU 4096, LID 1); "
            "fake_roce0 port 1 (Ethernet, MTU 1024)");
}

TEST(IbvApiTable, IncompleteTableIsRejectedByName) {
  IbvApi api;
  api.provider = "test";
  Status s = check_complete(api);
  EXPECT_EQ(s.code(), StatusCode::internal);
  EXPECT_NE(s.message().find("get_device_list"), std::string::npos) << s.to_string();
  fake::FakeFabric fabric;
  api = fabric.api();
  EXPECT_TRUE(check_complete(api).ok());
  api.poll_cq = nullptr;
  EXPECT_NE(check_complete(api).message().find("poll_cq"), std::string::npos);
  // A probe on an incomplete table reports instead of crashing.
  EXPECT_NE(probe(api).find("lacks poll_cq"), std::string::npos);
}

TEST(IbvApiTable, WorkCompletionStatusesMapToCodes) {
  EXPECT_EQ(classify_wc_status(IBV_WC_SUCCESS), StatusCode::ok);
  EXPECT_EQ(classify_wc_status(IBV_WC_WR_FLUSH_ERR), StatusCode::cancelled);
  EXPECT_EQ(classify_wc_status(IBV_WC_RETRY_EXC_ERR), StatusCode::connection_lost);
  EXPECT_EQ(classify_wc_status(IBV_WC_RNR_RETRY_EXC_ERR), StatusCode::connection_lost);
  EXPECT_EQ(classify_wc_status(IBV_WC_REM_ACCESS_ERR), StatusCode::protocol_error);
  EXPECT_EQ(classify_wc_status(IBV_WC_LOC_LEN_ERR), StatusCode::protocol_error);
  EXPECT_EQ(classify_wc_status(IBV_WC_GENERAL_ERR), StatusCode::internal);
  fake::FakeFabric fabric;
  const IbvApi api = fabric.api();
  ibv_wc wc{};
  EXPECT_TRUE(wc_status_to_status(api, wc, "write").ok());
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.wr_id = 17;
  wc.qp_num = 0x101;
  const Status s = wc_status_to_status(api, wc, "RDMA write to peer 3");
  EXPECT_EQ(s.code(), StatusCode::protocol_error);
  EXPECT_NE(s.message().find("RDMA write to peer 3 failed: remote access error"),
            std::string::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("wr_id 17"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace tictac::verbs
