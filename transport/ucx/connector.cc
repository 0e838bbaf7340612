#include "transport/ucx/connector.h"

#include "transport/ucx/address.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {

UcxConnector::UcxConnector(UcxWorker& worker, std::string address, Clock::time_point deadline, ConnectFn on_done,
                           std::function<void()> finished)
    : worker_(worker), address_(std::move(address)), deadline_(deadline), on_done_(std::move(on_done)),
      finished_(std::move(finished)) {}

UcxConnector::~UcxConnector() {
  *alive_ = false;
  abandon();
}

void UcxConnector::start() {
  Result<sockaddr_in> addr = parse_address(address_);
  if (!addr.ok()) {
    const Status st = addr.status();
    retry_timer_ = worker_.engine().add_timer(Clock::now(), [this, st] { report(st); });
    return;
  }
  addr_ = *addr;
  deadline_timer_ = worker_.engine().add_timer(deadline_, [this] {
    deadline_timer_ = 0;
    report(Status(StatusCode::timeout, "connecting to ucx://" + address_ +
                                           " did not complete within the timeout (is the peer listening?)"));
  });
  retry_timer_ = worker_.engine().add_timer(Clock::now(), [this] { attempt(); });
}

void UcxConnector::abandon() {
  done_ = true;
  worker_.engine().cancel_timer(retry_timer_);
  worker_.engine().cancel_timer(deadline_timer_);
  retry_timer_ = deadline_timer_ = 0;
  ep_.reset();  // closes the endpoint (forced: it never carried a frame)
}

void UcxConnector::attempt() {
  retry_timer_ = 0;
  if (done_) return;
  const std::uint64_t attempt = ++attempt_;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr_);
  params.sockaddr.addrlen = sizeof addr_;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxWorker::on_ep_error;
  params.err_handler.arg = &worker_;
  ucp_ep_h ep = nullptr;
  const ucs_status_t st = ucp_ep_create(worker_.handle(), &params, &ep);
  if (st != UCS_OK) {
    retry_or_fail(from_ucs(StatusCode::unavailable, "UCX cannot connect to " + address_, st));
    return;
  }
  ep_ = std::make_unique<UcxEndpoint>(worker_, ep, std::string(), address_);
  ep_->set_failure_hook([this, attempt](const Status& why) {
    if (attempt == attempt_) retry_or_fail(why);
  });
  auto* op = new FlushOp{alive_, this, attempt};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &UcxConnector::on_flushed;
  p.user_data = op;
  const ucs_status_ptr_t r = ucp_ep_flush_nbx(ep, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    delete op;
    flushed(attempt, r == nullptr ? UCS_OK : UCS_PTR_STATUS(r));
    return;
  }
  worker_.kick();
}

void UcxConnector::on_flushed(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<FlushOp*>(user_data);
  if (!op->alive.expired()) {
    UcxConnector* self = op->self;
    const std::uint64_t attempt = op->attempt;
    std::weak_ptr<bool> alive = op->alive;
    // Not from inside UCX progress: the retry path closes the endpoint.
    self->worker_.later([self, attempt, status, alive] {
      if (!alive.expired()) self->flushed(attempt, status);
    });
  }
  delete op;
  ucp_request_free(request);
}

void UcxConnector::flushed(std::uint64_t attempt, ucs_status_t status) {
  if (done_ || attempt != attempt_ || !ep_) return;
  if (status != UCS_OK) {
    retry_or_fail(from_ucs(StatusCode::unavailable, "UCX cannot connect to " + address_, status));
    return;
  }
  report(std::unique_ptr<Endpoint>(std::move(ep_)));
}

void UcxConnector::retry_or_fail(const Status& why) {
  if (done_) return;
  ep_.reset();
  ++attempt_;  // late events of the failed attempt are ignored
  worker_.engine().cancel_timer(retry_timer_);
  retry_timer_ = 0;
  const auto next = Clock::now() + backoff_;
  if (next >= deadline_) {
    report(Status(StatusCode::timeout,
                  why.message() + " (gave up at the connect deadline; is the peer listening?)", why.origin()));
    return;
  }
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(200));
  retry_timer_ = worker_.engine().add_timer(next, [this] { attempt(); });
}

void UcxConnector::report(Result<std::unique_ptr<Endpoint>> result) {
  if (done_) return;
  ConnectFn fn = std::move(on_done_);
  abandon();
  fn(std::move(result));
  finished_();
}

}  // namespace tictac::transport::ucx
