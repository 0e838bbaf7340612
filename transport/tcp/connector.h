// TcpConnector: one outgoing connection attempt (internal): non-blocking connect, retried with
// back-off (5 ms doubling up to 200 ms) while the peer refuses (it may not listen yet), bounded by
// a deadline. Reports exactly once through its ConnectFn, always from a loop event, never from
// inside start(). The policy (back-off, deadline, report once, abandon) is the backend
// scaffold's ConnectRetry (transport/scaffold/retry.h). Loop-thread only.
#pragma once

#include <netinet/in.h>

#include <functional>
#include <string>

#include "transport/backend.h"
#include "transport/scaffold/retry.h"

namespace tictac::transport::tcp {

class TcpConnector {
 public:
  // `finished` is called (after on_done) so the owner can drop this object later.
  TcpConnector(ProgressEngine& engine, std::string address, Clock::time_point deadline,
               ConnectFn on_done, std::function<void()> finished, bool lanes);
  ~TcpConnector();
  TcpConnector(const TcpConnector&) = delete;
  TcpConnector& operator=(const TcpConnector&) = delete;

  void start();
  // Abandons the attempt without reporting.
  void abandon();

 private:
  void attempt();
  void on_writable();
  void retry_or_fail(const Status& why);
  void close_socket();

  ProgressEngine& engine_;
  const std::string address_;
  sockaddr_in addr_{};
  int fd_ = -1;
  scaffold::ConnectRetry retry_;
  bool lanes_;  // the endpoint opens a second lane (transport/tcp/lanes.h)
};

}  // namespace tictac::transport::tcp
