#include "transport/ucx/address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace tictac::transport::ucx {

Result<sockaddr_in> parse_address(std::string_view text) {
  const auto bad = [&](const char* why) {
    return invalid_argument("bad UCX address '" + std::string(text) + "' (" + why +
                            "): write ucx://<IPv4 address>:<port>, e.g. ucx://127.0.0.1:5000");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return bad("the host is not an IPv4 address");
  return addr;
}

std::string format_address(const sockaddr_storage& addr) {
  if (addr.ss_family != AF_INET) return "?";
  sockaddr_in in;
  std::memcpy(&in, &addr, sizeof in);
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
}

}  // namespace tictac::transport::ucx
