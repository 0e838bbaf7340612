#include "integration/group/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/tunables.h"

namespace tictac::group {
namespace {

const StringTunable kListenAddr{"TICTAC_LISTEN_ADDR", "",
                                "address this rank listens on (host, host:port or tcp://host:port); "
                                "empty = the interface that routes to MASTER_ADDR, else 127.0.0.1"};

}  // namespace

Result<std::string> local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found);
  if (rc != 0 || found == nullptr) {
    return invalid_argument("MASTER_ADDR '" + host + "' does not resolve to an IPv4 address (" +
                            ::gai_strerror(rc) + "); set MASTER_ADDR or TICTAC_LISTEN_ADDR");
  }
  sockaddr_in target{};
  std::memcpy(&target, found->ai_addr, sizeof(target));
  ::freeaddrinfo(found);
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status(StatusCode::unavailable, "local address lookup", "socket", errno);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(StatusCode::unavailable, "no route to MASTER_ADDR '" + host + "'",
                        "connect", err);
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const int got = ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  const int err = errno;
  ::close(fd);
  if (got != 0) return errno_status(StatusCode::unavailable, "local address lookup", "getsockname", err);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

Result<std::string> choose_listen_address() {
  Result<std::string> configured = kListenAddr.get();
  if (!configured.ok()) return configured.status();
  std::string addr = *configured;
  if (!addr.empty()) {
    if (addr.rfind("tcp://", 0) == 0) addr = addr.substr(6);
    if (addr.empty() || addr.find('/') != std::string::npos) {
      return invalid_argument("TICTAC_LISTEN_ADDR='" + *configured +
                              "' is not an address; use host, host:port or tcp://host:port");
    }
    if (addr.find(':') == std::string::npos) addr += ":0";
    return "tcp://" + addr;
  }
  const std::string master = env_or_empty("MASTER_ADDR");
  if (!master.empty() && master != "localhost" && master.rfind("127.", 0) != 0) {
    Result<std::string> local = local_address_towards(master);
    if (!local.ok()) return local.status();
    return "tcp://" + *local + ":0";
  }
  return std::string("tcp://127.0.0.1:0");
}

}  // namespace tictac::group
