// FakeFabric: an in-process RDMA fabric with reliable-connected (RC) semantics, behind the same
// IbvApi table as the real libibverbs, so verbs data-path code runs unchanged in tests.
//
// What it models (docs/verbs.md has the full list and what only hardware can check)
// - Devices with ports (state, MTU, LID, GID table, link layer InfiniBand or Ethernet/RoCE),
//   contexts with an async-event fd, PDs, MRs (lkey/rkey, access flags, iova), CQs shared by
//   several QPs, completion channels, and RC QPs with the RESET->INIT->RTR->RTS (and ERR) state
//   machine; wrong transitions, missing/extra attributes and out-of-range values fail with
//   EINVAL as the kernel's checks do.
// - A QP reaches its peer by (fabric-wide QP number, LID or GID) from its RTR attributes; the
//   peer must point back at it. Unreachable peers exhaust retry_cnt -> IBV_WC_RETRY_EXC_ERR.
// - Posted send WRs execute in order per QP: RDMA WRITE/READ (bounds, rkey, PD and access checks;
//   failure -> IBV_WC_REM_ACCESS_ERR on the sender and IBV_EVENT_QP_ACCESS_ERR on the target),
//   WRITE_WITH_IMM and SEND (consume one posted receive; none -> RNR retries, rnr_retry 7 means
//   forever, then IBV_WC_RNR_RETRY_EXC_ERR), receive length checks (IBV_WC_LOC_LEN_ERR).
// - reg_dmabuf_mr needs an open fd (else EBADF) and records fd and offset; it registers the
//   host memory at `iova`, because the tests' scripted CUDA table hands out host memory as
//   device memory and callers pass the device pointer as iova. dmabuf_fds() lists live ones;
//   dmabuf_closed_before_dereg() counts MRs whose fd was closed before dereg_mr.
// - Counters and faults for RDMA WRITE: write_traffic(), corrupt_next_write_rkey(),
//   revoke_next_remote_mr() (zero-copy data paths are checked with these).
// - Completions: signalled per WR or sq_sig_all; error completions always. A send-queue slot is
//   freed only when a later completion of that QP is polled, as drivers do, so posting beyond
//   max_send_wr without signalling fails with ENOMEM. After an error the QP is in ERR and every
//   outstanding WR (send and receive) completes with IBV_WC_WR_FLUSH_ERR.
//
// Execution (decided at construction, FabricOptions::execution)
// - on_poll (default, deterministic): nothing executes when posted. One progress step runs at
//   the start of every poll_cq on any CQ of the fabric, and whenever progress() is called. A step
//   visits the QPs in QP-number order and lets each execute the WRs that were queued when the
//   step began, stopping at the first WR that must wait (RNR or retry); each wait consumes one
//   retry attempt. Completion channels only signal when someone drives progress.
// - thread: an executor thread runs steps whenever work is posted; when only waiting WRs are
//   left it runs one step per retry_interval. poll_cq does not execute anything.
//
// Thread safety: every table call and every method here is thread-safe; one mutex per fabric
// serialises them (data copies happen under it). get_async_event and get_cq_event block on a
// condition variable (not holding the mutex) unless the context's async_fd / the channel's fd
// was made O_NONBLOCK, in which case they fail with EAGAIN, like the real library. The fds are
// eventfds that are readable exactly while an event is pending, so poll()/epoll work on them.
//
// Ownership and lifetime: the fabric owns every object created through its table. It must
// outlive every table copy and every object; destroying it frees whatever is left (tests check
// live_objects() for leaks). Destroy calls on objects still in use fail with EBUSY (the real
// library would block on unacknowledged events; the fake reports the bug instead).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs::fake {

enum class Execution { on_poll, thread };

struct PortSpec {
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;  // or IBV_LINK_LAYER_ETHERNET (RoCE v2)
  ibv_mtu max_mtu = IBV_MTU_4096;
  ibv_port_state state = IBV_PORT_ACTIVE;
};

struct DeviceSpec {
  std::string name = "fake0";
  std::vector<PortSpec> ports = {PortSpec{}};
};

struct FabricOptions {
  std::vector<DeviceSpec> devices = {DeviceSpec{}};
  Execution execution = Execution::on_poll;
  // thread mode: pause between steps while only waiting (RNR / retry / delayed) WRs remain.
  std::chrono::microseconds retry_interval{100};
  // reg_mr fails with ENOMEM once this many bytes are registered (models RLIMIT_MEMLOCK).
  std::uint64_t max_locked_bytes = UINT64_MAX;
  // Device limits, reported by query_device and enforced by create_qp / create_cq / post_*.
  int max_qp_wr = 16384;
  int max_sge = 16;
  int max_cqe = 65536;
  std::uint32_t max_inline_data = 256;
  std::uint8_t max_qp_rd_atom = 16;
};

