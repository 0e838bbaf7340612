// UcxConnector: one outgoing UCX connection attempt (internal to the UCX backend): a client-server
// ucp_ep to the listener's sockaddr, with peer error handling. The endpoint counts as connected
// when a flush of it completes (UCX has then finished wire-up with the server); a refused or
// failed attempt is retried with back-off (the peer may not listen yet) until the deadline.
// Reports exactly once through its ConnectFn, always from a loop event, never from inside start().
// Loop-thread only.
#pragma once

#include <netinet/in.h>

#include <functional>
#include <memory>
#include <string>

#include "transport/backend.h"
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
    std::weak_ptr<bool> alive;
    UcxConnector* self;
    std::uint64_t attempt;
  };
  static void on_flushed(void* request, ucs_status_t status, void* user_data);
  void attempt();
  void flushed(std::uint64_t attempt, ucs_status_t status);
  void retry_or_fail(const Status& why);
  void report(Result<std::unique_ptr<Endpoint>> result);

  UcxWorker& worker_;
  const std::string address_;
  const Clock::time_point deadline_;
  ConnectFn on_done_;
  std::function<void()> finished_;
  sockaddr_in addr_{};
  std::unique_ptr<UcxEndpoint> ep_;
  std::uint64_t attempt_ = 0;
  bool done_ = false;
  ProgressEngine::TimerId retry_timer_ = 0;
  ProgressEngine::TimerId deadline_timer_ = 0;
  std::chrono::milliseconds backoff_{5};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tictac::transport::ucx
