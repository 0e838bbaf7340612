// Fake fabric: posting, executing and polling work requests (the RC data path).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

constexpr std::uint64_t kMaxMsgSize = 1ULL << 31;  // port max_msg_sz
constexpr std::uint8_t kInfiniteRnrRetry = 7;

// True when [addr, addr + len) lies inside the region's iova range.
bool in_region(const Mr& mr, std::uint64_t addr, std::uint64_t len) {
  return addr >= mr.iova && len <= mr.length && addr - mr.iova <= mr.length - len;
}

bool valid_send_opcode(ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND ||
         op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_READ;
}

bool gid_equal(const ibv_gid& a, const ibv_gid& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

}  // namespace

Qp* FabricState::find_qp_locked(std::uint32_t num) {
  auto it = qps.find(num);
  return it == qps.end() ? nullptr : it->second.get();
}

Device* FabricState::find_device_locked(std::string_view name) {
  for (auto& d : devices) {
    if (d->name == name) return d.get();
  }
  return nullptr;
}

const Port* FabricState::port_of_locked(const Qp* qp) const {
  const auto& ports = qp->ctx->device->ports;
  const std::uint8_t p = qp->attr.port_num;
  return p >= 1 && p <= ports.size() ? &ports[p - 1] : nullptr;
}

namespace {

// Does `ah` (a QP's RTR address vector) name port `p`?
bool addresses_port(const ibv_ah_attr& ah, const Port& p) {
  if (ah.is_global != 0) {
    return std::any_of(p.gids.begin(), p.gids.end(),
                       [&](const ibv_gid& g) { return gid_equal(g, ah.grh.dgid); });
  }
  return p.spec.link_layer == IBV_LINK_LAYER_INFINIBAND && ah.dlid == p.lid;
}

}  // namespace

// The connected peer of `qp` when packets get through both ways, else nullptr (the sender then
// times out and retries, as with a dead link, a wrong address or a peer not ready to receive).
Qp* FabricState::peer_locked(Qp* qp) {
  if (qp->dropped) return nullptr;
  const Port* lp = port_of_locked(qp);
  if (lp == nullptr || lp->state != IBV_PORT_ACTIVE) return nullptr;
  Qp* t = find_qp_locked(qp->attr.dest_qp_num);
  if (t == nullptr || t->dropped) return nullptr;
  if (t->state() != IBV_QPS_RTR && t->state() != IBV_QPS_RTS) return nullptr;
  if (t->attr.dest_qp_num != qp->num()) return nullptr;
  const Port* tp = port_of_locked(t);
  if (tp == nullptr || tp->state != IBV_PORT_ACTIVE) return nullptr;
  if (!addresses_port(qp->attr.ah_attr, *tp) || !addresses_port(t->attr.ah_attr, *lp)) {
    return nullptr;
  }
  return t;
}

// Host pointers for a scatter/gather list in `pd`, or false when a key, range or access check
// fails. Zero-length entries are not checked (no memory is touched).
bool FabricState::resolve_local_locked(const Pd* pd, const std::vector<ibv_sge>& sges,
                                       int need_access, std::vector<LocalSpan>& out) {
  out.clear();
  for (const ibv_sge& sge : sges) {
    if (sge.length == 0) continue;
    auto it = mrs.find(sge.lkey);
    if (it == mrs.end()) return false;
    const Mr& mr = *it->second;
    if (mr.pd != pd || (mr.access & need_access) != need_access ||
        !in_region(mr, sge.addr, sge.length)) {
      return false;
    }
    out.push_back(LocalSpan{mr.base + (sge.addr - mr.iova), sge.length});
  }
  return true;
}

char* FabricState::resolve_remote_locked(const Qp* target, std::uint32_t rkey,
                                         std::uint64_t addr, std::uint64_t len, int need) {
  auto it = mrs.find(rkey);
  if (it == mrs.end()) return nullptr;
  const Mr& mr = *it->second;
  if (mr.revoked || mr.pd != target->pd || (mr.access & need) == 0 ||
      (target->attr.qp_access_flags & need) == 0 || !in_region(mr, addr, len)) {
    return nullptr;
  }
  return mr.base + (addr - mr.iova);
}

void FabricState::fail_head_locked(Qp* qp, ibv_wc_status status) {
  SendWr wr = std::move(qp->sq.front());
  qp->sq.pop_front();
  Completion c{make_wc(qp, wr.wr_id, status, wc_opcode_for(wr.opcode)), true, wr.seq};
  push_completion_locked(qp->send_cq, c, qp, false);  // errors complete even when unsignalled
  error_qp_locked(qp);
}