// RDMA WRITE traffic executed successfully since the fabric was made (all QPs).
struct WriteTraffic {
  std::uint64_t writes = 0;            // IBV_WR_RDMA_WRITE (no immediate)
  std::uint64_t write_bytes = 0;
  std::uint64_t writes_with_imm = 0;   // IBV_WR_RDMA_WRITE_WITH_IMM
  std::uint64_t write_with_imm_bytes = 0;
};

// Memory registration counters since the fabric was made (reg_mr and reg_dmabuf_mr): tests
// check that a peer refused before allocation cost no registration.
struct RegistrationStats {
  std::uint64_t mrs_registered = 0;     // successful registrations, ever
  std::uint64_t bytes_registered = 0;   // their lengths summed, ever
  std::uint64_t peak_locked_bytes = 0;  // the most bytes registered at one time
};

struct FabricState;  // internal (fabric_state.h)

class FakeFabric {
 public:
  explicit FakeFabric(FabricOptions options = {});
  ~FakeFabric();
  FakeFabric(const FakeFabric&) = delete;
  FakeFabric& operator=(const FakeFabric&) = delete;

  // The function table; provider "fake fabric". Valid while this fabric lives.
  IbvApi api();

  // One progress step (see Execution). Returns how many work requests finished in it
  // (executed or failed). Usable in both modes.
  std::size_t progress();
  // Steps until a step finishes nothing, at most max_steps; returns the WRs finished.
  std::size_t run_until_idle(std::size_t max_steps = 1000);

  // Fault injection. Each names a QP by its fabric-wide number (ibv_qp::qp_num) or a device by
  // name, takes effect from the next step, and returns invalid_argument for an unknown name.
  // The QP's send queue executes nothing for the next `steps` steps.
  Status delay(std::uint32_t qp_num, int steps);
  // Packets from and to this QP are lost: its own sends and its peer's sends exhaust retry_cnt
  // and complete with IBV_WC_RETRY_EXC_ERR. restore_connection() undoes it.
  Status drop_connection(std::uint32_t qp_num);
  Status restore_connection(std::uint32_t qp_num);
  // The next WR the QP executes completes with `status` (e.g. IBV_WC_RETRY_EXC_ERR for
  // "transport retry exceeded") and the QP goes to ERR.
  Status fail_next(std::uint32_t qp_num, ibv_wc_status status);
  // The QP goes to ERR (flushing) and its context gets IBV_EVENT_QP_FATAL.
  Status qp_fatal(std::uint32_t qp_num);
  // Changes a port's state; contexts on the device get IBV_EVENT_PORT_ERR when an ACTIVE port
  // goes down and IBV_EVENT_PORT_ACTIVE when it comes back. QPs on a port that is not ACTIVE
  // cannot reach or be reached (retry exceeded).
  Status set_port_state(std::string_view device, std::uint8_t port, ibv_port_state state);

  // The next RDMA WRITE without immediate of nonzero length that executes (on any QP) uses a
  // corrupted rkey: the writer gets IBV_WC_REM_ACCESS_ERR, the target QP goes to ERR with
  // IBV_EVENT_QP_ACCESS_ERR (as for any R_Key violation).
  void corrupt_next_write_rkey();
  // The memory region that the next such RDMA WRITE targets is revoked just before it executes
  // (as if its owner had deregistered it): same errors. The owner's dereg_mr still works.
  void revoke_next_remote_mr();
  WriteTraffic write_traffic() const;
  RegistrationStats registration_stats() const;
  // Bytes registered now (live MRs' lengths summed).
  std::uint64_t locked_bytes() const;
  // The file descriptors behind live reg_dmabuf_mr regions (the fake does not own them).
  std::vector<int> dmabuf_fds() const;
  // dma-buf MRs whose fd was already closed when dereg_mr ran (a lifetime bug in the caller).
  std::size_t dmabuf_closed_before_dereg() const;

  // Objects created through the table and not yet destroyed (contexts, PDs, MRs, CQs,
  // channels, QPs). Zero when a test cleaned up.
  std::size_t live_objects() const;

 private:
  std::unique_ptr<FabricState> state_;
};

}  // namespace tictac::verbs::fake
