// QueuePair: one RC queue pair of a verbs endpoint (RAII) and its RESET -> INIT -> RTR -> RTS
// transitions, with the port attributes (MTU, LID or GID + traffic class, service level) and
// the retry settings from VerbsConfig.
//
// Errors: each step returns a Status naming the QP, the step and errno. The destructor moves the
// QP to RESET (which discards its queued work and its entries in the CQ) and destroys it.
// Threading: loop-thread only (or any single thread, for tests). Move-only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "transport/verbs/backend/config.h"
#include "transport/verbs/backend/qp_info.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

struct QpCaps {
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
};

class QueuePair {
 public:
  QueuePair() = default;
  // An RC QP on `pd` whose send and receive completions go to `cq`, one SGE each way. Drivers may
  // grant more than `want` (read back with query_qp); caps() is `want`, all the endpoint uses.
  static Result<QueuePair> create(const IbvApi& api, ibv_pd* pd, ibv_cq* cq, QpCaps want,
                                  const std::string& what);
  QueuePair(QueuePair&& other) noexcept;
  QueuePair& operator=(QueuePair&& other) noexcept;
  ~QueuePair();

  ibv_qp* get() const { return qp_; }
  std::uint32_t num() const { return qp_ != nullptr ? qp_->qp_num : 0; }
  const QpCaps& caps() const { return caps_; }

  Status to_init(std::uint8_t port, int access);
  // `local` is our port (port_info() of the Device), `remote` the peer's QpInfo, `remote_qpn`
  // the peer QP this one talks to.
  Status to_rtr(std::uint8_t port, int gid_index, const QpInfo& local, const QpInfo& remote,
                std::uint32_t remote_qpn, const VerbsConfig& config);
  Status to_rts(std::uint32_t psn, const VerbsConfig& config);

 private:
  Status check(int rc, const char* step) const;
  void reset();

  const IbvApi* api_ = nullptr;
  ibv_qp* qp_ = nullptr;
  QpCaps caps_;
  std::string what_;
};

}  // namespace tictac::verbs
