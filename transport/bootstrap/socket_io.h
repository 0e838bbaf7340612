// Blocking-with-deadline socket helpers for the TCP store (internal to transport/bootstrap).
//
// Each call either finishes before `deadline` or returns: timeout (deadline passed),
// connection_lost (peer closed or reset, naming `peer`), unavailable (socket/address errors).
// Sends use MSG_NOSIGNAL, so a dead peer never raises SIGPIPE. Thread-compatible: callers
// serialise use of one descriptor.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace tictac::bootstrap::io {

using Deadline = std::chrono::steady_clock::time_point;

// Resolves a numeric or named host (IPv4 or IPv6) and binds a listening TCP socket
// (SO_REUSEADDR, close-on-exec, non-blocking). port 0 picks a free port.
Result<int> listen_on(const std::string& host, std::uint16_t port, int backlog);
Result<std::uint16_t> local_port(int fd);

// Connects, retrying refused/unreachable attempts with backoff until `deadline`. The returned
// descriptor is blocking, close-on-exec, with TCP_NODELAY.
Result<int> connect_until(const std::string& host, std::uint16_t port, Deadline deadline);

Status send_all(int fd, std::span<const std::uint8_t> data, Deadline deadline, const std::string& peer);
Status recv_exact(int fd, std::span<std::uint8_t> data, Deadline deadline, const std::string& peer);

}  // namespace tictac::bootstrap::io