void FabricState::complete_head_locked(Qp* qp, std::uint32_t byte_len) {
  SendWr wr = std::move(qp->sq.front());
  qp->sq.pop_front();
  if (!wr.signaled) return;  // its slot is retired by a later polled completion
  Completion c{make_wc(qp, wr.wr_id, IBV_WC_SUCCESS, wc_opcode_for(wr.opcode)), true, wr.seq};
  c.wc.byte_len = byte_len;
  push_completion_locked(qp->send_cq, c, qp, false);
}

void FabricState::deliver_recv_locked(Qp* t, const SendWr& wr, ibv_wc_opcode opcode) {
  RecvWr r = std::move(t->rq.front());
  t->rq.pop_front();
  Completion c{make_wc(t, r.wr_id, IBV_WC_SUCCESS, opcode), false, r.seq};
  c.wc.byte_len = static_cast<std::uint32_t>(wr.length);
  const bool with_imm =
      wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr.opcode == IBV_WR_SEND_WITH_IMM;
  if (with_imm) {
    c.wc.wc_flags = IBV_WC_WITH_IMM;
    c.wc.imm_data = wr.imm_data;  // network order, untouched, as on the wire
  }
  push_completion_locked(t->recv_cq, c, t, wr.solicited);
}

void FabricState::remote_access_error_locked(Qp* qp, Qp* t) {
  fail_head_locked(qp, IBV_WC_REM_ACCESS_ERR);
  // The responder detected the violation: its QP goes to ERR with an affiliated event.
  error_qp_locked(t);
  ibv_async_event ev{};
  ev.element.qp = &t->h.ibv;
  ev.event_type = IBV_EVENT_QP_ACCESS_ERR;
  post_async_locked(t->ctx, ev);
}

FabricState::Outcome FabricState::rnr_wait_locked(Qp* qp) {
  SendWr& wr = qp->sq.front();
  ++wr.rnr_attempts;
  if (qp->attr.rnr_retry != kInfiniteRnrRetry && wr.rnr_attempts > qp->attr.rnr_retry) {
    fail_head_locked(qp, IBV_WC_RNR_RETRY_EXC_ERR);
    return Outcome::finished;
  }
  return Outcome::waiting;
}

