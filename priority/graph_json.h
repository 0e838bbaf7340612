// Reading and writing the tictac-graph/1 JSON format (docs/graph-format.md).
//
// Loading validates everything (syntax with line/column, the "format" tag, every op field,
// then Graph::build's structural checks) and returns either a complete Graph or one
// invalid_argument error naming the op and its position; nothing is half-loaded.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "priority/graph.h"

namespace tictac::priority {

inline constexpr std::string_view kGraphFormat = "tictac-graph/1";

// Parses JSON text. `source` names the input in messages (a path, or "<string>").
Result<Graph> parse_graph_json(std::string_view text, std::string_view source = "<string>");
// Reads and parses a file; a missing or unreadable file is invalid_argument naming the path.
Result<Graph> load_graph_file(const std::string& path);
// Serialises a graph (ops in OpId order) so that parse_graph_json round-trips it exactly.
std::string graph_to_json(const Graph& graph);
// Writes graph_to_json to a file (atomically: temp file + rename).
Status save_graph_file(const Graph& graph, const std::string& path);

}  // namespace tictac::priority
