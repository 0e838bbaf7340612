// VerbsEndpoint: one peer over RDMA verbs (internal to the verbs backend).
//
// Per peer two RC queue pairs on the device's shared CQ:
// - the data QP carries frames. Each frame (wire header + payload) is cut into fragments of at
//   most the peer's slot size; a fragment is copied into a registered staging slot and written
//   with one RDMA WRITE WITH IMMEDIATE into the matching slot of the peer's registered receive
//   ring. The immediate is the fragment's sequence number (mod 2^32): it names the slot
//   (seq % ring slots) and lets the receiver check ordering. Slot layout: kSlotHeaderRoom bytes
//   for the header (first fragment of a frame only) + slot_bytes of payload, so the chunks the
//   core cuts (a power of two) fill whole slots. The receiver decodes the header, asks the sink
//   for the Destination, copies each fragment's payload there and calls on_frame after the last.
// - the control QP carries ring credits: a 0-byte SEND WITH IMMEDIATE whose immediate is the
//   number of slots the receiver freed (coalesced per loop step). It never waits behind frames.
// Flow control: a fragment goes out only while the peer has a free slot (credits) and a staging
// slot is free (its earlier send completed). has_capacity() is false while a frame is still
// being cut; so at most one frame waits inside the endpoint, and priority stays with the core.
// Work requests are posted in one chain per loop step; every TICTAC_VERBS_SIGNAL_EVERY-th and
// the last of each chain is signalled, so every posted request is covered by a polled
// completion (send-queue depth = 2 x staging slots: a zero-copy chunk is two requests).
// on_sent(cookie) fires when the completion covering a frame's last fragment is polled. Receives are pre-posted (a full ring on the data
// QP, the peer's credit window on the control QP) and replenished one per completion.
//
// Zero-copy (TICTAC_VERBS_ZERO_COPY, messages of at least TICTAC_VERBS_ZERO_COPY_MIN_BYTES):
// export_destination() registers the receive buffer through the RegistrationCache and the READY
// that follows carries (address, rkey, length) in its ring slot (slot.h). The sender then posts
// each DATA chunk as a plain RDMA WRITE from its own buffer (registered once per message) to
// address + offset, followed by a header-only fragment (slot kind `written`) whose WRITE WITH
// IMMEDIATE tells the receiver, in RC order, that the chunk landed: no copy on either side.
// Registrations are held per transfer: the receiver's until the message's last DATA or its ABORT
// was delivered, the sender's until its last chunk completed; both go with the endpoint.
//
// Failure: the first error completion, a fatal async event on either QP, a protocol violation
// or the peer closing the TCP side channel fails the endpoint once, with a Status that names the
// peer's QP and the verbs status; every queue pair is then destroyed (discarding flushed work),
// nothing stays pending, and no sink call follows on_failed.
// Threading: loop-thread only (backend.h). Sink calls are never made inside a core call into the
// endpoint: those are deferred to a later step of the loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/backend.h"
#include "transport/progress_engine.h"
#include "transport/scaffold/lifetime.h"
#include "transport/verbs/backend/device.h"
#include "transport/verbs/backend/queue_pair.h"
#include "transport/verbs/backend/slot.h"

namespace tictac::verbs {

class VerbsEndpoint final : public transport::Endpoint, public DeviceClient {
 public:
  // Step 1: both QPs in INIT, the receive ring registered, the data receives posted.
  static Result<std::unique_ptr<VerbsEndpoint>> create(std::shared_ptr<Device> device);
  ~VerbsEndpoint() override;
  VerbsEndpoint(const VerbsEndpoint&) = delete;
  VerbsEndpoint& operator=(const VerbsEndpoint&) = delete;

  // What the peer needs to connect to us.
  const QpInfo& local_info() const { return local_; }
  // Step 2: the peer's info: the staging ring, the control receives, RTR and RTS.
  Status connect(const QpInfo& peer);
  // Step 3: takes ownership of the side-channel socket (watched for the peer's disconnect) and
  // names the endpoint after both of its addresses.
  Status activate(int side_fd, const std::string& local_address, const std::string& peer_address);
  // A failure before start() (the peer vanished during the handshake ...), or ok.
  const Status& early_failure() const { return failure_; }