FabricState::Outcome FabricState::execute_head_locked(Qp* qp) {
  SendWr& wr = qp->sq.front();
  if (qp->fail_next.has_value()) {
    const ibv_wc_status status = *qp->fail_next;
    qp->fail_next.reset();
    fail_head_locked(qp, status);
    return Outcome::finished;
  }
  // Local checks: the gather list (or, for READ, the scatter list, which needs local write).
  const bool read = wr.opcode == IBV_WR_RDMA_READ;
  std::vector<LocalSpan> local;
  if (!wr.is_inline &&
      !resolve_local_locked(qp->pd, wr.sges, read ? IBV_ACCESS_LOCAL_WRITE : 0, local)) {
    fail_head_locked(qp, IBV_WC_LOC_PROT_ERR);
    return Outcome::finished;
  }
  if (wr.length > kMaxMsgSize) {
    fail_head_locked(qp, IBV_WC_LOC_LEN_ERR);
    return Outcome::finished;
  }
  Qp* t = peer_locked(qp);
  if (t == nullptr) {
    ++wr.retry_attempts;
    if (wr.retry_attempts > qp->attr.retry_cnt) {
      fail_head_locked(qp, IBV_WC_RETRY_EXC_ERR);
      return Outcome::finished;
    }
    return Outcome::waiting;
  }
  if (t->state() == IBV_QPS_RTR && !t->comm_established) {
    // First packet at a QP that is not yet RTS: communication established.
    t->comm_established = true;
    ibv_async_event ev{};
    ev.element.qp = &t->h.ibv;
    ev.event_type = IBV_EVENT_COMM_EST;
    post_async_locked(t->ctx, ev);
  }
  // The payload, gathered (inline data was captured at post time).
  std::vector<char> payload;
  if (!read) {
    if (wr.is_inline) {
      payload = wr.inline_data;
    } else {
      payload.reserve(wr.length);
      for (const LocalSpan& s : local) payload.insert(payload.end(), s.ptr, s.ptr + s.len);
    }
  }

  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: {
      char* dst = nullptr;
      const bool plain = wr.opcode == IBV_WR_RDMA_WRITE;
      std::uint32_t rkey = wr.rkey;
      if (plain && wr.length > 0 && corrupt_next_write) {
        corrupt_next_write = false;
        rkey = ~rkey;  // keys are small counters: the complement was never handed out
      }
      if (plain && wr.length > 0 && revoke_next_write) {
        revoke_next_write = false;
        if (auto m = mrs.find(rkey); m != mrs.end()) m->second->revoked = true;
      }
      // A zero-length RDMA WRITE carries no R_Key check (IB spec), which is why a 0-byte
      // WRITE_WITH_IMM may use any rkey.
      if (wr.length > 0) {
        dst = resolve_remote_locked(t, rkey, wr.remote_addr, wr.length,
                                    IBV_ACCESS_REMOTE_WRITE);
        if (dst == nullptr) {
          remote_access_error_locked(qp, t);
          return Outcome::finished;
        }
      }
      const bool with_imm = wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
      if (with_imm && t->rq.empty()) return rnr_wait_locked(qp);
      if (!payload.empty()) std::memcpy(dst, payload.data(), payload.size());
      if (plain) {
        ++traffic.writes;
        traffic.write_bytes += wr.length;
      } else {
        ++traffic.writes_with_imm;
        traffic.write_with_imm_bytes += wr.length;
      }
      if (with_imm) deliver_recv_locked(t, wr, IBV_WC_RECV_RDMA_WITH_IMM);
      complete_head_locked(qp, 0);
      return Outcome::finished;
    }
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: {
      if (t->rq.empty()) return rnr_wait_locked(qp);
      std::vector<LocalSpan> dst;
      const bool keys_ok =
          resolve_local_locked(t->pd, t->rq.front().sges, IBV_ACCESS_LOCAL_WRITE, dst);
      std::uint64_t capacity = 0;
      for (const ibv_sge& s : t->rq.front().sges) capacity += s.length;
      if (!keys_ok || capacity < wr.length) {
        // The receiver's WR fails (and its QP goes to ERR); the sender learns it by NAK.
        RecvWr r = std::move(t->rq.front());
        t->rq.pop_front();
        const ibv_wc_status rs = keys_ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
        Completion c{make_wc(t, r.wr_id, rs, IBV_WC_RECV), false, r.seq};
        push_completion_locked(t->recv_cq, c, t, false);
        error_qp_locked(t);
        fail_head_locked(qp, keys_ok ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR);
        return Outcome::finished;
      }
      std::size_t off = 0;
      for (const LocalSpan& s : dst) {
        const std::size_t n = std::min(s.len, payload.size() - off);
        if (n > 0) std::memcpy(s.ptr, payload.data() + off, n);
        off += n;
      }
      deliver_recv_locked(t, wr, IBV_WC_RECV);
      complete_head_locked(qp, 0);
      return Outcome::finished;
    }
    case IBV_WR_RDMA_READ: {
      const char* src = nullptr;
      if (wr.length > 0) {
        src = resolve_remote_locked(t, wr.rkey, wr.remote_addr, wr.length, IBV_ACCESS_REMOTE_READ);
        if (src == nullptr) {
          remote_access_error_locked(qp, t);
          return Outcome::finished;
        }
      }
      std::size_t off = 0;
      for (const LocalSpan& s : local) {
        std::memcpy(s.ptr, src + off, s.len);
        off += s.len;
      }
      complete_head_locked(qp, static_cast<std::uint32_t>(wr.length));
      return Outcome::finished;
    }
    default:
      fail_head_locked(qp, IBV_WC_LOC_QP_OP_ERR);  // unreachable: post_send rejects it
      return Outcome::finished;
  }
}

std::size_t FabricState::step_locked() {
  std::size_t finished = 0;
  for (auto& [num, owned] : qps) {
    Qp* qp = owned.get();
    if (qp->state() != IBV_QPS_RTS || qp->sq.empty()) continue;
    if (qp->delay_steps > 0) {
      --qp->delay_steps;
      continue;
    }
    // Each WR queued at the start of the step gets at most one attempt in it.
    for (std::size_t budget = qp->sq.size(); budget > 0; --budget) {
      if (qp->state() != IBV_QPS_RTS || qp->sq.empty()) break;
      if (execute_head_locked(qp) == Outcome::waiting) break;  // in order: later WRs wait too
      ++finished;
    }
  }
  return finished;
}

bool FabricState::has_pending_work_locked() const {
  return std::any_of(qps.begin(), qps.end(), [](const auto& kv) {
    return kv.second->state() == IBV_QPS_RTS && !kv.second->sq.empty();
  });
}

void FabricState::executor_loop() {
  std::unique_lock lk(mu);
  while (!stopping) {
    if (!has_pending_work_locked()) {
      executor_cv.wait(lk, [&] { return stopping || has_pending_work_locked(); });
      continue;
    }
    if (step_locked() == 0) {
      // Only waiting WRs (RNR, retries, delays): pace the retries, or wake on new work.
      executor_cv.wait_for(lk, options.retry_interval);
    } else {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    }
  }
}

