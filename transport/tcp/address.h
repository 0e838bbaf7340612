// IPv4 "host:port" parsing and formatting for the TCP backend (internal). Pure; thread-safe.
#pragma once

#include <netinet/in.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace tictac::transport::tcp {

// "127.0.0.1:5000", "localhost:0", "0.0.0.0:7000". invalid_argument with the accepted form.
Result<sockaddr_in> parse_address(std::string_view text);
std::string format_address(const sockaddr_in& addr);
// The local or remote address of a socket, "?" when unknown.
std::string local_address(int fd);
std::string remote_address(int fd);

}  // namespace tictac::transport::tcp
