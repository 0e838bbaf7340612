// Chrome trace output (the "Trace Event Format", loadable in chrome://tracing or Perfetto) of
// a simulation's timeline: one process per worker (tracks downlink, uplink, compute) and per
// PS (uplink, downlink, update), one complete ("X") event per busy interval, iterations laid
// end to end. Requires a SimResult from a run with record_timeline. Pure except for the file
// write; thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "priority/sim/simulator.h"

namespace tictac::priority::sim {

std::string chrome_trace_json(const SimResult& result, const SimConfig& config);
// Writes chrome_trace_json to `path`; an unwritable path is invalid_argument naming it.
Status write_chrome_trace(const SimResult& result, const SimConfig& config, const std::string& path);

}  // namespace tictac::priority::sim
