// Socket set-up shared by the TCP backend's objects (internal). Pure helpers; thread-safe.
#pragma once

#include "common/status.h"

namespace tictac::transport::tcp {

// Non-blocking, close-on-exec IPv4 stream socket.
Result<int> new_socket();
// TCP_NODELAY (frames are already batched by the core) and keepalive; errors are returned.
Status tune_connected(int fd);

}  // namespace tictac::transport::tcp
