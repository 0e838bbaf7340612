#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace tictac::detail {

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "tictac: internal invariant broken: %s at %s:%d: %s\n", cond, file, line,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tictac::detail
