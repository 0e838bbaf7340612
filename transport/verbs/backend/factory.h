// The verbs backend's front door (nothing else in transport/verbs/backend/ is included from
// outside, except by its tests).
//
// RDMA over RC queue pairs (InfiniBand or RoCE), libibverbs loaded at run time. Addresses are
// "verbs://<IPv4>:<port>": the TCP side channel on which peers exchange QP numbers, port
// addresses and receive rings before the RDMA connection exists, and whose closing tells a peer
// that we left. Frames are RDMA-written into the peer's registered receive ring (see
// endpoint.h); docs/backends.md has the design, its memory cost and what was checked where.
//
// create() loads libibverbs and reads TICTAC_VERBS_* (config.h); when either fails, the backend
// still exists and viability() says why ("verbs not viable: ..."), so a build with verbs runs
// everywhere. create(api, config) runs the same code on any IbvApi, e.g. the fake fabric's
// (its thread execution mode: the backend is driven by completion events, never by polling).
// Each backend belongs to one Context (see transport/backend.h for threading).
#pragma once

#include <memory>

#include "common/status.h"
#include "transport/backend.h"
#include "transport/verbs/backend/config.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

std::unique_ptr<transport::Backend> create();
std::unique_ptr<transport::Backend> create(const IbvApi& api, const VerbsConfig& config);

}  // namespace tictac::verbs
