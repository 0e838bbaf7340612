// The conformance suite (conformance_suite.cc) for the always-built backends: loopback and tcp.
#include "tests/conformance/conformance_fixture.h"

namespace tictac::transport::testing {

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(all_backends()), backend_name);

}  // namespace tictac::transport::testing
