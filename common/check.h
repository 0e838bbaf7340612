// TICTAC_CHECK: for our own broken invariants only (never for network, peer, registration or
// CUDA failures, which are Status values). Prints the condition, file:line and a message to
// stderr and aborts.
#pragma once

#include <sstream>
#include <string>

namespace tictac::detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace tictac::detail

#define TICTAC_CHECK(cond, msg)                                                        \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::ostringstream tictac_check_os_;                                             \
      tictac_check_os_ << msg;                                                         \
      ::tictac::detail::check_failed(#cond, __FILE__, __LINE__, tictac_check_os_.str()); \
    }                                                                                  \
  } while (0)
