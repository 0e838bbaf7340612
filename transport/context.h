// Context: the process-wide root of the transport: configuration, backends, the progress engine
// and all transfers. This is the header users include.
//
//   auto ctx = Context::create(options);                 // TICTAC_* tunables by default
//   std::string addr = *ctx->listen("tcp://127.0.0.1:0");
//   PeerId p = *ctx->connect("tcp://127.0.0.1:5000");    // or *ctx->accept()
//   ctx->send(p, tag, region, 0, region.size(), priority, [](const Status& s, uint64_t n, PeerId) {...});
//   ctx->recv(kAnyPeer, tag, region, 0, region.size(), callback);
//   ctx->close(); ctx->join();
//
// Thread safety: every method may be called from any thread. send/recv/cancel/close never block
// and never run a callback themselves: they post to the loop thread, which owns all state.
// Callbacks run on the loop thread (thread mode) or inside progress() (manual mode), exactly once
// per request; they must not block and must not call the blocking helpers (connect/accept/join).
// Blocking helpers (listen, connect, accept, peer_name) wait for the loop; in manual mode they
// drive progress() themselves.
// Device buffers: register them with register_buffer (MemoryType::cuda, with the stream that
// orders them). A send of a device region starts only after the work enqueued on its stream
// before send(); a receive makes the region's stream wait at once, and work enqueued on it after
// recv() runs only once every byte is on the device (without stream memory operations: only work
// enqueued after the callback). Both are enqueued on the calling thread before send()/recv()
// return, also inside a batch (when the event or flag pool is empty at that moment, the loop
// enqueues them later: transport/cuda_path.h). If no byte arrives within TICTAC_CUDA_ARRIVAL_TIMEOUT the stream
// is released with the error sentinel (cuda/flag_pool.h) and the receive fails with timeout; a
// cancelled or failed receive releases it the same way. Backends without GPU memory support (tcp,
// UCX without CUDA) stage through pinned host buffers (docs/cuda.md).
// Ownership: the caller keeps each MemoryRegion (and its buffer) alive and unmodified (sends) or
// untouched (receives) until the request's callback has fired.
// Ordering: messages from one peer with one tag are received in the order they were sent;
// matching is by (source, tag), first in first out. Sends leave in priority order (smaller
// first), preempting at chunk boundaries.
// Authentication: with a token (ContextOptions::auth_token or TICTAC_AUTH_TOKEN) connect() and
// accept() only ever return peers that proved knowledge of the same token; a peer that fails is
// refused with a logged reason (connect() returns the protocol_error naming the peer and cause;
// accept() never sees it).
// Errors: asynchronous outcomes are the callback's Status: invalid_argument (bad peer, range, too
// small a receive), cancelled (cancel() or close()), connection_lost / protocol_error / timeout
// (naming the peer; every pending and later request on that peer gets the same status).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "cuda/api.h"
#include "transport/backend.h"
#include "transport/config.h"
#include "transport/memory_region.h"
#include "transport/progress_engine.h"
#include "transport/types.h"

namespace tictac::transport {

class Core;
class CudaDevices;

struct ContextOptions {
  // Peer name sent in the handshake (default: "<hostname>:<pid>").
  std::string name;
  // Thread (default) or manual progress (deterministic tests: call progress()).
  ProgressEngine::Mode mode = ProgressEngine::Mode::thread;
  // Configuration; unset = TransportConfig::from_env().
  std::optional<TransportConfig> config;
  // Shared secret that authenticates every connection (HMAC-SHA256 challenge-response in the
  // handshake, 16..1024 bytes; docs/security.md). Unset = TICTAC_AUTH_TOKEN, read even when
  // `config` is given (no authentication when that is unset too); "" = no authentication,
  // whatever the environment says. Peers must agree: a token on one side only is refused.
  std::optional<std::string> auth_token;
  // Timeline file (transport/message_trace.h, docs/trace.md). Unset = TICTAC_TRACE; "" = off,
  // whatever the environment says.
  std::optional<std::string> trace_path;
  // Backends in order of preference; empty = the TCP backend.
  std::vector<std::unique_ptr<Backend>> backends;
  // The CUDA table for device buffers (not owned; must outlive the Context: tests pass the
  // scripted fake). Null = cuda::open_runtime_api(), opened on the first device registration.
  cuda::Api* cuda_api = nullptr;
};

struct BackendStatus {
  std::string name;
  Viability viability;
  Capabilities capabilities;
};

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(ContextOptions options);
  ~Context();  // close() + join()
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const TransportConfig& config() const { return config_; }
  const std::string& name() const { return name_; }
  std::vector<BackendStatus> backends() const;

