// The transport conformance suite instantiated for the UCX backend. The suite (its fixture lives
// in an anonymous namespace) is compiled into this executable once more and gets one more
// instantiation, "Ucx/"; meson runs only the Ucx* tests of this executable (--gtest_filter), the
// loopback and tcp instances run in transport_conformance_test. Meson registers it twice: over
// UCX's TCP transport and over shared memory (UCX_TLS).
#include "tests/conformance/transport_conformance_test.cc"
#include "transport/ucx/factory.h"

namespace tictac::transport::testing {
namespace {

BackendKind ucx_kind() {
  return {"ucx", [](const std::shared_ptr<loopback::Fabric>&) { return ucx::create(); }, "ucx://127.0.0.1:0"};
}

INSTANTIATE_TEST_SUITE_P(Ucx, Conformance, ::testing::Values(ucx_kind()), backend_name);

}  // namespace
}  // namespace tictac::transport::testing
