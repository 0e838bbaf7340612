#include "transport/chunk_tuner.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace tictac::transport {

ChunkTuner::ChunkTuner(ChunkTunerConfig config)
    : config_(config),
      chunk_(config.chunk_bytes),
      solo_chunk_(config.chunk_bytes),
      window_(config.window_chunks),
      solo_window_(config.window_chunks) {
  TICTAC_CHECK(config_.chunk_bytes > 0 && config_.window_chunks > 0,
               "chunk and window must be positive");
  TICTAC_CHECK(config_.min_chunk > 0 && config_.min_chunk <= config_.max_chunk, "bad chunk bounds");
  TICTAC_CHECK(config_.max_solo_chunk > 0, "bad solo chunk bound");
  TICTAC_CHECK(config_.min_window > 0 && config_.min_window <= config_.max_window,
               "bad window bounds");
}

namespace {
constexpr std::size_t kMaxSeen = 4096;
}  // namespace

void ChunkTuner::on_done(std::uint64_t bytes, std::uint64_t ahead_bytes, Time popped, Time done,
                         bool busy_after) {
  if (!config_.auto_chunk && !config_.auto_window) return;
  if (seen_.size() < kMaxSeen)
    seen_.push_back({std::max(Time{0}, done - popped), bytes + ahead_bytes});
  if (have_last_ && last_busy_ && done >= last_done_) {
    acc_time_ += done - last_done_;
    acc_bytes_ += bytes;
    ++acc_chunks_;
  }
  have_last_ = true;
  last_busy_ = busy_after;
  last_done_ = done;
  if (acc_chunks_ >= config_.sample_chunks && acc_time_ >= config_.sample_period) finish_sample();
}

void ChunkTuner::finish_sample() {
  const double seconds = std::chrono::duration<double>(acc_time_).count();
  const double sample_rate = static_cast<double>(acc_bytes_) / seconds;
  rate_ = samples_ == 0 ? sample_rate : (rate_ + sample_rate) / 2;
  double delay_s = 1e9;
  for (const Seen& x : seen_) {
    const double own =
        std::chrono::duration<double>(x.latency).count() - static_cast<double>(x.through) / rate_;
    delay_s = std::min(delay_s, std::max(0.0, own));
  }
  base_ = std::chrono::duration_cast<Time>(std::chrono::duration<double>(delay_s));
  ++samples_;
  acc_bytes_ = 0;
  acc_time_ = Time{0};
  acc_chunks_ = 0;
  seen_.clear();

  if (config_.auto_chunk)
    retune(chunk_, rate_ * std::chrono::duration<double>(config_.target).count());
  const double chunk_s = static_cast<double>(chunk_) / rate_;
  if (config_.auto_chunk) {
    if (is_long(chunk_s)) {
      solo_chunk_ = chunk_;
    } else {
      retune(solo_chunk_, rate_ * std::chrono::duration<double>(config_.solo_target).count());
      solo_chunk_ = std::max(std::min(solo_chunk_, config_.max_solo_chunk), chunk_);
    }
  }
  if (config_.auto_window) {
    window_ = window_for(delay_s, chunk_s);
    solo_window_ = window_for(delay_s, static_cast<double>(std::max(solo_chunk_, chunk_)) / rate_);
  }
}

bool ChunkTuner::is_long(double chunk_s) const {
  return chunk_s >= std::chrono::duration<double>(config_.long_chunk).count();
}

std::uint32_t ChunkTuner::window_for(double delay_s, double chunk_s) const {
  const double w = 1 + std::ceil(delay_s / chunk_s);
  const double hi = static_cast<double>(config_.max_window);
  const double lo = std::min(is_long(chunk_s) ? 1.0 : static_cast<double>(config_.min_window), hi);
  return static_cast<std::uint32_t>(std::clamp(w, lo, hi));
}

void ChunkTuner::retune(std::uint64_t& chunk, double ideal) const {
  if (ideal < static_cast<double>(chunk) * 2 && ideal > static_cast<double>(chunk) / 2) return;
  // Nearest power of two in log scale.
  const double lg = std::round(std::log2(std::max(ideal, 1.0)));
  const double pow2 = std::ldexp(1.0, static_cast<int>(std::min(lg, 62.0)));
  chunk = std::clamp(static_cast<std::uint64_t>(pow2), config_.min_chunk, config_.max_chunk);
}

}  // namespace tictac::transport
