// Fake fabric: RC queue pairs and their state machine (RESET, INIT, RTR, RTS, ERR).
//
// modify_qp follows the kernel's ib_modify_qp_is_ok() table for RC QPs: a transition is legal
// only when the mask holds all of its required attributes and nothing beyond its optional ones;
// values are range-checked like the kernel and the providers do. SQD/SQE are not modelled:
// transitions into them fail with EINVAL.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

struct Transition {
  int required = 0;
  int optional = 0;
};

std::optional<Transition> rc_transition(ibv_qp_state cur, ibv_qp_state next) {
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return Transition{};
  if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
    return Transition{IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
  }
  if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
    return Transition{0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
  }
  if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    return Transition{IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                      IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
  }
  if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    return Transition{IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC,
                      IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                          IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE};
  }
  if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
    return Transition{0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                             IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER};
  }
  return std::nullopt;
}

constexpr int kValidQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

bool gid_is_zero(const ibv_gid& gid) {
  static const ibv_gid kZero{};
  return std::memcmp(&gid, &kZero, sizeof(gid)) == 0;
}

}  // namespace

ibv_wc make_wc(const Qp* qp, std::uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + static_cast<std::uint32_t>(status);
  wc.qp_num = qp->num();
  wc.src_qp = qp->attr.dest_qp_num;
  return wc;
}

ibv_wc_opcode wc_opcode_for(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    default:
      return IBV_WC_SEND;
  }
}

ibv_qp* FabricState::create_qp(Pd* pd, ibv_qp_init_attr* init) {
  std::lock_guard lk(mu);
  errno = 0;
  if (init->qp_type != IBV_QPT_RC || init->srq != nullptr) {
    errno = EOPNOTSUPP;  // the fake models RC QPs without SRQ only
    return nullptr;
  }
  if (init->send_cq == nullptr || init->recv_cq == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Cq* scq = owner_of<Cq>(init->send_cq);
  Cq* rcq = owner_of<Cq>(init->recv_cq);
  const ibv_qp_cap& cap = init->cap;
  if (scq->ctx != pd->ctx || rcq->ctx != pd->ctx ||
      cap.max_send_wr > static_cast<std::uint32_t>(options.max_qp_wr) ||
      cap.max_recv_wr > static_cast<std::uint32_t>(options.max_qp_wr) ||
      cap.max_send_sge > static_cast<std::uint32_t>(options.max_sge) ||
      cap.max_recv_sge > static_cast<std::uint32_t>(options.max_sge) ||
      cap.max_inline_data > options.max_inline_data) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = std::make_unique<Qp>();
  qp->h.owner = qp.get();
  qp->ctx = pd->ctx;
  qp->pd = pd;
  qp->send_cq = scq;
  qp->recv_cq = rcq;
  qp->cap = cap;  // real drivers may round these up; the fake grants exactly what was asked
  qp->sq_sig_all = init->sq_sig_all != 0;
  ibv_qp& q = qp->h.ibv;
  q.context = &pd->ctx->h.ibv;
  q.qp_context = init->qp_context;
  q.pd = &pd->h.ibv;
  q.send_cq = init->send_cq;
  q.recv_cq = init->recv_cq;
  q.srq = nullptr;
  q.handle = next_handle++;
  q.qp_num = next_qp_num++ & 0xffffff;
  q.state = IBV_QPS_RESET;
  q.qp_type = IBV_QPT_RC;
  ++pd->qps;
  ++pd->ctx->qps;
  ++scq->qps;
  ++rcq->qps;
  ibv_qp* out = &q;
  qps.emplace(q.qp_num, std::move(qp));
  return out;
}

int FabricState::modify_qp(Qp* qp, const ibv_qp_attr* a, int mask) {
  std::lock_guard lk(mu);
  const ibv_qp_state cur = qp->state();
  if ((mask & IBV_QP_CUR_STATE) != 0 && a->cur_qp_state != cur) return EINVAL;
  const ibv_qp_state next = (mask & IBV_QP_STATE) != 0 ? a->qp_state : cur;
  const std::optional<Transition> t = rc_transition(cur, next);
  if (!t.has_value()) return EINVAL;
  const int allowed = t->required | t->optional | IBV_QP_STATE;
  if ((mask & ~allowed) != 0 || (mask & t->required) != t->required) return EINVAL;

  // Value checks.
  const auto& ports = qp->ctx->device->ports;
  const auto valid_port = [&](std::uint8_t p) { return p >= 1 && p <= ports.size(); };
  if ((mask & IBV_QP_PORT) != 0 && !valid_port(a->port_num)) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) != 0 && a->pkey_index != 0) return EINVAL;  // 1-entry table
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0 && (a->qp_access_flags & ~kValidQpAccess) != 0) {
    return EINVAL;
  }
  const std::uint8_t port = (mask & IBV_QP_PORT) != 0 ? a->port_num : qp->attr.port_num;
  if ((mask & IBV_QP_AV) != 0) {
    const ibv_ah_attr& ah = a->ah_attr;
    if (!valid_port(ah.port_num) || !valid_port(port)) return EINVAL;
    const Port& p = ports[port - 1];
    if (p.spec.link_layer == IBV_LINK_LAYER_ETHERNET && ah.is_global == 0) return EINVAL;  // RoCE
    if (ah.is_global != 0) {
      const std::uint8_t idx = ah.grh.sgid_index;
      if (idx >= p.gids.size() || gid_is_zero(p.gids[idx])) return EINVAL;
    }
  }
  if ((mask & IBV_QP_PATH_MTU) != 0) {
    if (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096 || !valid_port(port) ||
        a->path_mtu > ports[port - 1].spec.max_mtu) {
      return EINVAL;
    }
  }
  if ((mask & IBV_QP_DEST_QPN) != 0 && a->dest_qp_num > 0xffffff) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 && a->max_dest_rd_atomic > options.max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && a->max_rd_atomic > options.max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0 && a->min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) != 0 && a->timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) != 0 && a->retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) != 0 && a->rnr_retry > 7) return EINVAL;

  if (next == IBV_QPS_RESET) {
    reset_qp_locked(qp);
    return 0;
  }
  if (next == IBV_QPS_ERR) {
    error_qp_locked(qp);
    executor_cv.notify_all();
    return 0;
  }
  ibv_qp_attr& s = qp->attr;
  if ((mask & IBV_QP_PKEY_INDEX) != 0) s.pkey_index = a->pkey_index;
  if ((mask & IBV_QP_PORT) != 0) s.port_num = a->port_num;
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0) s.qp_access_flags = a->qp_access_flags;
  if ((mask & IBV_QP_AV) != 0) s.ah_attr = a->ah_attr;
  if ((mask & IBV_QP_PATH_MTU) != 0) s.path_mtu = a->path_mtu;
  if ((mask & IBV_QP_DEST_QPN) != 0) s.dest_qp_num = a->dest_qp_num;
  if ((mask & IBV_QP_RQ_PSN) != 0) s.rq_psn = a->rq_psn & 0xffffff;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0) s.max_dest_rd_atomic = a->max_dest_rd_atomic;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0) s.min_rnr_timer = a->min_rnr_timer;
  if ((mask & IBV_QP_SQ_PSN) != 0) s.sq_psn = a->sq_psn & 0xffffff;
  if ((mask & IBV_QP_TIMEOUT) != 0) s.timeout = a->timeout;
  if ((mask & IBV_QP_RETRY_CNT) != 0) s.retry_cnt = a->retry_cnt;
  if ((mask & IBV_QP_RNR_RETRY) != 0) s.rnr_retry = a->rnr_retry;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0) s.max_rd_atomic = a->max_rd_atomic;
  if ((mask & IBV_QP_ALT_PATH) != 0) {
    s.alt_ah_attr = a->alt_ah_attr;
    s.alt_pkey_index = a->alt_pkey_index;
    s.alt_port_num = a->alt_port_num;
    s.alt_timeout = a->alt_timeout;
  }
  if ((mask & IBV_QP_PATH_MIG_STATE) != 0) s.path_mig_state = a->path_mig_state;
  s.qp_state = next;
  qp->h.ibv.state = next;
  executor_cv.notify_all();
  return 0;
}

