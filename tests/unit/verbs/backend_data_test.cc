// Verbs backend, data path and setup: frames of every size through the RDMA rings, back-pressure,
// disconnects, and the pieces below the endpoint (QpInfo, side-channel addresses, configuration,
// the registration cache). The data tests run on the fake fabric (InfiniBand and RoCE ports) and
// on a real device when one has an ACTIVE port, and skip with the probe's reason otherwise.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/verbs/backend_harness.h"
#include "transport/verbs/backend/qp_info.h"
#include "transport/verbs/backend/registration.h"
#include "transport/verbs/backend/side_channel.h"
#include "transport/verbs/ibv_loader.h"
#include "transport/verbs/probe.h"

namespace tictac::verbs::testing {
namespace {

using transport::wire::Header;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A small ring so that frames span several slots and the ring fills up.
VerbsConfig small_ring() {
  VerbsConfig c;
  c.slot_bytes = 4096;
  c.ring_slots = 4;
  c.signal_every = 3;
  return c;
}

class BackendData : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "real") {
      Result<IbvApi> api = load_libibverbs();
      if (!api.ok()) GTEST_SKIP() << api.status().message();
      Result<std::vector<ActivePort>> ports = find_active_ports(*api);
      if (!ports.ok()) GTEST_SKIP() << ports.status().message();
      api_ = *api;
    } else {
      fabric_ = std::make_unique<fake::FakeFabric>(
          threaded_fabric(GetParam() == "fake_roce" ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND));
      api_ = fabric_->api();
    }
  }
  void TearDown() override {
    pair_.reset();
    if (fabric_) {
      EXPECT_EQ(fabric_->live_objects(), 0u) << "verbs objects leaked";
    }
  }
  BackendPair& make_pair(const VerbsConfig& a = small_ring(), const VerbsConfig& b = small_ring()) {
    pair_ = std::make_unique<BackendPair>(api_, a, b);
    return *pair_;
  }

  // Posts every frame from `from`, waiting for capacity when there is none; returns when `to`
  // has received them all.
  void send_all(Side& from, Side& to, const std::vector<std::uint32_t>& sizes, std::uint64_t seed,
                std::vector<std::vector<std::byte>>& keep) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      keep.push_back(bytes_for(sizes[i], seed + i));
      ASSERT_TRUE(pair_->run_until([&] { return from.endpoint->has_capacity(); }));
      const Status st = from.endpoint->post(data_header(sizes[i], i + 1), keep.back().data(), 1000 + i);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    ASSERT_TRUE(pair_->run_until([&] { return to.sink.frames.size() == sizes.size() && from.sink.sent.size() == sizes.size(); }));
  }

  std::unique_ptr<fake::FakeFabric> fabric_;
  IbvApi api_;
  std::unique_ptr<BackendPair> pair_;
};

TEST_P(BackendData, FramesOfEverySizeArriveIntactBothWays) {
  BackendPair& p = make_pair();
  ASSERT_TRUE(p.attached());
  ASSERT_TRUE(p.connect());
  // Around the slot size (4096 payload bytes) and across many slots.
  const std::vector<std::uint32_t> sizes = {0, 1, 4095, 4096, 4097, 3 * 4096 + 5, (64 << 10) + 3, 200};
  for (auto [from, to, seed] : {std::tuple{&p.a, &p.b, 10}, std::tuple{&p.b, &p.a, 50}}) {
    std::vector<std::vector<std::byte>> keep;
    send_all(*from, *to, sizes, seed, keep);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const RecordingSink::Frame& f = to->sink.frames[i];
      EXPECT_EQ(f.header.msg_id, i + 1);
      EXPECT_EQ(f.header.length, sizes[i]);
      EXPECT_EQ(f.payload, keep[i]) << "frame " << i << " of " << sizes[i] << " bytes differs";
      EXPECT_EQ(from->sink.sent[i], 1000 + i) << "on_sent out of order";
    }
    EXPECT_EQ(from->verbs()->frames_pending(), 0u);
  }
  EXPECT_TRUE(p.a.sink.failures.empty());
  EXPECT_TRUE(p.b.sink.failures.empty());
  EXPECT_TRUE(contains(p.a.endpoint->describe(), "verbs ")) << p.a.endpoint->describe();
  EXPECT_TRUE(contains(p.a.endpoint->describe(), "127.0.0.1:")) << p.a.endpoint->describe();
}

