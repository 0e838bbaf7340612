#include "transport/verbs/backend/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.h"

namespace tictac::verbs {

Result<QueuePair> QueuePair::create(const IbvApi& api, ibv_pd* pd, ibv_cq* cq, QpCaps want,
                                    const std::string& what) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = want.max_send_wr;
  init.cap.max_recv_wr = want.max_recv_wr;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  errno = 0;
  QueuePair q;
  q.api_ = &api;
  q.what_ = what;
  q.qp_ = api.create_qp(pd, &init);
  if (q.qp_ == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    return errno_status(err == ENOMEM ? StatusCode::resource_exhausted : StatusCode::internal,
                        "cannot create the " + what + " (" + std::to_string(want.max_send_wr) + " send / " +
                            std::to_string(want.max_recv_wr) + " receive requests)",
                        "ibv_create_qp", err);
  }
  ibv_qp_attr attr{};
  ibv_qp_init_attr got{};
  if (const int rc = api.query_qp(q.qp_, &attr, IBV_QP_CAP, &got); rc != 0) {
    return errno_status(StatusCode::internal, "cannot query the " + what, "ibv_query_qp", rc);
  }
  if (got.cap.max_send_wr < want.max_send_wr || got.cap.max_recv_wr < want.max_recv_wr) {
    return Status(StatusCode::internal, "the driver granted the " + what + " fewer work requests than asked for");
  }
  // Never rely on more than we asked for: queue depths bound the CQ reservation.
  q.caps_ = want;
  return q;
}

QueuePair::QueuePair(QueuePair&& other) noexcept
    : api_(other.api_), qp_(std::exchange(other.qp_, nullptr)), caps_(other.caps_), what_(std::move(other.what_)) {}

QueuePair& QueuePair::operator=(QueuePair&& other) noexcept {
  if (this != &other) {
    reset();
    api_ = other.api_;
    qp_ = std::exchange(other.qp_, nullptr);
    caps_ = other.caps_;
    what_ = std::move(other.what_);
  }
  return *this;
}

QueuePair::~QueuePair() { reset(); }

void QueuePair::reset() {
  if (qp_ == nullptr) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  (void)api_->modify_qp(qp_, &attr, IBV_QP_STATE);  // drops queued work and its CQ entries
  if (const int rc = api_->destroy_qp(qp_); rc != 0) {
    TICTAC_LOG(warn) << "ibv_destroy_qp of the " << what_ << " failed: " << std::strerror(rc);
  }
  qp_ = nullptr;
}

Status QueuePair::check(int rc, const char* step) const {
  if (rc == 0) return Status::Ok();
  return errno_status(StatusCode::internal, "cannot move the " + what_ + " (QP " + std::to_string(num()) + ") " + step,
                      "ibv_modify_qp", rc);
}

Status QueuePair::to_init(std::uint8_t port, int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port;
  a.qp_access_flags = static_cast<unsigned>(access);
  return check(api_->modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
               "to INIT");
}

Status QueuePair::to_rtr(std::uint8_t port, int gid_index, const QpInfo& local, const QpInfo& remote,
                         std::uint32_t remote_qpn, const VerbsConfig& config) {
  if (remote.link_layer != local.link_layer) {
    return Status(StatusCode::invalid_argument,
                  "the peer's port is " + std::string(remote.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") +
                      " and ours is not: an RC connection needs the same link layer on both ends");
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(local.mtu, remote.mtu);
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = static_cast<std::uint8_t>(config.min_rnr_timer);
  a.ah_attr.port_num = port;
  a.ah_attr.sl = static_cast<std::uint8_t>(config.service_level);
  if (local.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = static_cast<std::uint8_t>(config.traffic_class);
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  return check(api_->modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
               "to RTR");
}

Status QueuePair::to_rts(std::uint32_t psn, const VerbsConfig& config) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = static_cast<std::uint8_t>(config.timeout);
  a.retry_cnt = static_cast<std::uint8_t>(config.retry_cnt);
  a.rnr_retry = static_cast<std::uint8_t>(config.rnr_retry);
  a.max_rd_atomic = 1;
  return check(api_->modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
               "to RTS");
}

}  // namespace tictac::verbs
