// RC data-path behaviour through the IbvApi table only: runs on every fake configuration and on
// a real device when one has an ACTIVE port (skipped with the probe's reason otherwise).
#include <arpa/inet.h>
#include <poll.h>

#include <cstring>

#include "tests/unit/verbs/verbs_harness.h"

namespace tictac::verbs::testing {
namespace {

constexpr int kRemoteAll =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST_P(VerbsTest, QpWalksTheStateMachine) {
  ibv_qp* a = make_qp(kA);
  ibv_qp* b = make_qp(kB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->qp_num, b->qp_num);
  EXPECT_EQ(state_of(a), IBV_QPS_RESET);
  ASSERT_EQ(to_init(a, kRemoteAll), 0);
  EXPECT_EQ(state_of(a), IBV_QPS_INIT);
  ASSERT_EQ(to_init(b, kRemoteAll), 0);
  ASSERT_EQ(to_rtr(a, kB, b->qp_num, {}), 0);
  EXPECT_EQ(state_of(a), IBV_QPS_RTR);
  ASSERT_EQ(to_rts(a, {}), 0);
  EXPECT_EQ(state_of(a), IBV_QPS_RTS);
  EXPECT_EQ(a->state, IBV_QPS_RTS);
  // Back to RESET and round again.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(api_.modify_qp(a, &reset, IBV_QP_STATE), 0);
  EXPECT_EQ(state_of(a), IBV_QPS_RESET);
  EXPECT_EQ(to_init(a, kRemoteAll), 0);
}

TEST_P(VerbsTest, IllegalTransitionsAndMissingAttributesFailWithEinval) {
  ibv_qp* a = make_qp(kA);
  ASSERT_NE(a, nullptr);
  // RESET -> RTR skips INIT.
  EXPECT_EQ(to_rtr(a, kB, a->qp_num, {}), EINVAL);
  // RESET -> INIT without the port.
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.qp_access_flags = kRemoteAll;
  EXPECT_EQ(api_.modify_qp(a, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  EXPECT_EQ(state_of(a), IBV_QPS_RESET);
  ASSERT_EQ(to_init(a, kRemoteAll), 0);
  // INIT -> RTS skips RTR.
  EXPECT_EQ(to_rts(a, {}), EINVAL);
  // INIT -> RTR without the destination QP number.
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = IBV_MTU_1024;
  rtr.ah_attr.port_num = port();
  EXPECT_EQ(api_.modify_qp(a, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            EINVAL);
  EXPECT_EQ(state_of(a), IBV_QPS_INIT);
  ASSERT_EQ(to_rtr(a, kA, a->qp_num, {}), 0);
  // RTR -> RTS with an attribute that belongs to RESET -> INIT.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 12;
  rts.retry_cnt = 2;
  rts.rnr_retry = 7;
  rts.max_rd_atomic = 1;
  rts.port_num = port();
  EXPECT_EQ(api_.modify_qp(a, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                        IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_PORT),
            EINVAL);
  EXPECT_EQ(state_of(a), IBV_QPS_RTR);
  // Any state -> ERR needs only the state.
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(api_.modify_qp(a, &err, IBV_QP_STATE), 0);
  EXPECT_EQ(state_of(a), IBV_QPS_ERR);
}

TEST_P(VerbsTest, WriteIsByteExactAndTouchesNothingElse) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  const std::size_t len = 256 * 1024;
  std::vector<char> src = pattern(len, 1);
  std::vector<char> dst(len + 8192, 'x');
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_NE(smr, nullptr);
  ASSERT_NE(dmr, nullptr);
  // Two chunks, written into the middle of the destination.
  ASSERT_EQ(post_write(a, smr, 0, len / 2, addr_of(dst.data()) + 4096, dmr->rkey, 1), 0);
  ASSERT_EQ(post_write(a, smr, len / 2, len / 2, addr_of(dst.data()) + 4096 + len / 2, dmr->rkey,
                       2),
            0);
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS) << api_.wc_status_str(wc[i].status);
    EXPECT_EQ(wc[i].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(wc[i].wr_id, static_cast<std::uint64_t>(i + 1));
    EXPECT_EQ(wc[i].qp_num, a->qp_num);
  }
  EXPECT_EQ(std::memcmp(dst.data() + 4096, src.data(), len), 0);
  EXPECT_EQ(std::string(dst.data(), 4096), std::string(4096, 'x'));
  EXPECT_EQ(std::string(dst.data() + 4096 + len, 4096), std::string(4096, 'x'));
  // No receive was consumed: B sees nothing.
  EXPECT_TRUE(poll_some(cq(kB), 3).empty());
}

TEST_P(VerbsTest, WriteWithImmConsumesOneReceive) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  const std::size_t len = 4096;
  std::vector<char> src = pattern(len, 2);
  std::vector<char> dst(len, 0);
  ibv_mr* smr = reg(kA, src.data(), len, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), len, kRemoteAll);
  ASSERT_EQ(post_recv(b, 71), 0);
  ASSERT_EQ(post_recv(b, 72), 0);
  ASSERT_EQ(post_write_imm(a, smr, len, addr_of(dst.data()), dmr->rkey, 0xdeadbeef, 5), 0);
  // The usual chunk terminator: a zero-length WRITE_WITH_IMM (no rkey check applies).
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 0x01020304, 6), 0);
  std::vector<ibv_wc> rx = wait(cq(kB), 2);
  ASSERT_EQ(rx.size(), 2U);
  EXPECT_EQ(rx[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rx[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(rx[0].wr_id, 71U);
  EXPECT_EQ(rx[0].byte_len, len);
  EXPECT_TRUE(rx[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(rx[0].imm_data), 0xdeadbeefU);
  EXPECT_EQ(rx[0].qp_num, b->qp_num);
  EXPECT_EQ(rx[1].wr_id, 72U);
  EXPECT_EQ(rx[1].byte_len, 0U);
  EXPECT_EQ(ntohl(rx[1].imm_data), 0x01020304U);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), len), 0);
  std::vector<ibv_wc> tx = wait(cq(kA), 2);
  ASSERT_EQ(tx.size(), 2U);
  EXPECT_EQ(tx[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(tx[1].status, IBV_WC_SUCCESS);
}

TEST_P(VerbsTest, SendRecvScattersAndChecksLength) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src = pattern(100, 3);
  std::vector<char> dst(128, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  // Receive into two pieces: 60 + 68 bytes.
  ibv_sge rsge[2] = {{addr_of(dst.data()), 60, dmr->lkey}, {addr_of(dst.data()) + 60, 68, dmr->lkey}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 9;
  rwr.sg_list = rsge;
  rwr.num_sge = 2;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(api_.post_recv(b, &rwr, &rbad), 0);
  ibv_sge sge{addr_of(src.data()), 100, smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 10;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(42);
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(api_.post_send(a, &wr, &bad), 0);
  std::vector<ibv_wc> rx = wait(cq(kB), 1);
  ASSERT_EQ(rx.size(), 1U);
  EXPECT_EQ(rx[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rx[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rx[0].byte_len, 100U);
  EXPECT_EQ(ntohl(rx[0].imm_data), 42U);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 100), 0);
  std::vector<ibv_wc> tx = wait(cq(kA), 1);
  ASSERT_EQ(tx.size(), 1U);
  EXPECT_EQ(tx[0].opcode, IBV_WC_SEND);

  // A receive too small for the message: local length error at B, B's QP in ERR.
  ASSERT_EQ(post_recv(b, 11, dmr, 16), 0);
  wr.wr_id = 12;
  wr.opcode = IBV_WR_SEND;
  ASSERT_EQ(api_.post_send(a, &wr, &bad), 0);
  rx = wait(cq(kB), 1);
  ASSERT_EQ(rx.size(), 1U);
  EXPECT_EQ(rx[0].status, IBV_WC_LOC_LEN_ERR) << api_.wc_status_str(rx[0].status);
  EXPECT_EQ(rx[0].wr_id, 11U);
  tx = wait(cq(kA), 1);
  ASSERT_EQ(tx.size(), 1U);
  EXPECT_NE(tx[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(state_of(b), IBV_QPS_ERR);
}

TEST_P(VerbsTest, RdmaReadIsByteExact) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> remote = pattern(8192, 4);
  std::vector<char> local(8192, 0);
  ibv_mr* rmr = reg(kB, remote.data(), remote.size(), kRemoteAll);
  ibv_mr* lmr = reg(kA, local.data(), local.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge{addr_of(local.data()), 8192, lmr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 3;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr_of(remote.data());
  wr.wr.rdma.rkey = rmr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(api_.post_send(a, &wr, &bad), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 8192U);
  EXPECT_EQ(local, remote);
}

TEST_P(VerbsTest, InlineDataIsCapturedAtPostTime) {
  QpOptions qa;
  qa.max_inline_data = 64;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(32, 'a');
  std::vector<char> dst(32, 0);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ibv_sge sge{addr_of(src.data()), 32, 0};  // no lkey needed for inline data
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = addr_of(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(api_.post_send(a, &wr, &bad), 0);
  std::fill(src.begin(), src.end(), 'b');  // the buffer may be reused right after posting
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::string(dst.begin(), dst.end()), std::string(32, 'a'));
}

TEST_P(VerbsTest, IovaRegistrationTranslatesRemoteAddresses) {
  if (api_.reg_mr_iova2 == nullptr) {
    GTEST_SKIP() << "libibverbs has no ibv_reg_mr_iova2";
  }
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src = pattern(512, 5);
  std::vector<char> dst(4096, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  const std::uint64_t iova = 0x100000;
  ibv_mr* dmr = api_.reg_mr_iova2(pd(kB), dst.data(), dst.size(), iova, kRemoteAll);
  ASSERT_NE(dmr, nullptr) << std::strerror(errno);
  ASSERT_EQ(post_write(a, smr, 0, 512, iova + 1024, dmr->rkey, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.data() + 1024, src.data(), 512), 0);
  EXPECT_EQ(api_.dereg_mr(dmr), 0);
}

TEST_P(VerbsTest, WrongRkeyIsRemoteAccessErrorAndFlushesTheRest) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src = pattern(1024, 6);
  std::vector<char> dst(1024, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_EQ(post_recv(a, 100), 0);  // a receive outstanding on the failing QP
  ASSERT_EQ(post_write(a, smr, 0, 1024, addr_of(dst.data()), dmr->rkey ^ 0x5500, 1), 0);
  ASSERT_EQ(post_write(a, smr, 0, 1024, addr_of(dst.data()), dmr->rkey, 2), 0);
  ASSERT_EQ(post_write(a, smr, 0, 1024, addr_of(dst.data()), dmr->rkey, 3, 0), 0);
  // Error, then flushes in posting order (unsignalled ones too), plus the receive.
  std::vector<ibv_wc> wc = wait(cq(kA), 4);
  ASSERT_EQ(wc.size(), 4U);
  std::vector<ibv_wc> sends;
  std::vector<ibv_wc> recvs;
  for (const ibv_wc& w : wc) (w.wr_id >= 100 ? recvs : sends).push_back(w);
  ASSERT_EQ(sends.size(), 3U);
  ASSERT_EQ(recvs.size(), 1U);
  EXPECT_EQ(sends[0].wr_id, 1U);
  EXPECT_EQ(sends[0].status, IBV_WC_REM_ACCESS_ERR) << api_.wc_status_str(sends[0].status);
  EXPECT_EQ(sends[1].wr_id, 2U);
  EXPECT_EQ(sends[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(sends[2].wr_id, 3U);
  EXPECT_EQ(sends[2].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(recvs[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(state_of(a), IBV_QPS_ERR);
  EXPECT_EQ(dst, std::vector<char>(1024, 0));
  // Work posted after the error is flushed too.
  ASSERT_EQ(post_write(a, smr, 0, 8, addr_of(dst.data()), dmr->rkey, 4), 0);
  wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].wr_id, 4U);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_P(VerbsTest, OutOfBoundsWriteIsRemoteAccessError) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(4096, 's');
  std::vector<char> dst(4096, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_EQ(post_write(a, smr, 0, 4096, addr_of(dst.data()) + 1, dmr->rkey, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dst, std::vector<char>(4096, 0));
}

TEST_P(VerbsTest, WriteNeedsRemoteWriteOnTheRegion) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dst, std::vector<char>(64, 0));
}

TEST_P(VerbsTest, WriteNeedsRemoteWriteOnTheQp) {
  ConnectOptions c;
  c.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
}

TEST_P(VerbsTest, WrongLkeyIsLocalProtectionError) {
  auto [a, b] = make_pair();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ibv_sge sge{addr_of(src.data()), 64, dmr->lkey};  // B's key: another PD
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr_of(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(api_.post_send(a, &wr, &bad), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR) << api_.wc_status_str(wc[0].status);
}

TEST_P(VerbsTest, NoReceivePostedExhaustsRnrRetries) {
  ConnectOptions c;
  c.rnr_retry = 1;
  auto [a, b] = make_pair({}, {}, c);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 7, 1), 0);
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 8, 2), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 2);
  ASSERT_EQ(wc.size(), 2U);
  EXPECT_EQ(wc[0].status, IBV_WC_RNR_RETRY_EXC_ERR) << api_.wc_status_str(wc[0].status);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(state_of(a), IBV_QPS_ERR);
}

TEST_P(VerbsTest, InfiniteRnrRetryWaitsForTheReceive) {
  auto [a, b] = make_pair();  // rnr_retry 7: retry forever
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(post_write_imm(a, nullptr, 0, 0, 0, 9, 1), 0);
  EXPECT_TRUE(poll_some(cq(kA), 10).empty());
  EXPECT_TRUE(poll_some(cq(kB), 10).empty());
  ASSERT_EQ(post_recv(b, 50), 0);
  std::vector<ibv_wc> rx = wait(cq(kB), 1);
  ASSERT_EQ(rx.size(), 1U);
  EXPECT_EQ(rx[0].wr_id, 50U);
  EXPECT_EQ(ntohl(rx[0].imm_data), 9U);
  std::vector<ibv_wc> tx = wait(cq(kA), 1);
  ASSERT_EQ(tx.size(), 1U);
  EXPECT_EQ(tx[0].status, IBV_WC_SUCCESS);
}

TEST_P(VerbsTest, UnsignalledWorkHoldsSendQueueSlotsUntilASignalledCompletion) {
  QpOptions qa;
  qa.max_send_wr = 8;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(api_.query_qp(a, &attr, IBV_QP_CAP, &init), 0);
  const std::uint32_t depth = init.cap.max_send_wr;  // drivers may round up
  ASSERT_GE(depth, 8U);
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  // depth - 1 unsignalled + 1 signalled: exactly full.
  for (std::uint32_t i = 0; i + 1 < depth; ++i) {
    ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, i, 0), 0) << i;
  }
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 999), 0);
  EXPECT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 1000), ENOMEM);
  // One completion (the signalled one) frees every slot.
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].wr_id, 999U);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(poll_some(cq(kA), 5).empty());
  for (std::uint32_t i = 0; i + 1 < depth; ++i) {
    ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, i, 0), 0) << i;
  }
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 2000), 0);
  wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].wr_id, 2000U);
}

