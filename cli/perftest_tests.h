// The three perftest tests, each as a client side (drives the test, measures) and a server side
// (follows the client's setup message). One call = one session over one connected Link.
//
//   lat       ping-pong of `size` bytes; one-way latency = round trip / 2 on the client's clock.
//   bw        the client streams `warmup + iters` messages with `outstanding` in flight; the
//             server times the landing of the last `iters` on its own clock.
//   priority  the server posts receives for `bulk` bytes of low-priority messages and one
//             high-priority message; the client queues the bulk, waits until the first bulk
//             message (or, with --hi-after B, the bulk up to B bytes) has landed (the server's
//             ack0), then submits the high-priority message.
//             Measured: its submission to its receive completion (docs/benchmarks.md).
//
// Every side waits only through a Monitor (bounded by link.idle_limit), so a dead or silent peer
// ends the session with the transport's error (connection_lost, timeout ...) instead of a hang.
// A server rejects setup values outside the client's own flag limits with protocol_error.
// Not thread-safe: one session per Link at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/perftest_link.h"
#include "cli/perftest_options.h"
#include "cli/perftest_report.h"

namespace tictac::cli::perftest {

// `setup` already holds the session fields (protocol, test, session numbers); the client adds
// the test's parameters and sends it.
Status lat_client(const Link& link, const PerftestOptions& o, Fields setup, Report& report);
Status lat_server(const Link& link, const Fields& setup);

Status bw_client(const Link& link, const PerftestOptions& o, Fields setup, Report& report);
Status bw_server(const Link& link, const Fields& setup);

struct PrioritySample {
  double hi_lat_ms = 0;      // submission -> receive completion (see clock)
  double hi_ack_ms = 0;      // submission -> the server's ack back at the client
  bool same_clock = false;   // hi_lat_ms used one CLOCK_MONOTONIC; else it is hi_ack_ms
  double bulk_bytes_per_s = 0;
  std::uint64_t bulk_before_hi = 0;  // bulk messages complete at the receiver before it
  std::uint64_t bulk_messages = 0;
};
// The bulk message sizes for `bulk` bytes: the first is one chunk, the rest split evenly into at
// most 15 messages.
std::vector<std::uint64_t> bulk_message_sizes(std::uint64_t bulk, std::uint64_t chunk);
Result<PrioritySample> priority_client(const Link& link, const PerftestOptions& o, Fields setup);
Status priority_server(const Link& link, const Fields& setup);

}  // namespace tictac::cli::perftest
