// `tictac perftest` flags: parsed and validated into one plain value before anything connects.
//
// parse_perftest_options() reads every flag of the command (see docs/benchmarks.md), applies the
// per-test defaults, and rejects bad input with invalid_argument naming the flag (the CLI maps it
// to exit code 2): unknown or misspelt flags, a missing or contradictory mode, flags that do not
// apply to the chosen test or mode, sizes and counts out of range, a backend that is not one of
// tcp|ucx|verbs|loopback. Whether a valid backend is *viable* here is decided later (exit 1).
// Plain value; thread-safe to copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cli/args.h"
#include "common/status.h"
#include "transport/config.h"

namespace tictac::cli {

enum class PerfTest { lat, bw, priority };
enum class PerfMode { server, client, local };
enum class PerfFormat { table, json };

const char* to_string(PerfTest test);

// Hard limits that keep a typo from allocating the machine away.
inline constexpr std::uint64_t kMaxPerfSize = std::uint64_t{1} << 30;         // one message
inline constexpr std::uint64_t kMaxPerfBufferBytes = std::uint64_t{4} << 30;  // all buffers
inline constexpr std::uint64_t kMaxPerfIters = 100'000'000;

struct PerftestOptions {
  std::string backend = "tcp";  // tcp | loopback | ucx | verbs
  PerfTest test = PerfTest::lat;
  PerfMode mode = PerfMode::local;
  std::string listen;   // server: "<backend>://host:port"
  std::string connect;  // client: "<backend>://host:port"
  std::uint64_t size = 0;         // lat/bw: message bytes; priority: the high-priority message
  std::uint64_t iters = 0;        // lat/bw: timed messages; priority: repetitions of the pair of runs
  std::uint64_t warmup = 0;       // lat/bw: untimed messages first
  std::uint64_t bulk = 0;         // priority: low-priority bytes queued ahead of the message
  // priority: bulk bytes landed before the message is submitted (0 = the first bulk message)
  std::uint64_t hi_after = 0;
  std::uint64_t outstanding = 0;  // bw: messages in flight
  // bw: distinct receive buffers the server rotates through (0 = one per outstanding receive;
  // 1 = every message into the same buffer, as ucx_perftest and iperf3 do)
  std::uint64_t recv_buffers = 0;
  transport::TransportConfig config;  // TICTAC_* environment, then --chunk/--window/--timeout
  PerfFormat format = PerfFormat::table;
};

Result<PerftestOptions> parse_perftest_options(Args& args);

// Default number of bw messages in flight for a message size: enough to keep the pipe full,
// bounded to 64 MiB of receive buffers (at least 2, at most 64).
std::uint64_t default_outstanding(std::uint64_t size);

}  // namespace tictac::cli