TEST_P(VerbsTest, SqSigAllSignalsEveryRequest) {
  QpOptions qa;
  qa.sq_sig_all = true;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, i, 0), 0);
  }
  std::vector<ibv_wc> wc = wait(cq(kA), 3);
  ASSERT_EQ(wc.size(), 3U);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wc[i].wr_id, static_cast<std::uint64_t>(i));
}

TEST_P(VerbsTest, SharedCqKeepsPerQpOrder) {
  // Two QP pairs; both of A's QPs complete into A's one CQ.
  ibv_qp* a1 = make_qp(kA);
  ibv_qp* a2 = make_qp(kA);
  ibv_qp* b1 = make_qp(kB);
  ibv_qp* b2 = make_qp(kB);
  ASSERT_TRUE(a1 && a2 && b1 && b2);
  connect(a1, kA, b1, kB);
  connect(a2, kA, b2, kB);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(256, 's');
  std::vector<char> dst(256, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  constexpr int kPerQp = 20;
  for (int i = 0; i < kPerQp; ++i) {
    ASSERT_EQ(post_write(a1, smr, 0, 128, addr_of(dst.data()), dmr->rkey, 1000 + i), 0);
    ASSERT_EQ(post_write(a2, smr, 0, 128, addr_of(dst.data()) + 128, dmr->rkey, 2000 + i), 0);
  }
  std::vector<ibv_wc> wc = wait(cq(kA), 2 * kPerQp);
  ASSERT_EQ(wc.size(), 2U * kPerQp);
  std::uint64_t next1 = 1000;
  std::uint64_t next2 = 2000;
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    if (w.qp_num == a1->qp_num) {
      EXPECT_EQ(w.wr_id, next1++);
    } else {
      EXPECT_EQ(w.qp_num, a2->qp_num);
      EXPECT_EQ(w.wr_id, next2++);
    }
  }
  EXPECT_EQ(next1, 1000U + kPerQp);
  EXPECT_EQ(next2, 2000U + kPerQp);
}