TEST_P(BackendData, FullRingSaysNoCapacityThenWritable) {
  VerbsConfig c = small_ring();
  c.ring_slots = 2;
  BackendPair& p = make_pair(c, c);
  ASSERT_TRUE(p.connect());
  // Five slots' worth: the first two go out at once, the rest wait for credits inside the
  // endpoint, which meanwhile has no capacity.
  const std::vector<std::byte> big = bytes_for(5 * 4096, 3);
  ASSERT_TRUE(p.a.endpoint->has_capacity());
  ASSERT_TRUE(p.a.endpoint->post(data_header(5 * 4096, 1), big.data(), 1).ok());
  EXPECT_FALSE(p.a.endpoint->has_capacity());
  const std::vector<std::byte> small = bytes_for(10, 4);
  const Status refused = p.a.endpoint->post(data_header(10, 2), small.data(), 2);
  EXPECT_EQ(refused.code(), StatusCode::resource_exhausted) << refused.to_string();
  ASSERT_TRUE(p.run_until([&] { return p.a.sink.writable > 0; }));
  ASSERT_TRUE(p.run_until([&] { return p.b.sink.frames.size() == 1 && p.a.sink.sent.size() == 1; }));
  EXPECT_EQ(p.b.sink.frames[0].payload, big);
  // The refused frame was not queued: only frame 1 arrived.
  p.run_a_little();
  EXPECT_EQ(p.b.sink.frames.size(), 1u);
  EXPECT_EQ(p.a.sink.sent, std::vector<std::uint64_t>{1});
}

TEST_P(BackendData, ClosingOneSideIsConnectionLostForTheOther) {
  BackendPair& p = make_pair();
  ASSERT_TRUE(p.connect());
  const std::vector<std::byte> msg = bytes_for(100, 1);
  ASSERT_TRUE(p.b.endpoint->post(data_header(100, 1), msg.data(), 1).ok());
  ASSERT_TRUE(p.run_until([&] { return p.a.sink.frames.size() == 1; }));
  p.b.endpoint->close();
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "peer closed the connection")) << s.message();
  p.run_a_little();
  EXPECT_EQ(p.a.sink.failures.size(), 1u);
  EXPECT_EQ(p.a.sink.calls_after_failure, 0);
  EXPECT_TRUE(p.b.sink.failures.empty()) << "close() must not call the sink";
  EXPECT_FALSE(p.a.endpoint->has_capacity());
  EXPECT_EQ(p.a.endpoint->post(data_header(1, 2), msg.data(), 2).code(), StatusCode::connection_lost);
}

TEST_P(BackendData, ManyPeersShareOneCompletionQueue) {
  BackendPair& p = make_pair();
  ASSERT_TRUE(p.connect());
  // Two more connections between the same backends: completions are routed per endpoint.
  std::vector<std::unique_ptr<transport::Endpoint>> extra_a, extra_b;
  RecordingSink sa[2], sb[2];
  Result<std::string> addr = p.b.backend->listen("127.0.0.1:0", [&](std::unique_ptr<transport::Endpoint> ep) {
    ep->start(&sb[extra_b.size()]);
    extra_b.push_back(std::move(ep));
  });
  ASSERT_TRUE(addr.ok());
  for (int i = 0; i < 2; ++i) {
    p.a.backend->connect(addr->substr(8), transport::Clock::now() + std::chrono::seconds(10),
                         [&](Result<std::unique_ptr<transport::Endpoint>> ep) {
                           ASSERT_TRUE(ep.ok()) << ep.status().to_string();
                           (*ep)->start(&sa[extra_a.size()]);
                           extra_a.push_back(std::move(ep).value());
                         });
    ASSERT_TRUE(p.run_until([&] { return extra_a.size() == std::size_t(i + 1) && extra_b.size() == std::size_t(i + 1); }));
  }
  std::vector<std::vector<std::byte>> msgs;
  for (int i = 0; i < 2; ++i) {
    msgs.push_back(bytes_for(9000 + i, 70 + i));
    ASSERT_TRUE(extra_a[i]->post(data_header(9000 + i, 1), msgs.back().data(), 1).ok());
  }
  ASSERT_TRUE(p.run_until([&] { return sb[0].frames.size() == 1 && sb[1].frames.size() == 1; }));
  for (int i = 0; i < 2; ++i) {
    // Accept order may differ from connect order: match by size.
    const RecordingSink& got = sb[0].frames[0].payload.size() == msgs[i].size() ? sb[0] : sb[1];
    EXPECT_EQ(got.frames[0].payload, msgs[i]);
  }
  EXPECT_TRUE(p.a.sink.frames.empty() && p.b.sink.frames.empty());
  for (auto& e : extra_a) e->close();
  for (auto& e : extra_b) e->close();
}

