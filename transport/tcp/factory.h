// The TCP backend's front door: the reference backend, always built.
// Epoll on the Context's loop, non-blocking sockets, one connection per peer, header + payload
// written with one sendmsg (iovec), payloads received straight into the destination buffer.
// Addresses: "tcp://<ipv4 or localhost>:<port>" (port 0 = any free port when listening).
// The returned backend is used by exactly one Context (see backend.h for threading).
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tictac::transport::tcp {

std::unique_ptr<Backend> create();

}  // namespace tictac::transport::tcp
