// IPv4 "host:port" parsing and formatting for the UCX backend's sockaddr connections (internal).
// Pure; thread-safe.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace tictac::transport::ucx {

// "127.0.0.1:5000", "localhost:0". invalid_argument naming the accepted form otherwise.
Result<sockaddr_in> parse_address(std::string_view text);
// "127.0.0.1:5000"; "?" for a family other than IPv4.
std::string format_address(const sockaddr_storage& addr);

}  // namespace tictac::transport::ucx
