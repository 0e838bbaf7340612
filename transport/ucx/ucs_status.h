// Translation of UCX status codes into tictac Status values (internal to the UCX backend).
// Pure functions; thread-safe.
#pragma once

#include <ucs/type/status.h>

#include <string_view>

#include "common/status.h"

namespace tictac::transport::ucx {

// Whether `status` means the peer or the path to it is gone (unreachable, reset, timed out,
// rejected, closed): such errors become connection_lost.
bool is_peer_failure(ucs_status_t status);

// "<what>: <ucs_status_string>" with origin "ucx <ucs_status_t value>"; `code` is used unless the
// status is a peer failure (then connection_lost).
Status from_ucs(StatusCode code, std::string_view what, ucs_status_t status);

}  // namespace tictac::transport::ucx
