// Behaviour only the fake can show on demand: fault injection, async events, step-by-step
// progress, limits, and the kernel-style value checks. Uses the table plus FakeFabric's
// fault-injection methods.
#include <fcntl.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "tests/unit/verbs/verbs_harness.h"

namespace tictac::verbs::testing {
namespace {

constexpr int kRemoteAll =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

class FakeVerbsTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_NE(fabric(), nullptr);
  }

  // Next async event of a context, without blocking; false when there is none.
  bool next_event(Side s, ibv_async_event* ev) {
    const int fd = ctx(s)->async_fd;
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    return api_.get_async_event(ctx(s), ev) == 0;
  }

  struct Buffers {
    std::vector<char> src = std::vector<char>(256, 's');
    std::vector<char> dst = std::vector<char>(256, 0);
    ibv_mr* smr = nullptr;
    ibv_mr* dmr = nullptr;
  };
  Buffers buffers() {
    Buffers b;
    b.smr = reg(kA, b.src.data(), b.src.size(), IBV_ACCESS_LOCAL_WRITE);
    b.dmr = reg(kB, b.dst.data(), b.dst.size(), kRemoteAll);
    return b;
  }
  int write(ibv_qp* qp, const Buffers& b, std::uint64_t wr_id) {
    return post_write(qp, b.smr, 0, 64, addr_of(b.dst.data()), b.dmr->rkey, wr_id);
  }
};

TEST_P(FakeVerbsTest, ResponderOfAnAccessViolationGoesToErrWithAnEvent) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_EQ(post_recv(b, 5), 0);
  ASSERT_EQ(post_write(a, bufs.smr, 0, 64, addr_of(bufs.dst.data()), bufs.dmr->rkey + 256, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(state_of(b), IBV_QPS_ERR);
  std::vector<ibv_wc> rx = wait(cq(kB), 1);
  ASSERT_EQ(rx.size(), 1U);
  EXPECT_EQ(rx[0].status, IBV_WC_WR_FLUSH_ERR);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kB, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(ev.element.qp, b);
  EXPECT_STREQ(api_.event_type_str(ev.event_type), "local access violation work queue error");
  // A QP with an unacknowledged event cannot be destroyed (real verbs would block).
  EXPECT_EQ(api_.destroy_qp(b), EBUSY);
  api_.ack_async_event(&ev);
  EXPECT_FALSE(next_event(kB, &ev));
  EXPECT_EQ(errno, EAGAIN);
}

TEST_P(FakeVerbsTest, ProgressIsStepByStep) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_EQ(write(a, bufs, 1), 0);
  ASSERT_EQ(write(a, bufs, 2), 0);
  EXPECT_EQ(fabric()->progress(), 2U);  // both queued WRs execute in one step
  EXPECT_EQ(fabric()->progress(), 0U);
  EXPECT_EQ(fabric()->run_until_idle(), 0U);
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
}

TEST_P(FakeVerbsTest, DelayHoldsTheQueueForSteps) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_TRUE(fabric()->delay(a->qp_num, 3).ok());
  ASSERT_EQ(write(a, bufs, 1), 0);
  EXPECT_EQ(fabric()->progress(), 0U);
  EXPECT_EQ(fabric()->progress(), 0U);
  EXPECT_EQ(fabric()->progress(), 0U);
  EXPECT_EQ(bufs.dst[0], 0);
  EXPECT_EQ(fabric()->progress(), 1U);
  EXPECT_EQ(bufs.dst[0], 's');
}

TEST_P(FakeVerbsTest, RnrRetriesCountSteps) {
  ConnectOptions c;
  c.rnr_retry = 3;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 1, 1), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fabric()->progress(), 0U) << i;
  EXPECT_EQ(fabric()->progress(), 1U);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

