// The transport conformance suite (conformance_suite.cc) instantiated for the UCX backend, "Ucx/".
// Meson registers this executable once per UCX transport (UCX_TLS).
#include "tests/conformance/conformance_fixture.h"
#include "transport/ucx/factory.h"

namespace tictac::transport::testing {
namespace {

BackendKind ucx_kind() {
  return {"ucx", [](const std::shared_ptr<loopback::Fabric>&) { return ucx::create(); }, "ucx://127.0.0.1:0"};
}

INSTANTIATE_TEST_SUITE_P(Ucx, Conformance, ::testing::Values(ucx_kind()), backend_name);

}  // namespace
}  // namespace tictac::transport::testing