std::vector<std::string> providers() { return {"fake_ib", "fake_roce", "real"}; }
INSTANTIATE_TEST_SUITE_P(Providers, BackendData, ::testing::ValuesIn(providers()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---------------------------------------------------------------------------------------------
// Setup and the pieces below the endpoint.

TEST(VerbsBackendSetup, ViabilityNamesTheReason) {
  fake::FabricOptions down = threaded_fabric();
  down.devices[0].ports[0].state = IBV_PORT_DOWN;
  fake::FakeFabric fabric(down);
  const transport::Viability v = create(fabric.api(), VerbsConfig{})->viability();
  EXPECT_FALSE(v.viable);
  EXPECT_TRUE(contains(v.reason, "verbs not viable: no ACTIVE port")) << v.reason;

  fake::FakeFabric up(threaded_fabric());
  const transport::Viability ok = create(up.api(), VerbsConfig{})->viability();
  EXPECT_TRUE(ok.viable) << ok.reason;
  EXPECT_TRUE(contains(ok.reason, "fake0 port 1")) << ok.reason;
  VerbsConfig bad;
  bad.ring_slots = 0;
  const transport::Viability b = create(up.api(), bad)->viability();
  EXPECT_FALSE(b.viable);
  EXPECT_TRUE(contains(b.reason, "TICTAC_VERBS_RING_SLOTS")) << b.reason;

  // The real library: viable where a device is active, otherwise the probe's reason.
  const transport::Viability real = create()->viability();
  if (!real.viable) {
    EXPECT_EQ(real.reason.rfind("verbs not viable: ", 0), 0u) << real.reason;
  }
  EXPECT_EQ(create()->name(), "verbs");
}

TEST(VerbsBackendSetup, ConfigFromEnvironmentRejectsBadValuesByName) {
  ASSERT_EQ(setenv("TICTAC_VERBS_RING_SLOTS", "0", 1), 0);
  Result<VerbsConfig> c = VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_RING_SLOTS");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.status().message(), "TICTAC_VERBS_RING_SLOTS")) << c.status().message();
  ASSERT_EQ(setenv("TICTAC_VERBS_SLOT_BYTES", "lots", 1), 0);
  c = VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_SLOT_BYTES");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.status().message(), "TICTAC_VERBS_SLOT_BYTES")) << c.status().message();
  ASSERT_EQ(setenv("TICTAC_VERBS_MTU", "1500", 1), 0);
  c = VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_MTU");
  EXPECT_FALSE(c.ok());
  c = VerbsConfig::from_env();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->ring_slots, 32u);
  EXPECT_EQ(c->bytes_per_peer(), 2ull * 32 * ((64 << 10) + 64));
  VerbsConfig tiny_cq;
  tiny_cq.cq_entries = 10;
  EXPECT_TRUE(contains(tiny_cq.validate().message(), "TICTAC_VERBS_CQ_ENTRIES"));
  ASSERT_EQ(setenv("TICTAC_VERBS_RETRY_CNT", "8", 1), 0);
  c = VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_RETRY_CNT");
  EXPECT_FALSE(c.ok());
}

TEST(VerbsBackendSetup, QpInfoRoundTripsAndRejectsBadFields) {
  QpInfo in;
  in.link_layer = IBV_LINK_LAYER_ETHERNET;
  in.mtu = IBV_MTU_2048;
  in.lid = 0x1234;
  in.data_qpn = 0x101;
  in.ctrl_qpn = 0x102;
  for (int i = 0; i < 16; ++i) in.gid.raw[i] = static_cast<std::uint8_t>(i * 7);
  in.ring_addr = 0x7f0012345000ull;
  in.ring_rkey = 0xdeadbeef;
  in.ring_slots = 32;
  in.slot_bytes = 65536;
  in.ctrl_recvs = 32;
  in.psn = 0xabcdef;
  auto bytes = encode(in);
  Result<QpInfo> out = decode_qp_info(bytes);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(encode(*out), bytes);
  EXPECT_EQ(out->ring_addr, in.ring_addr);
  EXPECT_EQ(out->psn, in.psn);

  auto broken = [&](std::size_t off, std::uint8_t value, const char* why) {
    auto b = bytes;
    b[off] = std::byte{value};
    Result<QpInfo> r = decode_qp_info(b);
    EXPECT_EQ(r.status().code(), StatusCode::protocol_error) << why;
    return r.status().message();
  };
  EXPECT_TRUE(contains(broken(0, 0, "magic"), "bad magic"));
  EXPECT_TRUE(contains(broken(4, 9, "version"), "version 9"));
  EXPECT_TRUE(contains(broken(4, 1, "version 1"), "older TicTac"));
  EXPECT_TRUE(contains(broken(7, 6, "mtu"), "MTU code 6"));
  EXPECT_TRUE(contains(broken(16, 0x01, "same qpn"), "QP numbers"));   // ctrl_qpn = data_qpn
  EXPECT_TRUE(contains(broken(49, 0x20, "slots"), "slots"));           // 8224 slots
  EXPECT_TRUE(contains(broken(54, 0, "slot bytes"), "slot of 0"));      // 65536 -> 0
  EXPECT_TRUE(contains(broken(63, 1, "psn"), "PSN"));
  EXPECT_EQ(decode_qp_info(std::span(bytes).first(10)).status().code(), StatusCode::protocol_error);
}

TEST(VerbsBackendSetup, SideChannelAddresses) {
  Result<sockaddr_in> ok = parse_side_address("127.0.0.1:5000");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(format_address(*ok), "127.0.0.1:5000");
  EXPECT_EQ(format_address(*parse_side_address("localhost:0")), "127.0.0.1:0");
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "host.example:1", "1.2.3:4", ":5"}) {
    Result<sockaddr_in> r = parse_side_address(bad);
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << bad;
  }
}

