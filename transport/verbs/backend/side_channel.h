// The TCP side channel of the verbs backend: addresses, sockets and a small buffered stream for
// the QP exchange (QpInfo each way, then the connector's ready byte). After the exchange the
// socket stays open, owned by the endpoint, so that a peer that closes its endpoint or dies is
// noticed at once (EOF), as rdma_cm's disconnect events do.
//
// Addresses: "<IPv4 literal or localhost>:<port>" (port 0 = any when listening).
// Errors: Status values naming the syscall and errno. Threading: loop-thread only. SideStream
// owns its fd (closed on destruction unless released).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tictac::verbs {

Result<sockaddr_in> parse_side_address(std::string_view address);
std::string format_address(const sockaddr_in& addr);
std::string local_address_of(int fd);
std::string peer_address_of(int fd);

// A non-blocking listening socket bound to `addr`.
Result<int> listen_side(const sockaddr_in& addr);
// A non-blocking socket with a connect to `addr` in progress (or done). On failure `*err` is
// the errno (ECONNREFUSED: nobody listens yet), else 0.
Result<int> connect_side(const sockaddr_in& addr, int* err);
// After a non-blocking connect became writable: ok, or the connect's error (errno in `*err`).
Status connect_result(int fd, int* err);

class SideStream {
 public:
  explicit SideStream(int fd) : fd_(fd) {}
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  int fd() const { return fd_; }
  // Gives up ownership of the fd (to the endpoint).
  int release();

  // Queues bytes and writes what the socket takes now.
  Status write(std::span<const std::byte> bytes);
  Status flush();
  bool writing() const { return !out_.empty(); }
  // Reads what is available; true once at least `n` bytes are buffered. EOF is an error.
  Result<bool> fill(std::size_t n);
  // Reads what is available now, at most `max` bytes; returns how many (0: nothing yet). EOF is
  // an error (connection_lost).
  Result<std::size_t> read_available(std::size_t max);
  // The bytes read and not yet taken.
  std::span<const std::byte> buffered() const { return in_; }
  // Removes and returns the first n buffered bytes (fill(n) returned true).
  std::vector<std::byte> take(std::size_t n);

 private:
  int fd_;
  std::vector<std::byte> in_;
  std::vector<std::byte> out_;
};

}  // namespace tictac::verbs
