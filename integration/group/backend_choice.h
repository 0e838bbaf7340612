// Backend choice for a group: TICTAC_BACKENDS (a comma-separated preference list, default
// "tcp") names the transport backends a rank may use. Each rank listens on every viable one and
// publishes one address per backend through the store ("ucx://10.0.0.1:4100,tcp://10.0.0.1:4101",
// in its preference order); a connecting rank picks the first backend of ITS list that the peer
// published, and the accepting rank computes the same pick from the two published lists.
//
// Errors (invalid_argument / unavailable, naming TICTAC_BACKENDS and the fix): an unknown name,
// an empty list, a backend this build lacks or that is not viable here when no listed backend is
// left; ranks whose lists share no backend (RankMesh reports that). A listed backend that is not
// viable while another one is: skipped, and the reason is logged and kept in `skipped`.
// Pure functions apart from plan_backends() (creates backends, reads the environment).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transport/backend.h"

namespace tictac::group {

inline constexpr const char* kDefaultBackends = "tcp";

struct BackendPlan {
  std::string requested;                                      // the list as given
  std::vector<std::string> names;                             // viable, in preference order
  std::vector<std::unique_ptr<transport::Backend>> backends;  // the same order as `names`
  std::vector<std::string> skipped;                           // "ucx: <why not viable>"
};

// "ucx, tcp" -> {"ucx", "tcp"}; `source` names where the text came from (for errors).
Result<std::vector<std::string>> parse_backend_list(std::string_view text, std::string_view source);
// Creates the viable backends of `list` ("" = TICTAC_BACKENDS, whose default is "tcp").
Result<BackendPlan> plan_backends(const std::string& list);

// The address list published through the store, and its parts.
std::string join_addresses(const std::vector<std::string>& addresses);
std::vector<std::string> split_addresses(std::string_view text);
// "ucx" for "ucx://127.0.0.1:5000"; "" when there is no scheme.
std::string scheme_of(std::string_view address);
// The address (of `offered`) of the first backend in `preference` that `offered` contains, or "".
std::string pick_address(const std::vector<std::string>& preference,
                         const std::vector<std::string>& offered);
// "tcp://10.0.0.1:0" -> "ucx://10.0.0.1:0" (the same host, this backend's scheme, port kept).
std::string with_scheme(std::string_view address, std::string_view scheme);

}  // namespace tictac::group