TEST(VerbsBackendSetup, RegistrationCacheReusesAndReleases) {
  fake::FakeFabric fabric(threaded_fabric());
  IbvApi api = fabric.api();
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  ibv_context* ctx = api.open_device(list[0]);
  api.free_device_list(list);
  ibv_pd* pd = api.alloc_pd(ctx);
  std::vector<std::byte> buf(1 << 16);
  {
    RegistrationCache cache(api, pd);
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    auto r1 = cache.acquire(buf.data(), buf.size(), rw, "test buffer");
    ASSERT_TRUE(r1.ok()) << r1.status().to_string();
    auto r2 = cache.acquire(buf.data() + 100, 1000, IBV_ACCESS_LOCAL_WRITE, "inner range");
    ASSERT_TRUE(r2.ok());
    EXPECT_EQ(r1->get(), r2->get()) << "a covered range with less access must reuse the registration";
    EXPECT_EQ(cache.live(), 1u);
    auto r3 = cache.acquire(buf.data() + 100, buf.size(), rw, "overhanging range");
    ASSERT_TRUE(r3.ok());
    EXPECT_NE(r1->get(), r3->get());
    EXPECT_EQ(cache.live(), 2u);
    const std::size_t objects = fabric.live_objects();
    r3 = Status(StatusCode::cancelled, "released");
    EXPECT_EQ(cache.live(), 1u);
    EXPECT_EQ(fabric.live_objects(), objects - 1) << "the last reference deregisters";
    r1 = Status(StatusCode::cancelled, "released");
    EXPECT_EQ(cache.live(), 1u) << "still referenced by r2";
    r2 = Status(StatusCode::cancelled, "released");
    EXPECT_EQ(cache.live(), 0u);
  }
  EXPECT_EQ(api.dealloc_pd(pd), 0);
  EXPECT_EQ(api.close_device(ctx), 0);
  EXPECT_EQ(fabric.live_objects(), 0u);
}

