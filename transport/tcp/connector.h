// TcpConnector: one outgoing connection attempt (internal): non-blocking connect, retried with
// back-off while the peer refuses (it may not listen yet), bounded by a deadline. Reports exactly
// once through its ConnectFn, always from a loop event, never from inside start().
// Loop-thread only.
#pragma once

#include <functional>
#include <netinet/in.h>
#include <string>

#include "transport/backend.h"

namespace tictac::transport::tcp {

class TcpConnector {
 public:
  // `finished` is called (after on_done) so the owner can drop this object later.
  TcpConnector(ProgressEngine& engine, std::string address, Clock::time_point deadline, ConnectFn on_done,
               std::function<void()> finished);
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
  void report(Result<std::unique_ptr<Endpoint>> result);
  void close_socket();

  ProgressEngine& engine_;
  const std::string address_;
  const Clock::time_point deadline_;
  ConnectFn on_done_;
  std::function<void()> finished_;
  sockaddr_in addr_{};
  int fd_ = -1;
  bool done_ = false;
  ProgressEngine::TimerId timer_ = 0;
  std::chrono::milliseconds backoff_{5};
};

}  // namespace tictac::transport::tcp
