// TcpListener: a listening socket whose accepted connections become TcpEndpoints (internal).
// Loop-thread only. Owns the socket.
//
// Each accepted socket is classified by its first bytes before anything is handed on (the
// connecting side always speaks first): a LANE HELLO (transport/tcp/lanes.h) goes to the
// LaneRegistry, which gives it to its endpoint or closes it; anything else, or nothing within
// kClassifyTimeout, is a new connection for on_accept.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "transport/backend.h"
#include "transport/tcp/lanes.h"

namespace tictac::transport::tcp {

class TcpListener {
 public:
  static constexpr auto kClassifyTimeout = std::chrono::seconds(1);

  // Binds and listens on `address` ("127.0.0.1:0" ...); on_accept gets each new endpoint.
  // `lanes`: accepted endpoints wait for a lane in `registry` (which must outlive nothing: it is
  // shared with them).
  static Result<std::unique_ptr<TcpListener>> open(ProgressEngine& engine, std::string_view address,
                                                   AcceptFn on_accept, bool lanes,
                                                   std::shared_ptr<LaneRegistry> registry);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // "127.0.0.1:41234" with the bound port.
  const std::string& address() const { return address_; }

 private:
  TcpListener(ProgressEngine& engine, int fd, std::string address, AcceptFn on_accept, bool lanes,
              std::shared_ptr<LaneRegistry> registry);
  void on_readable();
  void classify(int fd);
  // Stops waiting for `fd`'s first bytes; it stays open.
  void forget(int fd);
  void hand_over(int fd);

  ProgressEngine& engine_;
  int fd_;
  std::string address_;
  AcceptFn on_accept_;
  bool lanes_;
  std::shared_ptr<LaneRegistry> registry_;
  std::unordered_map<int, ProgressEngine::TimerId> unclassified_;  // fd -> its timeout
};

}  // namespace tictac::transport::tcp
