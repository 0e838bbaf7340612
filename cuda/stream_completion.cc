#include "cuda/stream_completion.h"

#include <utility>

#include "common/log.h"
#include "common/tunables.h"

namespace tictac::cuda {
namespace {

const IntTunable kStreamFlags{"TICTAC_CUDA_STREAM_FLAGS", 1024,
                              "receives that may wait on CUDA streams at once (host-mapped flags)"};
const DurationTunable kArrivalTimeout{"TICTAC_CUDA_ARRIVAL_TIMEOUT", std::chrono::seconds(60),
                                      "a stream waiting for an arrival is released with an error after this",
                                      "60s"};
const StringTunable kStreamMemOps{
    "TICTAC_CUDA_STREAM_MEM_OPS", "auto",
    "auto: cuStreamWaitValue32 unless CUDA's lazy module loading is on (then the event fallback); "
    "1: stream waits even under lazy loading; 0: always the event fallback"};

}  // namespace

Result<StreamCompletionOptions> StreamCompletionOptions::from_env(int device) {
  StreamCompletionOptions o;
  o.device = device;
  Result<std::int64_t> flags = kStreamFlags.get();
  if (!flags.ok()) return flags.status();
  if (*flags <= 0) return invalid_argument("TICTAC_CUDA_STREAM_FLAGS must be positive, got " + std::to_string(*flags));
  o.max_outstanding = static_cast<std::size_t>(*flags);
  Result<std::chrono::nanoseconds> timeout = kArrivalTimeout.get();
  if (!timeout.ok()) return timeout.status();
  o.timeout = *timeout;
  Result<std::string> mem_ops = kStreamMemOps.get();
  if (!mem_ops.ok()) return mem_ops.status();
  if (*mem_ops == "0") {
    o.allow_stream_mem_ops = false;
  } else if (*mem_ops == "1") {
    o.force_stream_mem_ops = true;
  } else if (*mem_ops != "auto") {
    return invalid_argument("TICTAC_CUDA_STREAM_MEM_OPS must be auto, 1 or 0, got \"" + *mem_ops + "\"");
  }
  TICTAC_LOG(debug) << "CUDA stream completion: " << o.max_outstanding << " flags, timeout "
                    << std::chrono::duration<double>(o.timeout).count() << " s, stream memory operations "
                    << (!o.allow_stream_mem_ops ? "disabled" : o.force_stream_mem_ops ? "forced" : "auto");
  return o;
}

Result<std::unique_ptr<StreamCompletion>> StreamCompletion::create(Api& api, EventPool& events,
                                                                   const StreamCompletionOptions& options) {
  TICTAC_RETURN_IF_ERROR(api.viability());
  if (options.timeout <= std::chrono::nanoseconds::zero()) {
    return invalid_argument("the arrival timeout must be positive (TICTAC_CUDA_ARRIVAL_TIMEOUT)");
  }
  if (options.max_outstanding == 0) return invalid_argument("max_outstanding must be positive");
  if (events.device() != options.device) {
    return invalid_argument("the event pool belongs to device " + std::to_string(events.device()) +
                            ", the stream completion to device " + std::to_string(options.device));
  }
  Result<DeviceCaps> caps = api.device_caps(options.device);
  if (!caps.ok()) return caps.status();
  TICTAC_RETURN_IF_ERROR(api.use_device(options.device));
  const bool lazy_blocks = caps->lazy_module_loading && !options.force_stream_mem_ops;
  const bool mem_ops = caps->stream_mem_ops && options.allow_stream_mem_ops && !lazy_blocks;
  std::unique_ptr<StreamCompletion> sc(new StreamCompletion(
      api, events, options, mem_ops ? ArrivalMode::stream_wait : ArrivalMode::event_after_completion));
  if (mem_ops) {
    Result<std::unique_ptr<FlagPool>> flags = FlagPool::create(api, options.max_outstanding, options.initial_sequence);
    if (!flags.ok()) return flags.status();
    sc->flags_ = std::move(*flags);
    sc->flush_ = options.flush_remote_writes && caps->can_flush_remote_writes;
  } else {
    const char* why = !caps->stream_mem_ops          ? "stream memory operations unsupported"
                      : !options.allow_stream_mem_ops ? "TICTAC_CUDA_STREAM_MEM_OPS=0"
                                                      : "CUDA lazy module loading is on (CUDA_MODULE_LOADING=LAZY, the "
                                                        "default since CUDA 12.2): a kernel's first launch behind a stream "
                                                        "wait would block in the driver and can deadlock the arrival; set "
                                                        "CUDA_MODULE_LOADING=EAGER before CUDA initialises to get stream "
                                                        "waits, or TICTAC_CUDA_STREAM_MEM_OPS=1 if every kernel is loaded "
                                                        "before its first wait";
    TICTAC_LOG(info) << "CUDA device " << options.device << ": stream waits use the event fallback (" << why
                     << "); consumers are ordered only after the completion callback";
    if (sc->side_stream_ == nullptr) {
      Result<Stream> s = api.create_stream();
      if (!s.ok()) return s.status().with_context("creating the completion side stream");
      sc->side_stream_ = *s;
      sc->own_side_stream_ = true;
    }
  }
  return sc;
}

StreamCompletion::StreamCompletion(Api& api, EventPool& events, const StreamCompletionOptions& options,
                                   ArrivalMode mode)
    : api_(api), events_(events), options_(options), mode_(mode), side_stream_(options.side_stream) {}

StreamCompletion::~StreamCompletion() {
  const std::vector<ArrivalFailure> released =
      fail_all(Status(StatusCode::cancelled, "the CUDA stream completion was destroyed"));
  if (!released.empty()) {
    TICTAC_LOG(warn) << "destroying the CUDA stream completion released " << released.size()
                     << " waiting stream(s) with the error sentinel";
  }
  if (own_side_stream_) {
    if (Status s = api_.destroy_stream(side_stream_); !s.ok()) {
      TICTAC_LOG(warn) << s.to_string();
    }
  }
}

Result<ArrivalTicket> StreamCompletion::wait_on_stream(Stream consumer, Clock::time_point now) {
  ArrivalTicket t;
  t.id = next_id_;
  if (mode_ == ArrivalMode::stream_wait) {
    Result<std::uint32_t> flag = flags_->acquire();
    if (!flag.ok()) return flag.status();
    t.flag = *flag;
    t.sequence = flags_->issue(t.flag);
    t.stream_waits = true;
    Status s = api_.use_device(options_.device);
    if (s.ok()) s = api_.wait_value32(consumer, flags_->device_sequence_address(t.flag), t.sequence, flush_);
    if (!s.ok()) {
      // Nothing waits on the flag: bring it level with the issued sequence and hand it back.
      flags_->store_sequence(t.flag, t.sequence);
      flags_->release(t.flag);
      return s.with_context("making the consumer stream wait for an arrival");
    }
  } else if (pending_.size() >= options_.max_outstanding) {
    return Status(StatusCode::resource_exhausted,
                  "all " + std::to_string(options_.max_outstanding) +
                      " arrival slots are in use; complete outstanding receives or raise TICTAC_CUDA_STREAM_FLAGS");
  }
  ++next_id_;
  auto deadline = deadlines_.emplace(now + options_.timeout, t.id);
  pending_.emplace(t.id, Pending{t, consumer, deadline});
  return t;
}

Result<StreamCompletion::Pending*> StreamCompletion::find(const ArrivalTicket& ticket) {
  auto it = pending_.find(ticket.id);
  if (it == pending_.end() || it->second.ticket.flag != ticket.flag ||
      it->second.ticket.sequence != ticket.sequence) {
    return invalid_argument("unknown arrival ticket " + std::to_string(ticket.id) +
                            " (already completed, failed or timed out, or never issued)");
  }
  return &it->second;
}

void StreamCompletion::erase(std::uint64_t id) {
  auto it = pending_.find(id);
  deadlines_.erase(it->second.deadline);
  pending_.erase(it);
}

Status StreamCompletion::complete(const ArrivalTicket& ticket) {
  Result<Pending*> found = find(ticket);
  if (!found.ok()) return found.status();
  Pending& p = **found;
  if (mode_ == ArrivalMode::stream_wait) {
    flags_->store_sequence(p.ticket.flag, p.ticket.sequence);
    flags_->release(p.ticket.flag);
  } else {
    Result<Event> e = events_.acquire();
    if (!e.ok()) return e.status();  // the ticket stays pending; retry after a poll
    Status s = api_.use_device(options_.device);
    if (s.ok()) s = api_.record_event(*e, side_stream_);
    if (s.ok()) s = api_.stream_wait_event(p.stream, *e);
    // The wait (if enqueued) captured the record, so the event may be reused at once.
    events_.release(*e);
    if (!s.ok()) {
      const Status failed = s.with_context("ordering the consumer stream after an arrival");
      erase(p.ticket.id);
      return failed;
    }
  }
  erase(p.ticket.id);
  return Status::Ok();
}

void StreamCompletion::release_with_sentinel(const Pending& p) {
  if (mode_ != ArrivalMode::stream_wait) return;  // the fallback never made the stream wait
  flags_->store_error(p.ticket.flag, kFlagErrorSentinel);
  flags_->store_sequence(p.ticket.flag, p.ticket.sequence);
  flags_->retire(p.ticket.flag);
}

Status StreamCompletion::fail(const ArrivalTicket& ticket) {
  Result<Pending*> found = find(ticket);
  if (!found.ok()) return found.status();
  release_with_sentinel(**found);
  erase(ticket.id);
  return Status::Ok();
}

std::vector<ArrivalFailure> StreamCompletion::poll(Clock::time_point now) {
  std::vector<ArrivalFailure> out;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const Pending p = pending_.at(deadlines_.begin()->second);
    release_with_sentinel(p);
    erase(p.ticket.id);
    out.push_back(ArrivalFailure{
        p.ticket, p.stream,
        Status(StatusCode::timeout,
               "no arrival within " + std::to_string(std::chrono::duration<double>(options_.timeout).count()) +
                   " s for a receive on CUDA device " + std::to_string(options_.device) +
                   (mode_ == ArrivalMode::stream_wait
                        ? "; its stream was released with the error sentinel (flag " + std::to_string(p.ticket.flag) +
                              " retired)"
                        : std::string()) +
                   "; mark the endpoint failed (raise TICTAC_CUDA_ARRIVAL_TIMEOUT if the peer is just slow)")});
  }
  return out;
}

std::vector<ArrivalFailure> StreamCompletion::fail_all(const Status& why) {
  std::vector<ArrivalFailure> out;
  out.reserve(pending_.size());
  while (!deadlines_.empty()) {
    const Pending p = pending_.at(deadlines_.begin()->second);
    release_with_sentinel(p);
    erase(p.ticket.id);
    out.push_back(ArrivalFailure{p.ticket, p.stream, why});
  }
  return out;
}

}  // namespace tictac::cuda