TEST(VerbsBackendSetup, LockedMemoryLimitIsReportedWithTheFix) {
  fake::FabricOptions o = threaded_fabric();
  o.max_locked_bytes = 64 << 10;  // less than one receive ring
  fake::FakeFabric fabric(o);
  BackendPair p(fabric.api(), VerbsConfig{}, VerbsConfig{});
  ASSERT_TRUE(p.attached());
  Result<std::string> addr = p.b.backend->listen("127.0.0.1:0", [](std::unique_ptr<transport::Endpoint>) {
    ADD_FAILURE() << "no endpoint can be built";
  });
  ASSERT_TRUE(addr.ok());
  Status got = Status(StatusCode::internal, "not called");
  bool done = false;
  p.a.backend->connect(addr->substr(8), transport::Clock::now() + std::chrono::seconds(10),
                       [&](Result<std::unique_ptr<transport::Endpoint>> ep) {
                         got = ep.status();
                         done = true;
                       });
  EXPECT_FALSE(done) << "on_done must never run inside connect()";
  ASSERT_TRUE(p.run_until([&] { return done; }));
  EXPECT_EQ(got.code(), StatusCode::resource_exhausted) << got.to_string();
  EXPECT_TRUE(contains(got.message(), "ulimit -l")) << got.message();
  p.close_all();
  EXPECT_EQ(fabric.live_objects(), 0u);
}

TEST(VerbsBackendSetup, CompletionQueueBoundsThePeers) {
  fake::FakeFabric fabric(threaded_fabric());
  VerbsConfig one_peer = small_ring();
  one_peer.cq_entries = kCqEntriesPerSlot * one_peer.ring_slots;
  BackendPair p(fabric.api(), one_peer, small_ring());
  ASSERT_TRUE(p.connect());
  Result<std::string> addr = p.b.backend->listen("127.0.0.1:0", [](std::unique_ptr<transport::Endpoint>) {});
  ASSERT_TRUE(addr.ok());
  Status got = Status(StatusCode::internal, "not called");
  bool done = false;
  p.a.backend->connect(addr->substr(8), transport::Clock::now() + std::chrono::seconds(10),
                       [&](Result<std::unique_ptr<transport::Endpoint>> ep) {
                         got = ep.status();
                         done = true;
                       });
  ASSERT_TRUE(p.run_until([&] { return done; }));
  EXPECT_EQ(got.code(), StatusCode::resource_exhausted) << got.to_string();
  EXPECT_TRUE(contains(got.message(), "TICTAC_VERBS_CQ_ENTRIES")) << got.message();
  p.close_all();
  EXPECT_EQ(fabric.live_objects(), 0u);
}

TEST(VerbsBackendSetup, BadAddressesAndNobodyListening) {
  fake::FakeFabric fabric(threaded_fabric());
  BackendPair p(fabric.api(), VerbsConfig{}, VerbsConfig{});
  ASSERT_TRUE(p.attached());
  EXPECT_EQ(p.a.backend->listen("nowhere", nullptr).status().code(), StatusCode::invalid_argument);
  std::vector<Status> got;
  for (const char* addr : {"not-an-address", "127.0.0.1:1"}) {
    p.a.backend->connect(addr, transport::Clock::now() + std::chrono::milliseconds(200),
                         [&](Result<std::unique_ptr<transport::Endpoint>> ep) { got.push_back(ep.status()); });
  }
  EXPECT_TRUE(got.empty());
  ASSERT_TRUE(p.run_until([&] { return got.size() == 2; }));
  EXPECT_EQ(got[0].code(), StatusCode::invalid_argument) << got[0].to_string();
  EXPECT_EQ(got[1].code(), StatusCode::timeout) << got[1].to_string();
  EXPECT_TRUE(contains(got[1].message(), "127.0.0.1:1")) << got[1].message();
}

}  // namespace
}  // namespace tictac::verbs::testing
