#include "transport/ucx/listener.h"

#include "common/log.h"
#include "transport/ucx/address.h"
#include "transport/ucx/endpoint.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {

Result<std::unique_ptr<UcxListener>> UcxListener::open(UcxWorker& worker, std::string_view address,
                                                       AcceptFn on_accept) {
  Result<sockaddr_in> addr = parse_address(address);
  TICTAC_RETURN_IF_ERROR(addr);
  std::unique_ptr<UcxListener> l(new UcxListener(worker, std::move(on_accept)));
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
  params.sockaddr.addrlen = sizeof(sockaddr_in);
  params.conn_handler.cb = &UcxListener::on_conn_request;
  params.conn_handler.arg = l.get();
  ucs_status_t st = ucp_listener_create(worker.handle(), &params, &l->listener_);
  if (st != UCS_OK) {
    return from_ucs(StatusCode::unavailable, "UCX cannot listen on " + std::string(address), st);
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  st = ucp_listener_query(l->listener_, &attr);
  if (st != UCS_OK) return from_ucs(StatusCode::unavailable, "cannot query the UCX listener's address", st);
  l->address_ = format_address(attr.sockaddr);
  worker.kick();
  return l;
}

UcxListener::~UcxListener() {
  if (listener_ == nullptr) return;
  for (ucp_conn_request_h r : pending_) ucp_listener_reject(listener_, r);
  ucp_listener_destroy(listener_);
}

void UcxListener::on_conn_request(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<UcxListener*>(arg);
  self->pending_.push_back(request);
  self->worker_.later(self->lifetime_.guard([self] { self->accept_pending(); }));
}

void UcxListener::accept_pending() {
  std::vector<ucp_conn_request_h> requests;
  requests.swap(pending_);
  const auto self = lifetime_.token();
  for (ucp_conn_request_h r : requests) {
    std::string client = "?";
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(r, &attr) == UCS_OK) client = format_address(attr.client_address);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = r;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxWorker::on_ep_error;
    params.err_handler.arg = &worker_;
    ucp_ep_h ep = nullptr;
    const ucs_status_t st = ucp_ep_create(worker_.handle(), &params, &ep);
    if (st != UCS_OK) {
      TICTAC_LOG(warn) << "UCX: dropping a connection from " << client << " on " << address_
                       << ": ucp_ep_create failed: " << ucs_status_string(st);
      continue;
    }
    on_accept_(std::make_unique<UcxEndpoint>(worker_, ep, address_, client));
    if (!self.alive()) return;
  }
  worker_.kick();
}

}  // namespace tictac::transport::ucx
