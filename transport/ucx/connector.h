// UcxConnector: one outgoing UCX connection attempt (internal to the UCX backend): a client-server
// ucp_ep to the listener's sockaddr, with peer error handling. The endpoint counts as connected
// when a flush of it completes (UCX has then finished wire-up with the server); a refused or
// failed attempt is retried with back-off (the peer may not listen yet) until the deadline.
// Reports exactly once through its ConnectFn, always from a loop event, never from inside start().
// The policy (back-off 5 ms doubling up to 200 ms, deadline, report once, abandon) is the backend
// scaffold's ConnectRetry (transport/scaffold/retry.h). Loop-thread only.
#pragma once

#include <netinet/in.h>

#include <functional>
#include <memory>
#include <string>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"
#include "transport/scaffold/retry.h"
#include "transport/ucx/endpoint.h"
#include "transport/ucx/worker.h"

namespace tictac::transport::ucx {

class UcxConnector {
 public:
  // `finished` is called (after on_done) so the owner can drop this object later.
  UcxConnector(UcxWorker& worker, std::string address, Clock::time_point deadline, ConnectFn on_done,
               std::function<void()> finished);
  ~UcxConnector();
  UcxConnector(const UcxConnector&) = delete;
  UcxConnector& operator=(const UcxConnector&) = delete;

  void start();
  // Abandons the attempt without reporting.
  void abandon();

 private:
  struct FlushOp {
    scaffold::LoopLifetime::Token owner;
    UcxConnector* self;
    std::uint64_t attempt;
  };
  static void on_flushed(void* request, ucs_status_t status, void* user_data);
  void attempt();
  void flushed(std::uint64_t attempt, ucs_status_t status);
  void retry_or_fail(const Status& why);

  UcxWorker& worker_;
  const std::string address_;
  sockaddr_in addr_{};
  std::unique_ptr<UcxEndpoint> ep_;
  std::uint64_t attempt_ = 0;
  scaffold::ConnectRetry retry_;
  scaffold::LoopLifetime lifetime_;
};

}  // namespace tictac::transport::ucx