TEST_P(VerbsTest, WrongDestinationQpExhaustsTransportRetries) {
  ibv_qp* a = make_qp(kA);
  ibv_qp* b = make_qp(kB);
  ASSERT_TRUE(a && b);
  ConnectOptions c;
  c.retry_cnt = 1;
  c.timeout = 8;  // about 1 ms per try on hardware
  ASSERT_EQ(to_init(a, c.access), 0);
  ASSERT_EQ(to_init(b, c.access), 0);
  ASSERT_EQ(to_rtr(a, kB, b->qp_num + 1000, c), 0);  // nobody there
  ASSERT_EQ(to_rtr(b, kA, a->qp_num, c), 0);
  ASSERT_EQ(to_rts(a, c), 0);
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 1), 0);
  std::vector<ibv_wc> wc = wait(cq(kA), 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << api_.wc_status_str(wc[0].status);
}

TEST_P(VerbsTest, PostingRespectsQueueLimits) {
  QpOptions qa;
  qa.max_recv_wr = 2;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(api_.query_qp(a, &attr, IBV_QP_CAP, &init), 0);
  for (std::uint32_t i = 0; i < init.cap.max_recv_wr; ++i) ASSERT_EQ(post_recv(a, i), 0);
  EXPECT_EQ(post_recv(a, 99), ENOMEM);
  // A chain stops at the first bad WR and reports it.
  ibv_recv_wr second{};
  second.wr_id = 2;
  ibv_recv_wr first{};
  first.wr_id = 1;
  first.next = &second;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(api_.post_recv(a, &first, &bad), ENOMEM);
  EXPECT_EQ(bad, &first);
}

