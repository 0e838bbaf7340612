#include "transport/ucx/connector.h"

#include "transport/ucx/address.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {
UcxConnector::UcxConnector(UcxWorker& worker, std::string address, Clock::time_point deadline,
                           ConnectFn on_done, std::function<void()> finished)
    : worker_(worker),
      address_(std::move(address)),
      // release: closes the endpoint (forced: it never carried a frame)
      retry_(worker.engine(), deadline, scaffold::Backoff::for_sockets(), std::move(on_done),
             std::move(finished), [this] { ep_.reset(); }) {}

namespace {
// UCX cannot wire up endpoints whose lanes differ: a listening peer with other transports or
// another rendezvous scheme fails every attempt the same way ("Endpoint is not connected").
constexpr const char* kListeningHint =
    "is the peer listening? If it is, both sides must enable the same UCX transports and "
    "rendezvous scheme: compare UCX_TLS, TICTAC_UCX_RNDV_SCHEME and UCX_RNDV_SCHEME";
}  // namespace

UcxConnector::~UcxConnector() { abandon(); }

void UcxConnector::start() {
  auto starting = retry_.starting();  // a report made in here comes from a loop event
  Result<sockaddr_in> addr = parse_address(address_);
  if (!addr.ok()) {
    retry_.report_soon(addr.status());
    return;
  }
  addr_ = *addr;
  retry_.watch_deadline(Status(StatusCode::timeout, "connecting to ucx://" + address_ +
                                                        " did not complete within the timeout (" +
                                                        kListeningHint + ")"));
  retry_.schedule(Clock::now(), [this] { attempt(); });
}

void UcxConnector::abandon() { retry_.abandon(); }

void UcxConnector::attempt() {
  if (retry_.done()) return;
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
  auto* op = new FlushOp{lifetime_.token(), this, attempt};
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
  if (op->owner.alive()) {
    UcxConnector* self = op->self;
    const std::uint64_t attempt = op->attempt;
    // Not from inside UCX progress: the retry path closes the endpoint.
    self->worker_.later(
        self->lifetime_.guard([self, attempt, status] { self->flushed(attempt, status); }));
  }
  delete op;
  ucp_request_free(request);
}

void UcxConnector::flushed(std::uint64_t attempt, ucs_status_t status) {
  if (retry_.done() || attempt != attempt_ || !ep_) return;
  if (status != UCS_OK) {
    retry_or_fail(from_ucs(StatusCode::unavailable, "UCX cannot connect to " + address_, status));
    return;
  }
  retry_.report(std::unique_ptr<Endpoint>(std::move(ep_)));
}

void UcxConnector::retry_or_fail(const Status& why) {
  if (retry_.done()) return;
  ep_.reset();
  ++attempt_;  // late events of the failed attempt are ignored
  retry_.retry([this] { attempt(); },
               Status(StatusCode::timeout,
                      why.message() + " (gave up at the connect deadline; " + kListeningHint + ")",
                      why.origin()));
}

}  // namespace tictac::transport::ucx
