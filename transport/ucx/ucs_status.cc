#include "transport/ucx/ucs_status.h"

#include <string>

namespace tictac::transport::ucx {

bool is_peer_failure(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
      return true;
    default:
      return false;
  }
}

Status from_ucs(StatusCode code, std::string_view what, ucs_status_t status) {
  const StatusCode effective = is_peer_failure(status) ? StatusCode::connection_lost : code;
  return Status(effective, std::string(what) + ": " + ucs_status_string(status),
                "ucx status " + std::to_string(static_cast<int>(status)));
}

}  // namespace tictac::transport::ucx
