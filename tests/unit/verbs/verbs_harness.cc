#include "tests/unit/verbs/verbs_harness.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <thread>

#include "transport/verbs/ibv_loader.h"
#include "transport/verbs/probe.h"

namespace tictac::verbs::testing {

std::vector<std::string> all_providers() { return {"fake_ib", "fake_roce", "fake_threaded", "real"}; }

std::string provider_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

std::vector<char> pattern(std::size_t len, unsigned seed) {
  std::vector<char> v(len);
  std::uint32_t x = seed * 2654435761U + 1;
  for (char& c : v) {
    x = x * 1664525U + 1013904223U;
    c = static_cast<char>(x >> 24);
  }
  return v;
}

void VerbsTest::SetUp() {
  const std::string& provider = GetParam();
  if (provider == "real") {
    Result<IbvApi> api = load_libibverbs();
    if (!api.ok()) {
      GTEST_SKIP() << api.status().message();
    }
    Result<std::vector<ActivePort>> ports = find_active_ports(*api);
    if (!ports.ok()) {
      GTEST_SKIP() << ports.status().message();
    }
    api_ = *api;
    port_ = ports->front().port;
    // RoCE v2 usually needs a specific GID index; let the person running the test choose it.
    if (const char* g = std::getenv("TICTAC_TEST_VERBS_GID_INDEX"); g != nullptr) {
      gid_index_ = std::atoi(g);
    }
    int num = 0;
    ibv_device** list = api_.get_device_list(&num);
    ASSERT_NE(list, nullptr);
    for (int i = 0; i < num; ++i) {
      if (ports->front().device == api_.get_device_name(list[i])) {
        ctx_[kA] = api_.open_device(list[i]);
        ctx_[kB] = api_.open_device(list[i]);
      }
    }
    api_.free_device_list(list);
  } else {
    fake::FabricOptions options;
    if (provider == "fake_roce") {
      options.devices = {fake::DeviceSpec{"fake_roce0", {fake::PortSpec{IBV_LINK_LAYER_ETHERNET}}}};
      gid_index_ = 1;  // the IPv4-mapped (RoCE v2 style) entry
    } else if (provider == "fake_threaded") {
      options.execution = fake::Execution::thread;
    } else {
      ASSERT_EQ(provider, "fake_ib") << "unknown provider";
    }
    fabric_ = std::make_unique<fake::FakeFabric>(options);
    api_ = fabric_->api();
    int num = 0;
    ibv_device** list = api_.get_device_list(&num);
    ASSERT_EQ(num, 1);
    ctx_[kA] = api_.open_device(list[0]);
    ctx_[kB] = api_.open_device(list[0]);
    api_.free_device_list(list);
  }
  ASSERT_NE(ctx_[kA], nullptr);
  ASSERT_NE(ctx_[kB], nullptr);
  ASSERT_EQ(api_.query_port(ctx_[kA], port_, &port_attr_), 0);
  for (Side s : {kA, kB}) {
    pd_[s] = api_.alloc_pd(ctx_[s]);
    ASSERT_NE(pd_[s], nullptr);
    cq_[s] = api_.create_cq(ctx_[s], 1024, nullptr, nullptr, 0);
    ASSERT_NE(cq_[s], nullptr);
  }
}

void VerbsTest::TearDown() {
  for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) EXPECT_EQ(api_.destroy_qp(*it), 0);
  for (auto it = mrs_.rbegin(); it != mrs_.rend(); ++it) EXPECT_EQ(api_.dereg_mr(*it), 0);
  for (auto it = extra_cqs_.rbegin(); it != extra_cqs_.rend(); ++it) {
    EXPECT_EQ(api_.destroy_cq(*it), 0);
  }
  for (Side s : {kA, kB}) {
    if (cq_[s] != nullptr) {
      EXPECT_EQ(api_.destroy_cq(cq_[s]), 0);
    }
  }
  for (auto it = channels_.rbegin(); it != channels_.rend(); ++it) {
    EXPECT_EQ(api_.destroy_comp_channel(*it), 0);
  }
  for (Side s : {kA, kB}) {
    if (pd_[s] != nullptr) {
      EXPECT_EQ(api_.dealloc_pd(pd_[s]), 0);
    }
    if (ctx_[s] != nullptr) {
      EXPECT_EQ(api_.close_device(ctx_[s]), 0);
    }
  }
  if (fabric_ != nullptr) {
    EXPECT_EQ(fabric_->live_objects(), 0U) << "the test leaked objects";
  }
}

ibv_qp* VerbsTest::make_qp(Side s, const QpOptions& o) {
  ibv_qp_init_attr init{};
  init.send_cq = o.send_cq != nullptr ? o.send_cq : cq_[s];
  init.recv_cq = cq_[s];
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = o.sq_sig_all ? 1 : 0;
  init.cap.max_send_wr = o.max_send_wr;
  init.cap.max_recv_wr = o.max_recv_wr;
  init.cap.max_send_sge = o.max_sge;
  init.cap.max_recv_sge = o.max_sge;
  init.cap.max_inline_data = o.max_inline_data;
  ibv_qp* qp = api_.create_qp(pd_[s], &init);
  EXPECT_NE(qp, nullptr) << "create_qp: " << std::strerror(errno);
  if (qp != nullptr) qps_.push_back(qp);
  return qp;
}

