// Fake fabric: completions into CQs, completion channels and asynchronous events.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

void consume_fd(int fd) {
  std::uint64_t value = 0;
  (void)!::read(fd, &value, sizeof(value));  // EFD_SEMAPHORE: takes one event
}

bool is_nonblocking(int fd) { return (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

}  // namespace

EventElement element_of(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return EventElement::qp;
    case IBV_EVENT_CQ_ERR:
      return EventElement::cq;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
      return EventElement::port;
    default:
      return EventElement::device;
  }
}

void FabricState::push_completion_locked(Cq* cq, const Completion& c, Qp* qp, bool solicited) {
  if (cq->overrun) return;  // an overrun CQ loses everything after the overrun
  if (cq->entries.size() >= static_cast<std::size_t>(cq->capacity)) {
    // CQ overrun: a fatal consumer bug on real hardware (the CQ was sized below the sum of the
    // queue depths feeding it). The completion is lost, the CQ reports IBV_EVENT_CQ_ERR and the
    // QP that overran it goes to ERR.
    cq->overrun = true;
    ibv_async_event ev{};
    ev.element.cq = &cq->h.ibv;
    ev.event_type = IBV_EVENT_CQ_ERR;
    post_async_locked(cq->ctx, ev);
    if (qp != nullptr) error_qp_locked(qp);
    return;
  }
  cq->entries.push_back(c);
  const bool error = c.wc.status != IBV_WC_SUCCESS;
  if (cq->armed && cq->channel != nullptr && (!cq->solicited_only || solicited || error)) {
    cq->armed = false;
    cq->channel->events.push_back(cq);
    signal_fd(cq->channel->h.ibv.fd);
    events_cv.notify_all();
  }
}

void FabricState::post_async_locked(Context* ctx, const ibv_async_event& ev) {
  ctx->events.push_back(ev);
  signal_fd(ctx->h.ibv.async_fd);
  events_cv.notify_all();
}

void FabricState::drop_pending_events_locked(Context* ctx, const void* element) {
  const auto dropped = std::erase_if(ctx->events, [&](const ibv_async_event& ev) {
    switch (element_of(ev.event_type)) {
      case EventElement::qp:
        return static_cast<const void*>(ev.element.qp) == element;
      case EventElement::cq:
        return static_cast<const void*>(ev.element.cq) == element;
      default:
        return false;
    }
  });
  for (std::size_t i = 0; i < dropped; ++i) consume_fd(ctx->h.ibv.async_fd);
}

int FabricState::get_async_event(Context* ctx, ibv_async_event* ev) {
  std::unique_lock lk(mu);
  if (ctx->events.empty()) {
    if (is_nonblocking(ctx->h.ibv.async_fd)) {
      errno = EAGAIN;
      return -1;
    }
    ++ctx->async_waiters;
    events_cv.wait(lk, [&] { return !ctx->events.empty(); });
    --ctx->async_waiters;
  }
  *ev = ctx->events.front();
  ctx->events.pop_front();
  consume_fd(ctx->h.ibv.async_fd);
  switch (element_of(ev->event_type)) {
    case EventElement::qp:
      ++owner_of<Qp>(ev->element.qp)->async_events_unacked;
      break;
    case EventElement::cq:
      ++owner_of<Cq>(ev->element.cq)->async_events_unacked;
      break;
    default:
      break;
  }
  return 0;
}

void FabricState::ack_async_event(const ibv_async_event* ev) {
  std::lock_guard lk(mu);
  unsigned* unacked = nullptr;
  switch (element_of(ev->event_type)) {
    case EventElement::qp:
      unacked = &owner_of<Qp>(ev->element.qp)->async_events_unacked;
      break;
    case EventElement::cq:
      unacked = &owner_of<Cq>(ev->element.cq)->async_events_unacked;
      break;
    default:
      return;
  }
  if (*unacked > 0) --*unacked;
}

int FabricState::req_notify_cq(Cq* cq, int solicited_only) {
  std::lock_guard lk(mu);
  cq->armed = true;
  cq->solicited_only = solicited_only != 0;
  return 0;
}

int FabricState::get_cq_event(Channel* ch, ibv_cq** cq, void** cq_context) {
  std::unique_lock lk(mu);
  if (ch->events.empty()) {
    if (is_nonblocking(ch->h.ibv.fd)) {
      errno = EAGAIN;
      return -1;
    }
    ++ch->waiters;
    events_cv.wait(lk, [&] { return !ch->events.empty(); });
    --ch->waiters;
  }
  Cq* c = ch->events.front();
  ch->events.pop_front();
  consume_fd(ch->h.ibv.fd);
  ++c->comp_events_unacked;
  *cq = &c->h.ibv;
  *cq_context = c->h.ibv.cq_context;
  return 0;
}

void FabricState::ack_cq_events(Cq* cq, unsigned n) {
  std::lock_guard lk(mu);
  cq->comp_events_unacked -= std::min(n, cq->comp_events_unacked);
}

}  // namespace tictac::verbs::fake
