#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tictac {
namespace {

constexpr const char* kLevelNames[] = {"error", "warn", "info", "debug", "trace"};

LogLevel level_from_env() {
  const char* debug = std::getenv("TICTAC_DEBUG");
  const char* text = std::getenv("TICTAC_LOG_LEVEL");
  if (text != nullptr && *text != '\0') {
    for (int i = 0; i < 5; ++i) {
      if (std::strcmp(text, kLevelNames[i]) == 0) return static_cast<LogLevel>(i);
    }
    std::string msg = std::string("[tictac warn] TICTAC_LOG_LEVEL='") + text +
                      "' is not one of error|warn|info|debug|trace; using warn\n";
    (void)!::write(2, msg.data(), msg.size());
  }
  if (debug != nullptr && *debug != '\0' && std::strcmp(debug, "0") != 0) return LogLevel::debug;
  return LogLevel::warn;
}

std::atomic<int>& level_store() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_store().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_store().store(static_cast<int>(level)); }

LogLine::LogLine(LogLevel level, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  os_ << "[tictac " << ::getpid() << ' ' << kLevelNames[static_cast<int>(level)] << ' '
      << (base != nullptr ? base + 1 : file) << ':' << line << "] ";
}

LogLine::~LogLine() {
  os_ << '\n';
  const std::string text = os_.str();
  (void)!::write(2, text.data(), text.size());
}

}  // namespace tictac