ibv_mr* VerbsTest::reg(Side s, void* addr, std::size_t len, int access) {
  ibv_mr* mr = api_.reg_mr(pd_[s], addr, len, access);
  EXPECT_NE(mr, nullptr) << "reg_mr: " << std::strerror(errno);
  if (mr != nullptr) mrs_.push_back(mr);
  return mr;
}

ibv_cq* VerbsTest::make_cq(Side s, int cqe, ibv_comp_channel* channel) {
  ibv_cq* cq = api_.create_cq(ctx_[s], cqe, nullptr, channel, 0);
  EXPECT_NE(cq, nullptr) << "create_cq: " << std::strerror(errno);
  if (cq != nullptr) extra_cqs_.push_back(cq);
  return cq;
}

ibv_comp_channel* VerbsTest::make_channel(Side s) {
  ibv_comp_channel* ch = api_.create_comp_channel(ctx_[s]);
  EXPECT_NE(ch, nullptr) << "create_comp_channel: " << std::strerror(errno);
  if (ch != nullptr) channels_.push_back(ch);
  return ch;
}

int VerbsTest::to_init(ibv_qp* qp, int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_;
  a.qp_access_flags = access;
  return api_.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                    IBV_QP_ACCESS_FLAGS);
}

int VerbsTest::to_rtr(ibv_qp* qp, Side remote_side, std::uint32_t remote_qpn,
                      const ConnectOptions& o) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port_attr_.active_mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = o.min_rnr_timer;
  a.ah_attr.port_num = port_;
  a.ah_attr.dlid = port_attr_.lid;  // both sides are on the same port (loopback)
  if (port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
    a.ah_attr.grh.hop_limit = 1;
    EXPECT_EQ(api_.query_gid(ctx_[remote_side], port_, gid_index_, &a.ah_attr.grh.dgid), 0);
  }
  return api_.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER);
}

int VerbsTest::to_rts(ibv_qp* qp, const ConnectOptions& o) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = 1;
  return api_.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

void VerbsTest::connect(ibv_qp* a, Side side_a, ibv_qp* b, Side side_b, const ConnectOptions& o) {
  ASSERT_EQ(to_init(a, o.access), 0);
  ASSERT_EQ(to_init(b, o.access), 0);
  ASSERT_EQ(to_rtr(a, side_b, b->qp_num, o), 0);
  ASSERT_EQ(to_rtr(b, side_a, a->qp_num, o), 0);
  ASSERT_EQ(to_rts(a, o), 0);
  ASSERT_EQ(to_rts(b, o), 0);
}

std::pair<ibv_qp*, ibv_qp*> VerbsTest::make_pair(const QpOptions& qa, const QpOptions& qb,
                                                 const ConnectOptions& c) {
  ibv_qp* a = make_qp(kA, qa);
  ibv_qp* b = make_qp(kB, qb);
  if (a != nullptr && b != nullptr) connect(a, kA, b, kB, c);
  return {a, b};
}

ibv_qp_state VerbsTest::state_of(ibv_qp* qp) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  EXPECT_EQ(api_.query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
  return attr.qp_state;
}

std::vector<ibv_wc> VerbsTest::wait(ibv_cq* cq, std::size_t n) {
  std::vector<ibv_wc> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ibv_wc wc[16];
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    const int want = static_cast<int>(std::min<std::size_t>(16, n - out.size()));
    const int got = api_.poll_cq(cq, want, wc);
    EXPECT_GE(got, 0) << "poll_cq failed";
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) std::this_thread::yield();
  }
  EXPECT_EQ(out.size(), n) << "completions did not arrive";
  return out;
}

std::vector<ibv_wc> VerbsTest::poll_some(ibv_cq* cq, int polls) {
  std::vector<ibv_wc> out;
  ibv_wc wc[16];
  for (int i = 0; i < polls; ++i) {
    const int got = api_.poll_cq(cq, 16, wc);
    if (got > 0) out.insert(out.end(), wc, wc + got);
  }
  return out;
}

int VerbsTest::post_write(ibv_qp* qp, ibv_mr* local, std::size_t offset, std::size_t len,
                          std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id,
                          unsigned flags) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(local->addr) + offset;
  sge.length = static_cast<std::uint32_t>(len);
  sge.lkey = local->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = flags;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return api_.post_send(qp, &wr, &bad);
}

int VerbsTest::post_write_imm(ibv_qp* qp, ibv_mr* local, std::size_t len,
                              std::uint64_t remote_addr, std::uint32_t rkey,
                              std::uint32_t imm_host_order, std::uint64_t wr_id, unsigned flags) {
  ibv_sge sge{};
  ibv_send_wr wr{};
  if (len > 0) {
    sge.addr = reinterpret_cast<std::uintptr_t>(local->addr);
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = local->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = flags;
  wr.imm_data = htonl(imm_host_order);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return api_.post_send(qp, &wr, &bad);
}

int VerbsTest::post_recv(ibv_qp* qp, std::uint64_t wr_id, ibv_mr* mr, std::size_t len) {
  ibv_sge sge{};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  if (mr != nullptr) {
    sge.addr = reinterpret_cast<std::uintptr_t>(mr->addr);
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = mr->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  ibv_recv_wr* bad = nullptr;
  return api_.post_recv(qp, &wr, &bad);
}

}  // namespace tictac::verbs::testing
