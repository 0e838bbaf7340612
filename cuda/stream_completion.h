// Receive side of CUDA stream-aware completion: "make this consumer stream wait for arrival".
//
// Protocol (mode stream_wait, when the device supports stream memory operations):
//   wait_on_stream(consumer)  takes a flag from the FlagPool, issues its next sequence S and
//                             enqueues cuStreamWaitValue32(consumer, flag, S, GEQ). Work the user
//                             enqueues on `consumer` afterwards runs only once the flag reaches S;
//                             the CPU never blocks.
//   complete(ticket)          called by the progress loop after the last chunk landed (and after
//                             any GPUDirect flush): stores S into the flag with release ordering;
//                             the flag returns to the pool.
//   wrap                      sequences count modulo 2^32 and the GEQ wait is the cyclic
//                             comparison (int32_t)(flag - S) >= 0, so 0 follows 0xFFFFFFFF with no
//                             reset. A flag has one wait outstanding at a time, so the distance
//                             between a flag and any wait on it stays far below 2^31.
//   timeout / failure         poll(now) finds waits past their deadline; fail()/fail_all() do the
//                             same on request. The error word of the flag gets kFlagErrorSentinel,
//                             then the sequence gets S, so the stream is released and never hangs;
//                             a consumer kernel may read the error word (FlagPool) to detect it. The
//                             flag is retired (never reused) and the failure is returned so the
//                             caller marks the endpoint failed and fails the request.
// Fallback (mode event_after_completion: no stream memory operations, lazy module loading in
// effect (DeviceCaps::lazy_module_loading; TICTAC_CUDA_STREAM_MEM_OPS=1 overrides), or
// TICTAC_CUDA_STREAM_MEM_OPS=0): wait_on_stream enqueues nothing (a stream cannot wait on an
// event that is not yet recorded); complete() records a pooled event on the side stream (after
// any staging copies queued there) and makes the consumer stream wait on it. Only work enqueued
// on the consumer stream after the completion callback is ordered after the arrival; the ticket's
// `stream_waits` says which guarantee the caller got.
//
// Contract: loop-confined (one thread calls everything; no locks) and non-blocking: only
// enqueue calls and host stores. Errors: resource_exhausted when no flag (or, in the fallback, no
// event) is free — the ticket stays valid/pending and the call can be retried after poll();
// invalid_argument for an unknown or finished ticket; cuda_error when an enqueue fails (the flag
// is returned). Destruction releases every waiting stream with the error sentinel; streams must
// have executed their waits before the object (and its flag pool) is destroyed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cuda/api.h"
#include "cuda/event_pool.h"
#include "cuda/flag_pool.h"

namespace tictac::cuda {

enum class ArrivalMode : std::uint8_t { stream_wait, event_after_completion };

struct StreamCompletionOptions {
  int device = 0;
  std::size_t max_outstanding = 1024;  // flags in the pool (TICTAC_CUDA_STREAM_FLAGS)
  std::chrono::nanoseconds timeout = std::chrono::seconds(60);  // TICTAC_CUDA_ARRIVAL_TIMEOUT
  bool allow_stream_mem_ops = true;   // TICTAC_CUDA_STREAM_MEM_OPS=0 clears it
  // Stream waits even under lazy module loading (TICTAC_CUDA_STREAM_MEM_OPS=1): safe only when
  // every kernel launched while a wait is pending has been launched (loaded) before.
  bool force_stream_mem_ops = false;
  bool flush_remote_writes = false;  // add CU_STREAM_WAIT_VALUE_FLUSH where the device needs it
  std::uint32_t initial_sequence = 0;
  Stream side_stream = nullptr;  // fallback: where completion events are recorded; null: own one

  // The defaults above overridden by the TICTAC_CUDA_* variables; invalid_argument names a bad one.
  static Result<StreamCompletionOptions> from_env(int device);
};

struct ArrivalTicket {
  std::uint64_t id = 0;
  std::uint32_t flag = 0;      // stream_wait mode: the flag index
  std::uint32_t sequence = 0;  // stream_wait mode: the value the stream waits for
  bool stream_waits = false;   // true: work enqueued after wait_on_stream is already ordered
};

struct ArrivalFailure {
  ArrivalTicket ticket;
  Stream stream = nullptr;
  Status status;
};

class StreamCompletion {
 public:
  using Clock = std::chrono::steady_clock;

  // `events` is used by the fallback and must outlive this object.
  static Result<std::unique_ptr<StreamCompletion>> create(Api& api, EventPool& events,
                                                          const StreamCompletionOptions& options);
  ~StreamCompletion();
  StreamCompletion(const StreamCompletion&) = delete;
  StreamCompletion& operator=(const StreamCompletion&) = delete;

  ArrivalMode mode() const { return mode_; }
  std::size_t outstanding() const { return pending_.size(); }
  const FlagPool* flags() const { return flags_.get(); }  // null in the fallback

  Result<ArrivalTicket> wait_on_stream(Stream consumer, Clock::time_point now);
  Status complete(const ArrivalTicket& ticket);
  // Releases the stream with the sentinel without a timeout (e.g. the endpoint failed).
  Status fail(const ArrivalTicket& ticket);
  // Waits whose deadline is at or before `now`, released with the sentinel; status timeout.
  std::vector<ArrivalFailure> poll(Clock::time_point now);
  // Every outstanding wait, released with the sentinel; each failure carries `why`.
  std::vector<ArrivalFailure> fail_all(const Status& why);

 private:
  struct Pending {
    ArrivalTicket ticket;
    Stream stream;
    std::multimap<Clock::time_point, std::uint64_t>::iterator deadline;
  };

  StreamCompletion(Api& api, EventPool& events, const StreamCompletionOptions& options, ArrivalMode mode);
  Result<Pending*> find(const ArrivalTicket& ticket);
  void release_with_sentinel(const Pending& p);
  void erase(std::uint64_t id);

  Api& api_;
  EventPool& events_;
  StreamCompletionOptions options_;
  ArrivalMode mode_;
  bool flush_ = false;
  bool own_side_stream_ = false;
  Stream side_stream_ = nullptr;
  std::unique_ptr<FlagPool> flags_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::multimap<Clock::time_point, std::uint64_t> deadlines_;
};

}  // namespace tictac::cuda