TEST_P(FakeVerbsTest, DroppedConnectionExhaustsRetriesBothWays) {
  ConnectOptions c;
  c.retry_cnt = 2;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_TRUE(fabric()->drop_connection(b->qp_num).ok());
  ASSERT_EQ(write(a, bufs, 1), 0);
  ASSERT_EQ(write(a, bufs, 2), 0);
  EXPECT_EQ(fabric()->progress(), 0U);  // retry 1
  EXPECT_EQ(fabric()->progress(), 0U);  // retry 2
  EXPECT_EQ(fabric()->progress(), 1U);  // retries exhausted; the second WR is flushed with it
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_STREQ(api_.wc_status_str(wc[0].status), "transport retry counter exceeded");
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(bufs.dst[0], 0);
  // B's own sends are lost too.
  std::vector<char> bsrc(16, 'b');
  ibv_mr* bmr = reg(kB, bsrc.data(), bsrc.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_EQ(post_write(b, bmr, 0, 16, addr_of(bufs.src.data()), bufs.smr->rkey, 9), 0);
  wc = wait(cq(kB), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_TRUE(fabric()->restore_connection(b->qp_num).ok());
}

TEST_P(FakeVerbsTest, RestoredConnectionDeliversAgain) {
  ConnectOptions c;
  c.retry_cnt = 7;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_TRUE(fabric()->drop_connection(a->qp_num).ok());
  ASSERT_EQ(write(a, bufs, 1), 0);
  EXPECT_EQ(fabric()->progress(), 0U);
  ASSERT_TRUE(fabric()->restore_connection(a->qp_num).ok());
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
}

TEST_P(FakeVerbsTest, FailNextInjectsAnErrorAndFlushes) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_TRUE(fabric()->fail_next(a->qp_num, IBV_WC_RETRY_EXC_ERR).ok());
  ASSERT_EQ(write(a, bufs, 1), 0);
  ASSERT_EQ(write(a, bufs, 2), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(state_of(a), IBV_QPS_ERR);
  EXPECT_FALSE(fabric()->fail_next(a->qp_num, IBV_WC_SUCCESS).ok());
}

TEST_P(FakeVerbsTest, WriteTrafficCountsAndTheRkeyFaultHitsOnlyPlainWrites) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  fabric()->corrupt_next_write_rkey();
  ASSERT_EQ(post_recv(b, 5), 0);
  ASSERT_EQ(post_write_imm(a, bufs.smr, 16, addr_of(bufs.dst.data()), bufs.dmr->rkey, 7, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << "WRITE WITH IMMEDIATE must not be corrupted";
  ASSERT_EQ(write(a, bufs, 2), 0);  // the plain WRITE after it is
  wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(state_of(b), IBV_QPS_ERR);
  const fake::WriteTraffic t = fabric()->write_traffic();
  EXPECT_EQ(t.writes_with_imm, 1U);
  EXPECT_EQ(t.write_with_imm_bytes, 16U);
  EXPECT_EQ(t.writes, 0U) << "a failed WRITE was counted";
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kB, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  api_.ack_async_event(&ev);
}

TEST_P(FakeVerbsTest, RevokedRegionRefusesTheNextWriteAndStillDeregisters) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ASSERT_EQ(write(a, bufs, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(fabric()->write_traffic().writes, 1U);
  EXPECT_EQ(fabric()->write_traffic().write_bytes, 64U);
  fabric()->revoke_next_remote_mr();
  ASSERT_EQ(write(a, bufs, 2), 0);
  wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(fabric()->write_traffic().writes, 1U);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kB, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  api_.ack_async_event(&ev);
  // TearDown deregisters the revoked region and expects success.
}

TEST_P(FakeVerbsTest, QpFatalRaisesAnEventAndFlushesReceives) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(post_recv(a, 1), 0);
  ASSERT_EQ(post_recv(a, 2), 0);
  ASSERT_TRUE(fabric()->qp_fatal(a->qp_num).ok());
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
  EXPECT_EQ(wc[0].wr_id, 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[1].wr_id, 2U);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kA, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, a);
  api_.ack_async_event(&ev);
}

TEST_P(FakeVerbsTest, BlockingGetAsyncEventWakesOnAnEvent) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::atomic<bool> got{false};
  ibv_async_event ev{};
  std::thread watcher([&] {
    if (api_.get_async_event(ctx(kA), &ev) == 0) got = true;
  });
  ASSERT_TRUE(fabric()->qp_fatal(a->qp_num).ok());
  watcher.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  api_.ack_async_event(&ev);
}

TEST_P(FakeVerbsTest, PortDownRaisesEventsAndBreaksConnections) {
  ConnectOptions c;
  c.retry_cnt = 1;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  ibv_device* dev = ctx(kA)->device;
  const std::string name = api_.get_device_name(dev);
  ASSERT_TRUE(fabric()->set_port_state(name, 1, IBV_PORT_DOWN).ok());
  for (Side s : {kA, kB}) {
    ibv_async_event ev{};
    ASSERT_TRUE(next_event(s, &ev));
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(ev.element.port_num, 1);
    api_.ack_async_event(&ev);
  }
  ibv_port_attr pa{};
  ASSERT_EQ(api_.query_port(ctx(kA), 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  ASSERT_EQ(write(a, bufs, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  ASSERT_TRUE(fabric()->set_port_state(name, 1, IBV_PORT_ACTIVE).ok());
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kA, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
  api_.ack_async_event(&ev);
  EXPECT_FALSE(fabric()->set_port_state(name, 2, IBV_PORT_DOWN).ok());
  EXPECT_FALSE(fabric()->set_port_state("nope", 1, IBV_PORT_DOWN).ok());
}

TEST_P(FakeVerbsTest, CommunicationEstablishedAtAnRtrQp) {
  ibv_qp* a = make_qp(kA);
  ibv_qp* b = make_qp(kB);
  ASSERT_TRUE(a && b);
  ConnectOptions c;
  ASSERT_EQ(to_init(a, c.access), 0);
  ASSERT_EQ(to_init(b, c.access), 0);
  ASSERT_EQ(to_rtr(a, kB, b->qp_num, c), 0);
  ASSERT_EQ(to_rtr(b, kA, a->qp_num, c), 0);
  ASSERT_EQ(to_rts(a, c), 0);  // b stays in RTR: it may receive but not send
  ASSERT_EQ(post_recv(b, 3), 0);
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 5, 1), 0);
  std::vector<ibv_wc> rx = wait(cq(kB), 1);
  ASSERT_EQ(rx.size(), 1U);
  EXPECT_EQ(rx[0].status, IBV_WC_SUCCESS);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kB, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  api_.ack_async_event(&ev);
  // Sends need RTS.
  EXPECT_EQ(post_write_imm(b, nullptr, 0, 0, 0, 5, 1), EINVAL);
}

TEST_P(FakeVerbsTest, CqOverrunLosesCompletionsAndReportsCqErr) {
  ibv_cq* small = make_cq(kA, 2);
  ASSERT_NE(small, nullptr);
  QpOptions qa;
  qa.send_cq = small;
  qa.sq_sig_all = true;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(write(a, bufs, i), 0);
  EXPECT_EQ(fabric()->progress(), 3U);
  ibv_wc wc[4];
  EXPECT_EQ(api_.poll_cq(small, 4, wc), 2);
  EXPECT_EQ(api_.poll_cq(small, 4, wc), -1);
  EXPECT_EQ(errno, EOVERFLOW);
  ibv_async_event ev{};
  ASSERT_TRUE(next_event(kA, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, small);
  EXPECT_EQ(state_of(a), IBV_QPS_ERR);
  api_.ack_async_event(&ev);
}

TEST_P(FakeVerbsTest, KernelStyleValueChecks) {
  ibv_qp* a = make_qp(kA);
  ASSERT_NE(a, nullptr);
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(api_.post_recv(a, &rwr, &rbad), EINVAL);  // RESET
  ASSERT_EQ(to_init(a, kRemoteAll), 0);
  EXPECT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 1, 1), EINVAL);  // INIT cannot send
  ConnectOptions c;
  ASSERT_EQ(to_rtr(a, kA, a->qp_num, c), 0);
  c.retry_cnt = 8;
  EXPECT_EQ(to_rts(a, c), EINVAL);
  c.retry_cnt = 2;
  c.timeout = 32;
  EXPECT_EQ(to_rts(a, c), EINVAL);
  c.timeout = 12;
  ASSERT_EQ(to_rts(a, c), 0);
  // Only RC without SRQ; limits from query_device.
  ibv_qp_init_attr ud{};
  ud.send_cq = cq(kA);
  ud.recv_cq = cq(kA);
  ud.qp_type = IBV_QPT_UD;
  errno = 0;
  EXPECT_EQ(api_.create_qp(pd(kA), &ud), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_device_attr da{};
  ASSERT_EQ(api_.query_device(ctx(kA), &da), 0);
  ibv_qp_init_attr big{};
  big.send_cq = cq(kA);
  big.recv_cq = cq(kA);
  big.qp_type = IBV_QPT_RC;
  big.cap.max_send_wr = static_cast<std::uint32_t>(da.max_qp_wr) + 1;
  EXPECT_EQ(api_.create_qp(pd(kA), &big), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(api_.create_cq(ctx(kA), 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(api_.create_cq(ctx(kA), da.max_cqe + 1, nullptr, nullptr, 0), nullptr);
  // Unknown opcodes are refused at post time.
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(api_.post_send(a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  // GID table bounds.
  ibv_gid gid{};
  EXPECT_EQ(api_.query_gid(ctx(kA), port(), 0, &gid), 0);
  EXPECT_EQ(api_.query_gid(ctx(kA), port(), 1000, &gid), -1);
  ibv_port_attr pa{};
  EXPECT_EQ(api_.query_port(ctx(kA), 9, &pa), EINVAL);
}

TEST_P(FakeVerbsTest, WrongLidExhaustsRetries) {
  if (GetParam() != "fake_ib") {
    GTEST_SKIP() << "LID routing is InfiniBand only";
  }
  ibv_qp* a = make_qp(kA);
  ibv_qp* b = make_qp(kB);
  ASSERT_TRUE(a && b);
  ConnectOptions c;
  c.retry_cnt = 0;
  ASSERT_EQ(to_init(a, c.access), 0);
  ASSERT_EQ(to_init(b, c.access), 0);
  ASSERT_EQ(to_rtr(b, kA, a->qp_num, c), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = b->qp_num;
  attr.max_dest_rd_atomic = 1;
  attr.ah_attr.port_num = port();
  attr.ah_attr.dlid = 77;  // no such port
  ASSERT_EQ(api_.modify_qp(a, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                         IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  ASSERT_EQ(to_rts(a, c), 0);
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 1, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST_P(FakeVerbsTest, HeaderInlineCallsReachTheFake) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  Buffers bufs = buffers();
  // Code that calls the static-inline verbs directly dispatches through context->ops.
  ibv_sge sge{addr_of(bufs.src.data()), 32, bufs.smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 44;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr_of(bufs.dst.data());
  wr.wr.rdma.rkey = bufs.dmr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_wc wc{};
  int got = 0;
  for (int i = 0; i < 1000 && got == 0; ++i) got = ibv_poll_cq(cq(kA), 1, &wc);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.wr_id, 44U);
  EXPECT_EQ(ibv_req_notify_cq(cq(kA), 0), 0);
}

TEST_P(FakeVerbsTest, FaultApiRejectsUnknownQps) {
  EXPECT_EQ(fabric()->delay(0xabcdef, 1).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(fabric()->drop_connection(0xabcdef).ok());
  EXPECT_FALSE(fabric()->restore_connection(0xabcdef).ok());
  EXPECT_FALSE(fabric()->fail_next(0xabcdef, IBV_WC_RETRY_EXC_ERR).ok());
  EXPECT_FALSE(fabric()->qp_fatal(0xabcdef).ok());
}

TEST_P(FakeVerbsTest, DmabufRegistrationNeedsAnOpenFdAndMapsIovaToHostMemory) {
  ASSERT_NE(api_.reg_dmabuf_mr, nullptr);
  std::vector<char> mem(4096, 'x');
  const auto iova = reinterpret_cast<std::uintptr_t>(mem.data());
  errno = 0;
  EXPECT_EQ(api_.reg_dmabuf_mr(pd(kA), 0, mem.size(), iova, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EBADF);
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ibv_mr* mr = api_.reg_dmabuf_mr(pd(kA), 16, mem.size(), iova, fd, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  EXPECT_EQ(mr->addr, mem.data());
  EXPECT_EQ(mr->length, mem.size());
  EXPECT_EQ(fabric()->dmabuf_fds(), std::vector<int>{fd});
  EXPECT_EQ(api_.dereg_mr(mr), 0);
  EXPECT_TRUE(fabric()->dmabuf_fds().empty());
  EXPECT_EQ(fabric()->dmabuf_closed_before_dereg(), 0U);
  // Closing the fd while the MR lives is counted.
  mr = api_.reg_dmabuf_mr(pd(kA), 0, mem.size(), iova, fd, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ::close(fd);
  EXPECT_EQ(api_.dereg_mr(mr), 0);
  EXPECT_EQ(fabric()->dmabuf_closed_before_dereg(), 1U);
}

TEST_P(FakeVerbsTest, RdmaWriteLandsInADmabufRegion) {
  auto [a, b] = make_pair();
  std::vector<char> src(256, 's');
  std::vector<char> dst(256, '.');  // "device memory" of the scripted CUDA table is host memory
  ibv_mr* local = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const auto iova = reinterpret_cast<std::uintptr_t>(dst.data());
  ibv_mr* remote = api_.reg_dmabuf_mr(pd(kB), 0, dst.size(), iova, fd,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(remote, nullptr) << std::strerror(errno);
  ASSERT_EQ(post_write(a, local, 0, 64, iova + 32, remote->rkey, 7), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::string(dst.data() + 30, 4), "..ss");
  EXPECT_EQ(std::string(dst.data() + 94, 4), "ss..");
  EXPECT_EQ(api_.dereg_mr(remote), 0);
  ::close(fd);
  (void)b;
}

INSTANTIATE_TEST_SUITE_P(Fake, FakeVerbsTest, ::testing::Values("fake_ib", "fake_roce"),
                         provider_name);

TEST(FakeFabricLimits, LockedMemoryLimitGivesEnomem) {
  fake::FabricOptions options;
  options.max_locked_bytes = 8192;
  fake::FakeFabric fabric(options);
  IbvApi api = fabric.api();
  int num = 0;
  ibv_device** list = api.get_device_list(&num);
  ASSERT_EQ(num, 1);
  ibv_context* ctx = api.open_device(list[0]);
  api.free_device_list(list);
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = api.alloc_pd(ctx);
  std::vector<char> buf(16384);
  ibv_mr* first = api.reg_mr(pd, buf.data(), 8192, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(first, nullptr);
  const std::uint32_t first_key = first->lkey;
  errno = 0;
  EXPECT_EQ(api.reg_mr(pd, buf.data() + 8192, 1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(api.dereg_mr(first), 0);
  ibv_mr* again = api.reg_mr(pd, buf.data(), 8192, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(again, nullptr);
  EXPECT_NE(again->lkey, first_key);  // keys are never reused
  EXPECT_EQ(api.dereg_mr(again), 0);
  EXPECT_EQ(api.close_device(ctx), EBUSY);  // the PD is still there
  EXPECT_EQ(api.dealloc_pd(pd), 0);
  EXPECT_EQ(api.close_device(ctx), 0);
  EXPECT_EQ(fabric.live_objects(), 0U);
}

TEST(FakeFabricLimits, PathMtuAbovePortMaximumAndRoceWithoutGrhFail) {
  fake::FabricOptions options;
  options.devices = {fake::DeviceSpec{"roce", {fake::PortSpec{IBV_LINK_LAYER_ETHERNET, IBV_MTU_1024}}}};
  fake::FakeFabric fabric(options);
  IbvApi api = fabric.api();
  int num = 0;
  ibv_device** list = api.get_device_list(&num);
  ibv_context* ctx = api.open_device(list[0]);
  api.free_device_list(list);
  ibv_pd* pd = api.alloc_pd(ctx);
  ibv_cq* cq = api.create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 4;
  init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* qp = api.create_qp(pd, &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(api.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS),
            0);
  const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTR;
  r.path_mtu = IBV_MTU_1024;
  r.dest_qp_num = qp->qp_num;
  r.ah_attr.port_num = 1;
  EXPECT_EQ(api.modify_qp(qp, &r, rtr_mask), EINVAL);  // RoCE needs a GRH
  r.ah_attr.is_global = 1;
  r.ah_attr.grh.sgid_index = 3;  // an empty GID entry
  EXPECT_EQ(api.modify_qp(qp, &r, rtr_mask), EINVAL);
  r.ah_attr.grh.sgid_index = 1;
  r.path_mtu = IBV_MTU_4096;  // above the port's 1024
  EXPECT_EQ(api.modify_qp(qp, &r, rtr_mask), EINVAL);
  r.path_mtu = IBV_MTU_1024;
  EXPECT_EQ(api.modify_qp(qp, &r, rtr_mask), 0);
  EXPECT_EQ(api.destroy_qp(qp), 0);
  EXPECT_EQ(api.destroy_cq(cq), 0);
  EXPECT_EQ(api.dealloc_pd(pd), 0);
  EXPECT_EQ(api.close_device(ctx), 0);
}

}  // namespace
}  // namespace tictac::verbs::testing
