#include "transport/spin_policy.h"

#include <string>
#include <thread>

#include "common/tunables.h"

namespace tictac::transport {
namespace {

const StringTunable kSpinUs{"TICTAC_SPIN_US", "auto",
                            "progress loop: poll backends and the inbox for up to this many microseconds "
                            "before sleeping (adaptive: shrinks while polling finds nothing); 0 = never spin; "
                            "auto = 50 on machines with >= 4 cores, else 0"};

}  // namespace

std::chrono::nanoseconds SpinPolicy::budget() const {
  if (level_ > kLevels) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(max_).count() >> level_);
}

void SpinPolicy::spun(bool found_work) {
  if (found_work) {
    level_ = 0;
  } else if (level_ <= kLevels) {
    ++level_;
  }
}

void SpinPolicy::slept(std::chrono::nanoseconds slept, bool work) {
  if (work && slept < kActiveGapFactor * max_ && level_ > 0) --level_;
}

Result<std::chrono::microseconds> spin_from_text(std::string_view text, unsigned cores) {
  if (text.empty() || text == "auto") {
    return std::chrono::microseconds(cores >= kAutoSpinMinCores ? kAutoSpinUs : 0);
  }
  Result<std::int64_t> us = parse_int(text);
  if (!us.ok() || *us < 0 || *us > kMaxSpinUs) {
    return invalid_argument("TICTAC_SPIN_US=" + std::string(text) + " is not a spin time: use a number of "
                            "microseconds from 0 (never spin) to " + std::to_string(kMaxSpinUs) +
                            ", or auto");
  }
  return std::chrono::microseconds(*us);
}

Result<std::chrono::microseconds> spin_from_env() {
  Result<std::string> text = kSpinUs.get();
  TICTAC_RETURN_IF_ERROR(text);
  return spin_from_text(*text, std::thread::hardware_concurrency());
}

}  // namespace tictac::transport
