// Harness for the verbs backend tests: two backends ("A" and "B", like two processes) on one
// fake fabric (thread execution mode), each on its own manual-mode ProgressEngine driven by the
// test thread, with recording sinks; and a RoguePeer that speaks the side-channel exchange but
// sets up its QPs by hand, to make the backend meet a misbehaving or broken peer.
// Not thread-safe: one test thread (the rogue's side channel runs on a helper thread it joins).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/auth/handshake.h"
#include "transport/backend.h"
#include "transport/verbs/backend/config.h"
#include "transport/verbs/backend/endpoint.h"
#include "transport/verbs/backend/factory.h"
#include "transport/verbs/backend/queue_pair.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac::verbs::testing {

fake::FabricOptions threaded_fabric(std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND);

// Records every sink call; payloads land in per-frame buffers.
class RecordingSink final : public transport::EndpointSink {
 public:
  struct Frame {
    transport::wire::Header header;
    std::vector<std::byte> payload;
  };
  Result<transport::Destination> on_header(const transport::wire::Header& header) override;
  void on_frame(const transport::wire::Header& header) override;
  void on_sent(std::uint64_t cookie) override;
  void on_writable() override;
  void on_failed(const Status& status) override;

  std::vector<Frame> frames;
  std::vector<std::uint64_t> sent;
  int writable = 0;
  std::vector<Status> failures;
  int calls_after_failure = 0;  // must stay 0
  Status refuse_headers;        // non-ok: on_header returns it
  std::byte* place_data = nullptr;  // set: DATA lands at place_data + offset (a zero-copy export)

 private:
  void note_call();
  std::vector<std::byte> landing_;
};

// A DATA frame header of `length` bytes (a message of exactly that size).
transport::wire::Header data_header(std::uint32_t length, std::uint64_t msg_id);
std::vector<std::byte> bytes_for(std::size_t n, std::uint64_t seed);

struct Side {
  std::unique_ptr<transport::ProgressEngine> engine;
  std::unique_ptr<transport::Backend> backend;
  std::unique_ptr<transport::Endpoint> endpoint;
  RecordingSink sink;
  VerbsEndpoint* verbs() const { return dynamic_cast<VerbsEndpoint*>(endpoint.get()); }
};

class BackendPair {
 public:
  BackendPair(const IbvApi& api, const VerbsConfig& a, const VerbsConfig& b);
  ~BackendPair();
  bool attached() const { return attached_; }
  // A connects to B's listener; both endpoints started with their sinks.
  bool connect();
  // A connects to `address` ("127.0.0.1:<port>", e.g. a RoguePeer); A's endpoint started.
  // Returns the connect's status.
  Status connect_a_to(const std::string& address);
  // Drives both loops until pred() holds (true) or a generous bound against hangs passes.
  bool run_until(const std::function<bool()>& pred);
  // Drives both loops for a few iterations (to show that nothing more happens).
  void run_a_little();
  // Closes endpoints, shuts the backends down and destroys them.
  void close_all();

  Side a, b;

 private:
  bool attached_ = false;
};

// Runs transport/auth's handshake on a blocking socket (the verbs side channel's first step).
// Returns "" when it passed, else the reason; bytes received after its last message are
// appended to `*leftover`.
std::string blocking_side_auth(int fd, auth::Role role, const std::optional<std::string>& token,
                               std::vector<std::byte>* leftover);
// A blocking loopback connection to "127.0.0.1:<port>" (-1 on failure).
int connect_blocking(const std::string& address);

// A peer that performs the side-channel exchange with real QPs but lets the test break things.
struct RogueOptions {
  bool advertise_bad_rkey = false;  // our WRITEs into its ring fail with a remote access error
  bool post_data_receives = true;   // false: our WRITE WITH IMMEDIATE meets RNR
  std::uint16_t qp_info_version = kQpInfoVersion;  // what its QpInfo says it speaks
};

class RoguePeer {
 public:
  RoguePeer(const IbvApi& api, RogueOptions options);
  ~RoguePeer();
  // Listens on 127.0.0.1 and serves one exchange on a helper thread; returns "127.0.0.1:<port>".
  std::string listen();
  // Waits for the exchange to finish; false if it failed (the reason is in error()).
  bool join();
  const std::string& error() const { return error_; }
  const QpInfo& peer_info() const { return peer_; }  // the backend's side
  std::uint32_t data_qp_num() const { return data_.num(); }
  // RDMA WRITE WITH IMMEDIATE of `bytes` (copied into its own registered buffer) into slot
  // `slot` of the backend's ring, with immediate `imm`; waits for its completion.
  ibv_wc_status write_fragment(const std::vector<std::byte>& bytes, std::uint32_t slot, std::uint32_t imm);

 private:
  void serve();

  IbvApi api_;
  RogueOptions options_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* ring_mr_ = nullptr;
  ibv_mr* out_mr_ = nullptr;
  std::vector<std::byte> ring_;
  std::vector<std::byte> out_;
  QueuePair data_;
  QueuePair ctrl_;
  QpInfo peer_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::string error_;
};

}  // namespace tictac::verbs::testing
