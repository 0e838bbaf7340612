// The perftest's two roles over any backend: the server listens, publishes its address and serves
// the client's sessions; the client runs the test's sessions (one Context each: the priority test
// needs one with priority enforcement and one plain FIFO) and returns the figures. Used by
// `tictac perftest` in every mode: --server/--client directly, --local with both roles in one
// command (two processes for tcp, two threads for loopback).
//
// Thread safety: the two functions may run concurrently on different threads (each makes its own
// Context). Errors: the transport's Status (connection_lost naming the peer, timeout, ...) or
// protocol_error for a peer that does not speak the perftest protocol; every wait is bounded by
// the configured timeout, so a dead peer never hangs either side.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cli/perftest_options.h"
#include "cli/perftest_report.h"
#include "common/status.h"
#include "transport/backend.h"

namespace tictac::cli::perftest {

using BackendMaker = std::function<std::unique_ptr<transport::Backend>()>;

// Listens on o.listen, calls publish(bound address), then serves sessions until the client's last
// one (or the first failure). Waits at most o.config.timeout for each client connection.
Status run_server(const PerftestOptions& o, const BackendMaker& make, std::string listen_address,
                  const std::function<Status(const std::string&)>& publish);

// Connects to `address` and runs o.test; returns the figures (not yet printed).
Result<Report> run_client(const PerftestOptions& o, const BackendMaker& make, const std::string& address);

}  // namespace tictac::cli::perftest
