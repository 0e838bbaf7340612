// Test harness for verbs tests that call only the IbvApi table, so the same tests run on the
// fake fabric (several configurations) and on a real device when one has an ACTIVE port.
//
// VerbsTest is parameterised by a provider name:
//   "fake_ib"       fake fabric, InfiniBand port, on_poll execution (deterministic)
//   "fake_roce"     fake fabric, Ethernet (RoCE) port: connections need GRH/GIDs
//   "fake_threaded" fake fabric, executor thread (completions appear asynchronously)
//   "real"          libibverbs; skipped with the probe's reason when verbs are not viable
// Two "sides" (A and B) each own a device context, a PD and a CQ, like two processes; QPs of a
// side share its CQ. Everything created through the fixture is destroyed in TearDown, which
// also checks that the fake fabric has no object left. Not thread-safe (one test thread).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/verbs/fake/fake_fabric.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs::testing {

struct QpOptions {
  std::uint32_t max_send_wr = 64;
  std::uint32_t max_recv_wr = 64;
  std::uint32_t max_sge = 2;
  std::uint32_t max_inline_data = 0;
  bool sq_sig_all = false;
  ibv_cq* send_cq = nullptr;  // default: the side's CQ
};

struct ConnectOptions {
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  std::uint8_t retry_cnt = 2;
  std::uint8_t rnr_retry = 7;
  std::uint8_t min_rnr_timer = 1;  // 0.01 ms on hardware
  std::uint8_t timeout = 12;       // 16 ms on hardware
};

enum Side { kA = 0, kB = 1 };

class VerbsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The fake fabric, or null on a real device.
  fake::FakeFabric* fabric() { return fabric_.get(); }
  bool is_fake() const { return fabric_ != nullptr; }

  ibv_context* ctx(Side s) { return ctx_[s]; }
  ibv_pd* pd(Side s) { return pd_[s]; }
  ibv_cq* cq(Side s) { return cq_[s]; }
  std::uint8_t port() const { return port_; }

  // Creation helpers (failures are test failures; objects are destroyed in TearDown).
  ibv_qp* make_qp(Side s, const QpOptions& o = {});
  ibv_mr* reg(Side s, void* addr, std::size_t len, int access);
  ibv_cq* make_cq(Side s, int cqe, ibv_comp_channel* channel = nullptr);
  ibv_comp_channel* make_channel(Side s);

  // State transitions with every required attribute; return the modify_qp result.
  int to_init(ibv_qp* qp, int access);
  int to_rtr(ibv_qp* qp, Side remote_side, std::uint32_t remote_qpn, const ConnectOptions& o);
  int to_rts(ibv_qp* qp, const ConnectOptions& o);
  // Both QPs through RESET->INIT->RTR->RTS, each pointing at the other.
  void connect(ibv_qp* a, Side side_a, ibv_qp* b, Side side_b, const ConnectOptions& o = {});
  // A connected pair: A's QP and B's QP.
  std::pair<ibv_qp*, ibv_qp*> make_pair(const QpOptions& qa = {}, const QpOptions& qb = {},
                                        const ConnectOptions& c = {});

  ibv_qp_state state_of(ibv_qp* qp);

  // Polls `cq` until `n` completions arrived (or 10 s passed: then the test fails with what
  // came). In on_poll mode each poll drives one fabric step.
  std::vector<ibv_wc> wait(ibv_cq* cq, std::size_t n);
  // Polls `polls` times and returns whatever arrived (to show that nothing does).
  std::vector<ibv_wc> poll_some(ibv_cq* cq, int polls = 20);

  // Posting helpers; return post_send's / post_recv's result.
  int post_write(ibv_qp* qp, ibv_mr* local, std::size_t offset, std::size_t len,
                 std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id,
                 unsigned flags = IBV_SEND_SIGNALED);
  int post_write_imm(ibv_qp* qp, ibv_mr* local, std::size_t len, std::uint64_t remote_addr,
                     std::uint32_t rkey, std::uint32_t imm_host_order, std::uint64_t wr_id,
                     unsigned flags = IBV_SEND_SIGNALED);
  int post_recv(ibv_qp* qp, std::uint64_t wr_id, ibv_mr* mr = nullptr, std::size_t len = 0);

  IbvApi api_;

 private:
  std::unique_ptr<fake::FakeFabric> fabric_;
  std::uint8_t port_ = 1;
  ibv_port_attr port_attr_{};
  int gid_index_ = 0;
  ibv_context* ctx_[2] = {nullptr, nullptr};
  ibv_pd* pd_[2] = {nullptr, nullptr};
  ibv_cq* cq_[2] = {nullptr, nullptr};
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_mr*> mrs_;
  std::vector<ibv_cq*> extra_cqs_;
  std::vector<ibv_comp_channel*> channels_;
};

// Provider names for INSTANTIATE_TEST_SUITE_P.
std::vector<std::string> all_providers();
std::string provider_name(const ::testing::TestParamInfo<std::string>& info);

// A buffer filled with a pattern that depends on `seed` (so copies are checked byte-exactly).
std::vector<char> pattern(std::size_t len, unsigned seed);

}  // namespace tictac::verbs::testing