  // --- transport::Endpoint ---
  void start(transport::EndpointSink* sink) override;
  bool has_capacity() const override;
  Status post(const transport::wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  bool export_destination(std::uint64_t msg_id, std::byte* data, std::uint64_t length) override;
  void close() override;
  std::string describe() const override { return desc_; }

  // --- DeviceClient ---
  void on_completion(const ibv_wc& wc) override;
  void on_async_error(const Status& status) override;

  // Introspection for tests.
  std::uint32_t data_qp_num() const { return data_qp_.num(); }
  std::uint32_t ctrl_qp_num() const { return ctrl_qp_.num(); }
  bool closed() const { return closed_; }
  // Frames posted and not yet reported sent (including one still being cut).
  std::size_t frames_pending() const { return in_flight_.size() + (cutting_ ? 1 : 0); }
  // Zero-copy destinations we exported / the peer exported to us, not yet released.
  std::size_t exports_live() const { return exports_.size(); }
  std::size_t remote_exports_live() const { return remote_exports_.size(); }

 private:
  struct OutFrame {
    transport::wire::HeaderBytes header;
    const std::byte* payload = nullptr;
    std::uint32_t length = 0;
    std::uint64_t cookie = 0;
    std::uint32_t cut = 0;  // payload bytes already copied into staging
    bool header_cut = false;
    SlotKind kind = SlotKind::frame;
    DestinationExport target;  // ready_export: ours; written: where the payload goes
    std::shared_ptr<const Registration> source;  // written: the payload's registration
  };
  struct Sent {
    std::uint64_t last_seq;
    std::uint64_t cookie;
    std::shared_ptr<const Registration> source;  // a zero-copy payload, held until completion
  };
  struct PendingWr {
    std::uint64_t seq;
    std::uintptr_t local;
    std::uint32_t length;
    std::uint64_t remote;
    bool plain_write = false;  // zero-copy RDMA WRITE (lkey/rkey below), else a ring fragment
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
  };
  // A destination we exported (receiver side).
  struct LocalExport {
    std::byte* data = nullptr;
    std::uint64_t length = 0;
    std::shared_ptr<const Registration> mr;
    bool advertised = false;  // its READY was cut
  };
  // A destination the peer exported (sender side).
  struct RemoteExport {
    DestinationExport target;
    std::shared_ptr<const Registration> source;  // our payload's, once the first chunk went
  };
  struct Arrival {
    std::uint64_t seq;
    std::uint32_t bytes;
  };
  using Buffer = std::unique_ptr<std::byte, void (*)(void*)>;

  explicit VerbsEndpoint(std::shared_ptr<Device> device);
  Status init();

  // Send side (endpoint_send.cc).
  bool slot_free() const;
  void cut();
  void schedule_flush();
  void flush();
  void on_send_done(std::uint64_t value);
  void maybe_writable();
  // Zero-copy (endpoint_zero_copy.cc).
  // Decides how a frame travels: READY with our export, DATA written into the peer's export,
  // or the ring. A non-ok Status (the peer's export does not fit) makes the endpoint unusable.
  Status prepare_frame(const transport::wire::Header& header, OutFrame& f);
  void cut_zero_copy(std::uint64_t seq, std::uint64_t remote_slot, std::byte* slot, OutFrame& f);
  // Checks the first fragment of a ready_export or written frame against our state and records
  // a peer's export; a protocol_error Status when the peer broke the rules.
  Status accept_special(SlotKind kind, const transport::wire::Header& h, const std::byte* slot,
                        std::uint32_t bytes);
  // Where a `written` frame's payload already is.
  std::byte* written_at(const transport::wire::Header& h) const;
  // Drops our export of h.msg_id once its last DATA or its ABORT is delivered.
  void release_export(const transport::wire::Header& h);
  // Receive side (endpoint_recv.cc).
  void on_fragment(const ibv_wc& wc);
  void deliver(const Arrival& a);
  void on_credit(const ibv_wc& wc);
  Status post_recvs(QueuePair& qp, WrKind kind, std::uint32_t n);
  void schedule_credit();
  void send_credit();
  // Failure and teardown (endpoint.cc).
  void on_side_channel(std::uint32_t events);
  void fail(const Status& status);
  void teardown();
  Status protocol_error(const std::string& what) const;
  std::string peer_qp(std::uint32_t qpn) const;

  std::shared_ptr<Device> dev_;  // first: outlives every member below
  const IbvApi& api_;
  std::uint32_t id_ = 0;
  std::uint32_t cq_reserved_ = 0;
  std::string desc_;
  transport::EndpointSink* sink_ = nullptr;
  bool started_ = false;
  bool closed_ = false;
  Status failure_;
  transport::scaffold::LoopLifetime lifetime_;  // deferred work and sink callbacks check it
  int side_fd_ = -1;

  QueuePair data_qp_;
  QueuePair ctrl_qp_;
  QpInfo local_;
  QpInfo peer_;
  bool connected_ = false;

  // Receive ring (ours, the peer writes into it) and staging ring (we write from it).
  Buffer ring_{nullptr, &std::free};
  Buffer staging_{nullptr, &std::free};
  std::shared_ptr<const Registration> ring_mr_;
  std::shared_ptr<const Registration> staging_mr_;
  std::uint32_t ring_stride_ = 0;     // kSlotHeaderRoom + our slot_bytes
  std::uint32_t peer_stride_ = 0;     // kSlotHeaderRoom + the peer's slot_bytes
  std::uint32_t send_window_ = 0;     // staging slots = fragments in flight at most

  // Send state: sequence numbers of fragments.
  std::uint64_t next_seq_ = 0;    // next fragment to cut
  std::uint64_t credited_ = 0;    // fragments whose ring slot the peer has freed
  std::uint64_t completed_ = 0;   // fragments whose send completion was polled
  std::optional<OutFrame> cutting_;
  std::deque<Sent> in_flight_;
  std::vector<PendingWr> pending_wrs_;
  std::uint32_t since_signal_ = 0;
  bool flush_scheduled_ = false;
  // schedule_flush() / schedule_credit() as deferred calls registered once (no allocation each).
  transport::ProgressEngine::DeferredCallId flush_call_ = 0;
  transport::ProgressEngine::DeferredCallId credit_call_ = 0;
  mutable bool want_writable_ = false;

  // Receive state.
  std::uint64_t recv_seq_ = 0;
  std::deque<Arrival> early_;  // fragments that landed before start()
  bool in_frame_ = false;
  transport::wire::Header cur_;
  transport::Destination dest_;
  std::uint32_t got_ = 0;
  std::uint32_t credits_owed_ = 0;
  std::uint32_t ctrl_in_flight_ = 0;
  std::uint32_t ctrl_window_ = 0;
  bool credit_scheduled_ = false;

  // Zero-copy state, by the message id both sides use (the sender's).
  std::unordered_map<std::uint64_t, LocalExport> exports_;
  std::unordered_map<std::uint64_t, RemoteExport> remote_exports_;
};

}  // namespace tictac::verbs
