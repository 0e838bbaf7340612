// TcpListener: a listening socket whose accepted connections become TcpEndpoints (internal).
// Loop-thread only. Owns the socket.
#pragma once

#include <memory>
#include <string>

#include "transport/backend.h"

namespace tictac::transport::tcp {

class TcpListener {
 public:
  // Binds and listens on `address` ("127.0.0.1:0" ...); on_accept gets each new endpoint.
  static Result<std::unique_ptr<TcpListener>> open(ProgressEngine& engine, std::string_view address,
                                                   AcceptFn on_accept);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // "127.0.0.1:41234" with the bound port.
  const std::string& address() const { return address_; }

 private:
  TcpListener(ProgressEngine& engine, int fd, std::string address, AcceptFn on_accept);
  void on_readable();

  ProgressEngine& engine_;
  int fd_;
  std::string address_;
  AcceptFn on_accept_;
};

}  // namespace tictac::transport::tcp
