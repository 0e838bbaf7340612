// Logging to stderr with a level chosen at run time.
//
// TICTAC_LOG_LEVEL = error|warn|info|debug|trace (default warn); TICTAC_DEBUG=1 is a shorthand
// for debug. Each line is written with one write() so lines from threads do not interleave.
// Usage: TICTAC_LOG(info) << "connected to " << peer;   Thread-safe.
#pragma once

#include <sstream>
#include <string_view>

namespace tictac {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

// The effective level, read once from the environment (an invalid value logs one warning and
// falls back to warn).
LogLevel log_level();
inline bool log_enabled(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(log_level()); }
// Override for tests and for CLI flags such as --verbose.
void set_log_level(LogLevel level);

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return os_; }

 private:
  std::ostringstream os_;
};

}  // namespace tictac

#define TICTAC_LOG(level)                                               \
  if (!::tictac::log_enabled(::tictac::LogLevel::level)) {              \
  } else                                                                \
    ::tictac::LogLine(::tictac::LogLevel::level, __FILE__, __LINE__).stream()