int FabricState::query_qp(Qp* qp, ibv_qp_attr* attr, ibv_qp_init_attr* init) {
  std::lock_guard lk(mu);
  *attr = qp->attr;
  attr->qp_state = qp->state();
  attr->cur_qp_state = qp->state();
  attr->cap = qp->cap;
  *init = ibv_qp_init_attr{};
  init->qp_context = qp->h.ibv.qp_context;
  init->send_cq = qp->h.ibv.send_cq;
  init->recv_cq = qp->h.ibv.recv_cq;
  init->cap = qp->cap;
  init->qp_type = IBV_QPT_RC;
  init->sq_sig_all = qp->sq_sig_all ? 1 : 0;
  return 0;
}

int FabricState::destroy_qp(Qp* qp) {
  std::lock_guard lk(mu);
  if (qp->async_events_unacked > 0) return EBUSY;
  reset_qp_locked(qp);
  drop_pending_events_locked(qp->ctx, &qp->h.ibv);
  --qp->pd->qps;
  --qp->ctx->qps;
  --qp->send_cq->qps;
  --qp->recv_cq->qps;
  qps.erase(qp->num());
  return 0;
}

void FabricState::error_qp_locked(Qp* qp) {
  if (qp->state() == IBV_QPS_ERR) return;
  qp->h.ibv.state = IBV_QPS_ERR;
  qp->attr.qp_state = IBV_QPS_ERR;
  // Flush in posting order: the send queue into the send CQ, then the receive queue.
  std::deque<SendWr> sq = std::move(qp->sq);
  std::deque<RecvWr> rq = std::move(qp->rq);
  qp->sq.clear();
  qp->rq.clear();
  for (const SendWr& wr : sq) {
    Completion c{make_wc(qp, wr.wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode_for(wr.opcode)), true,
                 wr.seq};
    push_completion_locked(qp->send_cq, c, qp, false);
  }
  for (const RecvWr& wr : rq) {
    Completion c{make_wc(qp, wr.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV), false, wr.seq};
    push_completion_locked(qp->recv_cq, c, qp, false);
  }
}

void FabricState::reset_qp_locked(Qp* qp) {
  qp->sq.clear();
  qp->rq.clear();
  const std::uint32_t num = qp->num();
  for (Cq* cq : {qp->send_cq, qp->recv_cq}) {
    std::erase_if(cq->entries, [num](const Completion& c) { return c.wc.qp_num == num; });
  }
  qp->send_retired = qp->send_posted;
  qp->recv_retired = qp->recv_posted;
  qp->comm_established = false;
  qp->delay_steps = 0;
  qp->fail_next.reset();
  qp->attr = ibv_qp_attr{};
  qp->h.ibv.state = IBV_QPS_RESET;
}

}  // namespace tictac::verbs::fake
