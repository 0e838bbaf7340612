// UcxListener: a ucp_listener on an IPv4 sockaddr whose connection requests become UcxEndpoints
// (internal to the UCX backend). Requests arrive inside UCX progress and are accepted right after
// it (ucp_ep_create with the request, peer error handling). Loop-thread only; owns the listener
// and rejects requests still pending when it is destroyed.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"
#include "transport/ucx/worker.h"

namespace tictac::transport::ucx {

class UcxListener {
 public:
  // Listens on `address` ("127.0.0.1:0" ...); on_accept gets each new endpoint.
  static Result<std::unique_ptr<UcxListener>> open(UcxWorker& worker, std::string_view address, AcceptFn on_accept);
  ~UcxListener();
  UcxListener(const UcxListener&) = delete;
  UcxListener& operator=(const UcxListener&) = delete;

  // "127.0.0.1:41234" with the bound port.
  const std::string& address() const { return address_; }

 private:
  UcxListener(UcxWorker& worker, AcceptFn on_accept) : worker_(worker), on_accept_(std::move(on_accept)) {}
  static void on_conn_request(ucp_conn_request_h request, void* arg);
  void accept_pending();

  UcxWorker& worker_;
  AcceptFn on_accept_;
  ucp_listener_h listener_ = nullptr;
  std::string address_;
  std::vector<ucp_conn_request_h> pending_;
  scaffold::LoopLifetime lifetime_;
};

}  // namespace tictac::transport::ucx
