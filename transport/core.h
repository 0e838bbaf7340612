// Core: the loop-side state of a Context (internal to transport/): backends with their shared
// SendQueue and window ("devices"), connections, requests and the matcher.
//
// Loop-thread only: the Context reaches it exclusively through tasks posted to its
// ProgressEngine. Owns every Request until it completes and every Connection until the Core is
// destroyed (failed connections stay, so later requests to them get the terminal status).
// Device-buffer requests are owned here too; their CudaPath (transport/cuda_path.h) carries them
// on inner host-side requests through the same path.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/node_recycler.h"
#include "transport/arrived_messages.h"
#include "transport/backend.h"
#include "transport/config.h"
#include "transport/connection.h"
#include "transport/cuda_path.h"
#include "transport/matcher.h"
#include "transport/message_trace.h"
#include "transport/progress_engine.h"
#include "transport/request.h"

namespace tictac::transport {

using PeerFn = std::function<void(Result<PeerId>)>;

class Core final : public ConnectionHost, public CudaPathHost {
 public:
  // `auth_token` (validated by the caller): every connection authenticates with it; nullopt =
  // unauthenticated (refused by peers that have a token). Wiped from memory with the Core.
  Core(ProgressEngine& engine, const TransportConfig& config, std::string name,
       std::vector<std::unique_ptr<Backend>> backends, std::optional<std::string> auth_token,
       CudaDevices& cuda);
  ~Core() override;

  // Attaches the viable backends and starts the liveness watchdog.
  Status init();

  Result<std::string> listen(std::string_view address);
  void connect(const std::string& address, PeerFn done);
  // The next established incoming peer, or timeout at `deadline`.
  void accept(Clock::time_point deadline, PeerFn done);
  Result<std::string> peer_name(PeerId peer) const;

  void send(std::unique_ptr<Request> req);
  void recv(std::unique_ptr<Request> req);
  // A request on a device buffer (its device prepared by CudaDevices::prepare).
  void send_device(std::unique_ptr<Request> req, const DeviceRoute& route);
  void recv_device(std::unique_ptr<Request> req, const DeviceRoute& route);
  void cancel(RequestId id);
  // Completes everything pending with `why`, closes all connections and listeners.
  void close(const Status& why);
  bool closed() const { return closed_; }

  // --- ConnectionHost ---
  Request* match_message(Connection& conn, Tag tag, std::uint64_t msg_id) override;
  void forget_message(Connection& conn, std::uint64_t msg_id) override;
  void finish(Request* req, const Status& status, std::uint64_t bytes, PeerId source) override;
  void connection_established(Connection& conn) override;
  void keep_arrived(Connection& conn, std::uint64_t msg_id, Tag tag, std::uint64_t total,
                    std::unique_ptr<std::byte[]> bytes) override;
  void connection_failed(Connection& conn, const Status& status) override;
  void schedule_pump(SendQueue& queue) override;
  std::size_t unexpected_count(const Connection& conn) const override;
  bool on_loop_thread() const override;
  MessageTrace* trace() const override { return trace_.get(); }
  // Turns the timeline on (before init(); the Core owns it and closes the file when destroyed).
  void set_trace(std::unique_ptr<MessageTrace> trace) { trace_ = std::move(trace); }

  // --- CudaPathHost ---
  void submit_inner(std::unique_ptr<Request> req) override;
  void cancel_inner(RequestId id) override { cancel(id); }
  void finish_user(Request* req, const Status& status, std::uint64_t bytes,
                   PeerId source) override {
    finish(req, status, bytes, source);
  }
  void fail_peer(PeerId peer, const Status& why) override;
  bool abort_unmatched(RequestId id, const Status& why) override;
  bool device_memory_ok(PeerId peer) const override;
  bool has_unexpected(PeerId peer, Tag tag) const override {
    return matcher_.has_unexpected(peer, tag);
  }

 private:
  struct Device {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<SendQueue> queue;
    bool attached = false;
    bool cuda_memory = false;  // Capabilities::cuda_memory, read at init()
    bool pump_scheduled = false;
  };

  Device* device_for(std::string_view address, std::string_view* rest, Status* error);
  Connection& add_connection(Device& dev, std::unique_ptr<Endpoint> ep, bool initiator);
  void pump(Device& dev);
  void watchdog();
  Connection* established(PeerId peer, Status* error);
  void serve_accepts();
  // Takes ownership of a device request; false (and completed) when the Core is closed.
  Request* adopt_device(std::unique_ptr<Request> req);

  std::unique_ptr<MessageTrace> trace_;  // first: outlives everything that may finish a request
  ProgressEngine& engine_;
  const TransportConfig config_;
  const HelloInfo local_;
  std::optional<std::string> auth_token_;
  std::vector<Device> devices_;
  std::map<PeerId, std::unique_ptr<Connection>> conns_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  NodeRecycler<decltype(requests_), 256> request_nodes_;  // erased nodes, reused (no allocation)
  Matcher matcher_;
  PeerId next_peer_ = 1;
  bool closed_ = false;
  ProgressEngine::TimerId watchdog_timer_ = 0;

  std::uint64_t next_waiter_ = 1;
  std::map<std::uint64_t, PeerFn> connect_waiters_;       // connect() not yet connected
  std::map<PeerId, std::uint64_t> handshaking_connects_;  // connection -> its waiter
  struct AcceptWaiter {
    PeerFn done;
    ProgressEngine::TimerId timer;
  };
  std::map<std::uint64_t, AcceptWaiter> accept_waiters_;
  std::vector<PeerId> accepted_;  // established incoming peers not yet handed out
  // Peers that failed after their handshake. Their Connection is freed (a server that accepts
  // short-lived peers for weeks must not keep one per peer ever seen: bench/soak.sh); requests
  // later posted to the id complete with the terminal status kept here. Bounded: past
  // kMaxDeadPeers the oldest are forgotten (their id is then "unknown").
  struct DeadPeer {
    std::string name;
    Status status;
  };
  static constexpr std::size_t kMaxDeadPeers = 4096;
  std::unordered_map<PeerId, DeadPeer> dead_;
  std::deque<PeerId> dead_order_;
  void bury(PeerId peer);
  // Messages that arrived whole from peers whose connection ended (see ArrivedMessages).
  static constexpr std::size_t kMaxArrivedBytes = std::size_t{256} << 20;
  ArrivedMessages arrived_{kMaxArrivedBytes};
  // A receive matched a message kept in arrived_: completes it from there.
  void deliver_arrived(Request* r, const Matcher::Message& m);
  std::unique_ptr<CudaPath> cuda_;  // last: its destructor may still cancel a timer
};

}  // namespace tictac::transport
