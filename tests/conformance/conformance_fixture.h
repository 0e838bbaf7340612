// The conformance suite's fixture, shared by every executable that instantiates the suite
// (conformance_suite.cc holds the tests; each *_conformance_test.cc instantiates them for its
// backends). A backend that is not viable here makes every test skip with the reason.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/conformance/harness.h"

namespace tictac::transport::testing {

class Conformance : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    std::unique_ptr<Backend> probe = GetParam().make(fabric_);
    const Viability v = probe->viability();
    if (!v.viable) GTEST_SKIP() << "backend " << GetParam().name << " not viable here: " << v.reason;
  }

  // Two thread-mode contexts a <-> b.
  void make_pair(TransportConfig config = small_config()) {
    a_ = make_context(GetParam(), fabric_, {"alice", ProgressEngine::Mode::thread, config});
    b_ = make_context(GetParam(), fabric_, {"bob", ProgressEngine::Mode::thread, config});
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(connect_pair(*a_, *b_, GetParam().listen_address, &ab_, &ba_));
  }

  std::shared_ptr<loopback::Fabric> fabric_ = loopback::create_fabric();
  std::unique_ptr<Context> a_, b_;
  PeerId ab_ = 0, ba_ = 0;  // a's id for b, b's id for a
};

inline std::string backend_name(const ::testing::TestParamInfo<BackendKind>& info) { return info.param.name; }

}  // namespace tictac::transport::testing
