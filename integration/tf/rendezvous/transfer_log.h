// Transfer log of the grpc+tictac drop-in, consumer side: one record per cross-task tensor that
// this process received over TicTac (step id, edge name, request and arrival times, bytes), so a
// benchmark can draw the same per-transfer intervals that gRPC's RecvTensor entries give in TF's
// step stats (bench/tf/tf_ps_bench.py computes comm time, scheduling efficiency E and the order
// observed from them). Off by default: enabled by `tictac.tf.rendezvous.transfer_log(True)` or
// TICTAC_TF_TRANSFER_LOG=1; a record costs one mutex and a vector append. Times are the caller's
// clock (the drop-in passes TF's Env::NowMicros, the clock of TF's step stats). Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace tictac::tfrdv {

// Whether records are kept (set_transfer_log also reads TICTAC_TF_TRANSFER_LOG once, at first use).
bool transfer_log_enabled();
void set_transfer_log(bool on);
void record_transfer(std::int64_t step_id, const std::string& edge, std::int64_t start_us,
                     std::int64_t end_us, std::int64_t bytes);
// Writes the records kept so far to `path` as lines "step_id start_us end_us bytes edge" and
// forgets them; returns how many, or -1 when the file cannot be written (records then kept).
long long dump_transfer_log(const std::string& path);

}  // namespace tictac::tfrdv
