// Which address a rank listens on, so that the other ranks can reach it.
//   1. TICTAC_LISTEN_ADDR: "host", "host:port" or "tcp://host[:port]" (port 0 = any);
//   2. else the local IPv4 address that routes to MASTER_ADDR (torchrun's rendezvous host),
//      found with a connected UDP socket (no packet is sent);
//   3. else 127.0.0.1 (single-host runs).
// Returns "tcp://<ip>:<port>". Errors: invalid_argument naming the variable for a malformed
// TICTAC_LISTEN_ADDR or an unresolvable MASTER_ADDR. Thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace tictac::group {

Result<std::string> choose_listen_address();

// The local IPv4 address the kernel would use to reach `host` (a name or dotted quad).
Result<std::string> local_address_towards(const std::string& host);

}  // namespace tictac::group
