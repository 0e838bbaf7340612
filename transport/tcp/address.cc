#include "transport/tcp/address.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>

namespace tictac::transport::tcp {

Result<sockaddr_in> parse_address(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("bad TCP address '" + std::string(text) + "': " + why +
                            " (expected <ipv4>:<port> or localhost:<port>, e.g. 127.0.0.1:5000)");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return bad("port '" + std::string(port_text) + "' is not a number in 0..65535");
  }
  if (host == "localhost" || host.empty()) host = "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return bad("host '" + host + "' is not an IPv4 address");
  return addr;
}

std::string format_address(const sockaddr_in& addr) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(addr.sin_port));
}

std::string local_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return format_address(a);
}

std::string remote_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return format_address(a);
}

}  // namespace tictac::transport::tcp