  // Registers a buffer for this context's transfers. Host memory: MemoryRegion::register_buffer.
  // CUDA memory: checked against the driver (MemoryRegion::register_device) and the device's
  // pools are made; this may block (driver start-up, pinned allocations), so register at set-up
  // time and never from a callback. Errors: unavailable "CUDA not viable: <reason>" where CUDA
  // cannot be used (no toolkit in this build, no driver, no device), invalid_argument as
  // register_device says, or the pools' creation error.
  Result<MemoryRegion> register_buffer(const BufferDesc& desc);

  // Starts listening on "<backend>://<address>"; returns the bound address (with the real port).
  Result<std::string> listen(std::string_view address);
  // Connects and completes the handshake, retrying refused connects, within TICTAC_TIMEOUT.
  Result<PeerId> connect(std::string_view address);
  // The next peer that connected to one of our listeners, waiting up to `timeout`.
  Result<PeerId> accept(std::chrono::milliseconds timeout);
  // The name the peer sent in its handshake.
  Result<std::string> peer_name(PeerId peer);

  // Sends region[offset, offset+length) to `peer` under `tag`. Returns the request's id.
  RequestId send(PeerId peer, Tag tag, const MemoryRegion& region, std::uint64_t offset,
                 std::uint64_t length, Priority priority, Callback callback);
  // Receives a message of at most `length` bytes with `tag` from `peer` (or kAnyPeer) into
  // region[offset, offset+length).
  RequestId recv(PeerId peer, Tag tag, MemoryRegion& region, std::uint64_t offset,
                 std::uint64_t length, Callback callback);
  // Asks to cancel; the request then completes with `cancelled`, unless it was already complete or
  // (a send) entirely handed to the backend, in which case it completes normally.
  void cancel(RequestId id);

  // Asynchronous: every pending request completes with `cancelled`, connections and listeners
  // close. Requests submitted later complete with `cancelled` until join().
  void close();
  // Waits for close() to finish and stops the loop. After join(), send/recv return kNoRequest
  // and drop their callback.
  void join();

  // Batches: between begin_batch() and end_batch() on one thread, that thread's send/recv calls on
  // this Context are held and then handed to the loop as ONE task, so the SendQueue sees every
  // send of the batch before it hands out a chunk (posting N sends one by one lets the first ones
  // reach the wire before later, higher-priority ones exist). Ids are returned at once as usual;
  // cancel() of a held request takes effect after end_batch(). Batches nest (the outermost
  // end_batch() posts). Other threads are not affected. Used by the c10d backend's coalescing
  // (dist.batch_isend_irecv) and by the parameter server, which posts an iteration's sends at once.
  void begin_batch();
  void end_batch();
  // RAII form of begin_batch()/end_batch().
  class Batch {
   public:
    explicit Batch(Context& ctx) : ctx_(ctx) { ctx_.begin_batch(); }
    ~Batch() { ctx_.end_batch(); }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

   private:
    Context& ctx_;
  };

  // Manual mode only: one loop iteration (see ProgressEngine::progress).
  std::size_t progress(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

 private:
  Context(TransportConfig config, std::string name, std::unique_ptr<ProgressEngine> engine);
  template <typename T>
  Result<T> call(std::function<void(std::function<void(Result<T>)>)> op);
  // Posts `task` to the loop, or holds it in this thread's open batch for this Context.
  void post_or_hold(std::function<void()> task);
  RequestId submit(bool is_send, PeerId peer, Tag tag, const MemoryRegion& region,
                   std::uint64_t offset, std::uint64_t length, Priority priority, Callback cb);

  const TransportConfig config_;
  const std::string name_;
  bool trace_on_ = false;  // TICTAC_TRACE: submit() stamps each request (set once, in create())
  std::vector<BackendStatus> backend_status_;
  std::unique_ptr<ProgressEngine> engine_;
  std::unique_ptr<CudaDevices> cuda_;  // outlives core_
  std::unique_ptr<Core> core_;
  std::atomic<RequestId> next_request_{1};
  std::atomic<bool> joined_{false};
};

}  // namespace tictac::transport
