// Backend and Endpoint: what a transport (tcp, loopback, later ucx and verbs) must provide.
//
// Division of labour (as in UCX's uct layer): a backend moves frames (a wire::Header plus an
// optional payload) over connections and says "no capacity" when it cannot take more; the
// backend-neutral core above it decides what to send next (SendQueue), matches messages to
// receives, and owns all requests. Backends never queue by priority.
//
// Threading: every method is called on the loop thread of the ProgressEngine passed to attach(),
// and every EndpointSink call is made on that thread. No call blocks. A backend never calls a
// sink or a completion function from inside the core's call into it (post(), connect(), ...):
// those are deferred to a later step of the loop, so the core's state is never re-entered.
// Ownership: the core owns Endpoints (unique_ptr); an Endpoint makes no sink calls after close().
// Payload buffers passed to post() stay valid until the matching on_sent() or close().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transport/progress_engine.h"
#include "transport/wire.h"

namespace tictac::transport {

struct Viability {
  bool viable = false;
  std::string reason;  // why not, or a short description of what was found
};

struct Capabilities {
  bool host_memory = true;
  // post() payloads and Destination::data may be CUDA device pointers: the backend reads and
  // writes device memory itself (no host memcpy). The core then sends and receives device
  // buffers without staging (transport/cuda_path.h); false = staged through host memory.
  bool cuda_memory = false;
  bool dma_buf = false;
  std::uint32_t max_frames_in_flight = 0;  // per endpoint, 0 = no fixed limit
  // The largest solo chunk (transport/send_queue.h) worth cutting for this backend, used unless
  // TICTAC_CHUNK_SOLO_MAX is set; 0 = no preference (kDefaultSoloChunkMax).
  std::uint64_t solo_chunk_max = 0;
};

// Where the payload of an incoming frame goes: `data` (length bytes, owned by the core) or, when
// `discard` is set, nowhere (the backend consumes and drops the bytes).
struct Destination {
  std::byte* data = nullptr;
  bool discard = false;
};

// Implemented by the core; one per endpoint.
class EndpointSink {
 public:
  virtual ~EndpointSink() = default;
  // A complete, decoded, validated header arrived. Returns where its payload goes, or an error
  // (protocol_error ...) after which the backend closes the endpoint and calls on_failed with it.
  virtual Result<Destination> on_header(const wire::Header& header) = 0;
  // The payload of the frame announced by the last on_header() has fully landed.
  virtual void on_frame(const wire::Header& header) = 0;
  // The frame posted with `cookie` left the host (its payload buffer may be reused).
  virtual void on_sent(std::uint64_t cookie) = 0;
  // Capacity was freed after has_capacity() had returned false.
  virtual void on_writable() = 0;
  // Terminal: connection lost, protocol error, ... The endpoint is closed; no further calls.
  virtual void on_failed(const Status& status) = 0;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Begins delivering events to `sink` (frames that arrived earlier are delivered then).
  virtual void start(EndpointSink* sink) = 0;
  // Whether post() would accept one more frame now.
  virtual bool has_capacity() const = 0;
  // Whether a new message of `priority` would go out now on a path of its own that does not wait
  // behind the frames already posted (tcp: lane 1, transport/tcp/lanes.h), so the core may post
  // its chunk even when has_capacity() is false or the send window is full. false (the
  // default) = no such path.
  virtual bool has_urgent_capacity(std::int64_t priority) const {
    (void)priority;
    return false;
  }
  // Queues one frame. `payload` has header.length bytes (may be null when 0) and must stay valid
  // until on_sent(cookie). resource_exhausted = no capacity (nothing queued); other errors mean
  // the endpoint is unusable.
  virtual Status post(const wire::Header& header, const std::byte* payload,
                      std::uint64_t cookie) = 0;
  // Zero-copy hook, called by the core when it binds the rendezvous message `msg_id` (the
  // peer's number) to a receive, just before it posts that message's READY: the message's
  // `length` bytes will land at `data`. A backend that can let the peer write them there
  // directly (verbs: RDMA WRITE) prepares that, carries what the peer needs with the READY, and
  // returns true; the bytes may then arrive without passing through on_header's Destination
  // copy, and the buffer may be written until the message's last DATA frame or its ABORT was
  // delivered (so the core must not complete a cancelled receive before then). false (the
  // default) = the frames carry the payload as usual.
  virtual bool export_destination(std::uint64_t msg_id, std::byte* data, std::uint64_t length) {
    (void)msg_id;
    (void)data;
    (void)length;
    return false;
  }
  // Closes the connection now; drops unsent frames; no sink calls after this returns.
  virtual void close() = 0;
  // For messages: "tcp 127.0.0.1:40000 -> 127.0.0.1:5000".
  virtual std::string describe() const = 0;
};

using AcceptFn = std::function<void(std::unique_ptr<Endpoint>)>;
using ConnectFn = std::function<void(Result<std::unique_ptr<Endpoint>>)>;

class Backend {
 public:
  virtual ~Backend() = default;
  // "tcp", "loopback": also the scheme of its addresses ("tcp://127.0.0.1:5000").
  virtual std::string_view name() const = 0;
  // Any thread; cheap. Not viable = the Context skips this backend and says why in `tictac info`.
  virtual Viability viability() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Before attach(): the job's shared token (validated; nullopt = none), for a backend that
  // authenticates on its own channel before it commits resources to a peer (verbs: before it
  // registers memory). The Context passes what it resolved (ContextOptions or
  // TICTAC_AUTH_TOKEN); the default ignores it (tcp/loopback authenticate in the Connection).
  virtual void set_auth_token(const std::optional<std::string>& token) { (void)token; }
  // Before attach(): the limits on incoming handshakes (TICTAC_MAX_HANDSHAKES at once, each
  // within `timeout`), for a backend that runs a handshake of its own before it hands an endpoint
  // to the Core (verbs: its side channel). The default ignores them (the Core applies them to
  // the Connection's handshake in any case).
  virtual void set_handshake_limits(std::uint32_t max_concurrent,
                                    std::chrono::milliseconds timeout) {
    (void)max_concurrent;
    (void)timeout;
  }

  // --- loop thread of `engine` only ---
  // Called once before any other loop call.
  virtual Status attach(ProgressEngine& engine) = 0;
  // Listens on `address` (without the scheme); returns the bound address with the scheme, e.g.
  // "tcp://127.0.0.1:41234" for "127.0.0.1:0". Accepted endpoints are handed to on_accept.
  virtual Result<std::string> listen(std::string_view address, AcceptFn on_accept) = 0;
  // Connects to `address` (without the scheme), retrying refused attempts until `deadline`;
  // on_done fires later (never inside this call) with the endpoint or a timeout/unavailable error.
  virtual void connect(std::string_view address, Clock::time_point deadline, ConnectFn on_done) = 0;
  // Stops listening and abandons pending connects (their on_done is not called).
  virtual void shutdown() = 0;
};

}  // namespace tictac::transport
