// The UCX backend's front door (Debian's libucx 1.13: TCP and shared-memory transports here,
// InfiniBand/RoCE where UCX finds them). Frames travel as UCP active messages; payloads land
// straight in the destination (rendezvous) or are copied once from UCX's buffer (eager); one UCP
// worker per Context, progressed from the Context's loop through the worker's event fd.
// Addresses: "ucx://<IPv4 address>:<port>" (UCX sockaddr connection establishment; port 0 = any
// free port when listening). UCX_TLS and the other UCX_* variables select and tune transports;
// The progress loop's spin (TICTAC_SPIN_US) polls the worker (see docs/ucx.md).
// Viability: "not viable" with UCX's reason when ucp_init fails. Memory: host only; CUDA memory is
// refused unless the loaded UCX supports it (Debian's does not).
// The returned backend is used by exactly one Context (see backend.h for threading).
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tictac::transport::ucx {

std::unique_ptr<Backend> create();

}  // namespace tictac::transport::ucx