TEST_P(VerbsTest, RegistrationAndTeardownRules) {
  std::vector<char> buf(4096);
  // Remote write without local write is refused by the kernel.
  errno = 0;
  EXPECT_EQ(api_.reg_mr(pd(kA), buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* mr = api_.reg_mr(pd(kA), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_NE(mr->lkey, 0U);
  EXPECT_EQ(mr->addr, buf.data());
  EXPECT_EQ(mr->length, buf.size());
  // A PD with a region cannot go; a CQ with a QP cannot go.
  EXPECT_EQ(api_.dealloc_pd(pd(kA)), EBUSY);
  EXPECT_EQ(api_.dereg_mr(mr), 0);
  ibv_qp* qp = make_qp(kA);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(api_.destroy_cq(cq(kA)), EBUSY);
}

TEST_P(VerbsTest, CompletionChannelSignalsAnArmedCq) {
  ibv_comp_channel* ch = make_channel(kA);
  ASSERT_NE(ch, nullptr);
  ibv_cq* ccq = make_cq(kA, 64, ch);
  ASSERT_NE(ccq, nullptr);
  QpOptions qa;
  qa.send_cq = ccq;
  auto [a, b] = make_pair(qa);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<char> src(64, 's');
  std::vector<char> dst(64, 0);
  ibv_mr* smr = reg(kA, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = reg(kB, dst.data(), dst.size(), kRemoteAll);
  ASSERT_EQ(api_.req_notify_cq(ccq, 0), 0);
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 1), 0);
  // Drive the fake in on_poll mode through another CQ (harmless on hardware), and wait on the
  // channel's fd as a progress thread would.
  bool signalled = false;
  for (int i = 0; i < 1000 && !signalled; ++i) {
    (void)poll_some(cq(kB), 1);
    pollfd pfd{ch->fd, POLLIN, 0};
    signalled = ::poll(&pfd, 1, 10) == 1;
  }
  ASSERT_TRUE(signalled);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(api_.get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, ccq);
  api_.ack_cq_events(ev_cq, 1);
  std::vector<ibv_wc> wc = wait(ccq, 1);
  ASSERT_EQ(wc.size(), 1U);
  EXPECT_EQ(wc[0].wr_id, 1U);
  // Not re-armed: a second completion raises no event.
  ASSERT_EQ(post_write(a, smr, 0, 64, addr_of(dst.data()), dmr->rkey, 2), 0);
  wc = wait(ccq, 1);
  ASSERT_EQ(wc.size(), 1U);
  pollfd pfd{ch->fd, POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0);
}

INSTANTIATE_TEST_SUITE_P(Providers, VerbsTest, ::testing::ValuesIn(all_providers()),
                         provider_name);

}  // namespace
}  // namespace tictac::verbs::testing
