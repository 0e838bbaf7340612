// The transport conformance suite for the verbs backend on the fake RC fabric
// (transport/verbs/fake/): the backend's real data path (QPs, RDMA WRITE WITH IMMEDIATE into
// registered rings, credits, completion channel, async events) against a device model, with
// the TCP side channel on 127.0.0.1; zero-copy RDMA WRITE for large rendezvous messages unless a
// configuration turns it off. Two fabrics: an InfiniBand port (LID routing) and a RoCE
// port (GRH with the IPv4-mapped GID). The fabrics run in thread mode: the backend is driven by
// completion events, as on hardware, and the executor thread makes completions asynchronous.
#include "tests/conformance/conformance_fixture.h"
#include "transport/verbs/backend/factory.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac::transport::testing {

// One fabric per link layer for the whole test binary (several Contexts share it, like hosts
// on one subnet); intentionally never destroyed, since Contexts of a failed test may outlive it.
inline verbs::fake::FakeFabric& verbs_fabric(bool roce) {
  static auto* ib = new verbs::fake::FakeFabric([] {
    verbs::fake::FabricOptions o;
    o.execution = verbs::fake::Execution::thread;
    o.devices = {verbs::fake::DeviceSpec{"fake_ib0", {verbs::fake::PortSpec{}}}};
    return o;
  }());
  static auto* eth = new verbs::fake::FakeFabric([] {
    verbs::fake::FabricOptions o;
    o.execution = verbs::fake::Execution::thread;
    o.devices = {verbs::fake::DeviceSpec{"fake_roce0", {verbs::fake::PortSpec{IBV_LINK_LAYER_ETHERNET}}}};
    return o;
  }());
  return roce ? *eth : *ib;
}

inline std::vector<BackendKind> verbs_fake_backends() {
  return {
      {"verbs_fake_ib",
       [](const std::shared_ptr<loopback::Fabric>&) { return verbs::create(verbs_fabric(false).api(), verbs::VerbsConfig{}); },
       "verbs://127.0.0.1:0"},
      {"verbs_fake_roce",
       [](const std::shared_ptr<loopback::Fabric>&) { return verbs::create(verbs_fabric(true).api(), verbs::VerbsConfig{}); },
       "verbs://127.0.0.1:0"},
      // Tiny rings: frames span many slots, the ring is full most of the time (credits and
      // back-pressure on every frame), and completions are signalled every 3 requests.
      {"verbs_fake_small_ring",
       [](const std::shared_ptr<loopback::Fabric>&) {
         verbs::VerbsConfig c;
         c.slot_bytes = 4096;
         c.ring_slots = 4;
         c.signal_every = 3;
         return verbs::create(verbs_fabric(false).api(), c);
       },
       "verbs://127.0.0.1:0"},
      // TICTAC_VERBS_ZERO_COPY=0: large rendezvous messages through the rings too (the three
      // above write messages of 32 KiB and more straight into the receive buffers).
      {"verbs_fake_ring_only",
       [](const std::shared_ptr<loopback::Fabric>&) {
         verbs::VerbsConfig c;
         c.zero_copy = false;
         return verbs::create(verbs_fabric(false).api(), c);
       },
       "verbs://127.0.0.1:0"},
  };
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(verbs_fake_backends()), backend_name);

}  // namespace tictac::transport::testing