int FabricState::post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::lock_guard lk(mu);
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    int err = 0;
    const bool is_inline = (w->send_flags & IBV_SEND_INLINE) != 0;
    std::uint64_t length = 0;
    if (w->num_sge > 0 && w->sg_list != nullptr) {
      for (int i = 0; i < w->num_sge; ++i) length += w->sg_list[i].length;
    }
    if (qp->state() != IBV_QPS_RTS && qp->state() != IBV_QPS_ERR) {
      err = EINVAL;  // sends need RTS
    } else if (!valid_send_opcode(w->opcode)) {
      err = EINVAL;  // atomics, memory windows, TSO... are not modelled
    } else if (w->num_sge < 0 || static_cast<std::uint32_t>(w->num_sge) > qp->cap.max_send_sge ||
               (w->num_sge > 0 && w->sg_list == nullptr)) {
      err = EINVAL;
    } else if (is_inline && (w->opcode == IBV_WR_RDMA_READ || length > qp->cap.max_inline_data)) {
      err = EINVAL;
    } else if (qp->send_posted - qp->send_retired >= qp->cap.max_send_wr) {
      err = ENOMEM;  // send queue full: completions must be polled (and some WR signalled)
    }
    if (err != 0) {
      if (bad_wr != nullptr) *bad_wr = w;
      return err;
    }
    SendWr s;
    s.wr_id = w->wr_id;
    s.opcode = w->opcode;
    s.signaled = qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) != 0;
    s.solicited = (w->send_flags & IBV_SEND_SOLICITED) != 0;
    s.imm_data = w->imm_data;
    s.remote_addr = w->wr.rdma.remote_addr;
    s.rkey = w->wr.rdma.rkey;
    s.is_inline = is_inline;
    s.length = length;
    if (is_inline) {
      for (int i = 0; i < w->num_sge; ++i) {
        const ibv_sge& g = w->sg_list[i];
        const char* p = reinterpret_cast<const char*>(static_cast<std::uintptr_t>(g.addr));
        s.inline_data.insert(s.inline_data.end(), p, p + g.length);
      }
    } else {
      s.sges.assign(w->sg_list, w->sg_list + w->num_sge);
    }
    s.seq = qp->send_posted++;
    if (qp->state() == IBV_QPS_ERR) {
      Completion c{make_wc(qp, s.wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode_for(s.opcode)), true, s.seq};
      push_completion_locked(qp->send_cq, c, qp, false);
    } else {
      qp->sq.push_back(std::move(s));
    }
  }
  executor_cv.notify_all();
  return 0;
}

int FabricState::post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  std::lock_guard lk(mu);
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    int err = 0;
    if (qp->state() == IBV_QPS_RESET) {
      err = EINVAL;
    } else if (w->num_sge < 0 || static_cast<std::uint32_t>(w->num_sge) > qp->cap.max_recv_sge ||
               (w->num_sge > 0 && w->sg_list == nullptr)) {
      err = EINVAL;
    } else if (qp->recv_posted - qp->recv_retired >= qp->cap.max_recv_wr) {
      err = ENOMEM;
    }
    if (err != 0) {
      if (bad_wr != nullptr) *bad_wr = w;
      return err;
    }
    RecvWr r;
    r.wr_id = w->wr_id;
    r.sges.assign(w->sg_list, w->sg_list + w->num_sge);
    r.seq = qp->recv_posted++;
    if (qp->state() == IBV_QPS_ERR) {
      Completion c{make_wc(qp, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV), false, r.seq};
      push_completion_locked(qp->recv_cq, c, qp, false);
    } else {
      qp->rq.push_back(std::move(r));
    }
  }
  executor_cv.notify_all();  // a receive may unblock a WR waiting on RNR
  return 0;
}

int FabricState::poll_cq(Cq* cq, int num_entries, ibv_wc* wc) {
  std::lock_guard lk(mu);
  if (num_entries < 0) {
    errno = EINVAL;
    return -1;
  }
  if (options.execution == Execution::on_poll && num_entries > 0) step_locked();
  int got = 0;
  while (got < num_entries && !cq->entries.empty()) {
    const Completion c = cq->entries.front();
    cq->entries.pop_front();
    wc[got++] = c.wc;
    // Polling a completion frees its WR's slot and those of all earlier WRs of that queue.
    if (Qp* qp = find_qp_locked(c.wc.qp_num); qp != nullptr) {
      if (c.send) {
        qp->send_retired = std::max(qp->send_retired, c.seq + 1);
      } else {
        qp->recv_retired = std::max(qp->recv_retired, c.seq + 1);
      }
    }
  }
  if (got == 0 && cq->overrun) {
    errno = EOVERFLOW;  // the CQ overran and lost completions: unusable, like real hardware
    return -1;
  }
  return got;
}

}  // namespace tictac::verbs::fake
