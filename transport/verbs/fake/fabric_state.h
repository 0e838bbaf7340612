// Internal to the fake fabric: its objects and the state behind FakeFabric. Not included from
// outside transport/verbs/fake/.
//
// Every object embeds the libibverbs struct it hands out inside a Handle, first member, so an
// ibv_* pointer converts back to its object (Handle is standard-layout). All fields are guarded
// by FabricState::mu; every method whose name ends in _locked expects it held.
#pragma once

#include <infiniband/verbs.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/check.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac::verbs::fake {

struct FabricState;

inline constexpr std::uint64_t kHandleMagic = 0x7469637461636662ULL;  // "tictacfb"

template <typename Ibv, typename Owner>
struct Handle {
  Ibv ibv{};  // first: the pointer handed out is &ibv
  std::uint64_t magic = kHandleMagic;
  Owner* owner = nullptr;
  ~Handle() { magic = 0; }  // best effort: a stale pointer then fails the check below
};

// The object behind an ibv_* pointer handed out by a fake table.
template <typename Owner, typename Ibv>
Owner* owner_of(Ibv* p) {
  TICTAC_CHECK(p != nullptr, "null verbs object passed to the fake fabric");
  auto* h = reinterpret_cast<Handle<Ibv, Owner>*>(p);
  TICTAC_CHECK(h->magic == kHandleMagic,
               "verbs object not created by a fake fabric (a real-library object passed to a "
               "fake table?)");
  return h->owner;
}

struct Port {
  PortSpec spec;
  ibv_port_state state = IBV_PORT_ACTIVE;
  std::uint16_t lid = 0;
  std::vector<ibv_gid> gids;  // gid table; unused entries are zero
};

struct Device {
  Handle<ibv_device, Device> h;
  FabricState* fabric = nullptr;
  std::string name;
  std::uint64_t guid = 0;  // host order
  std::vector<Port> ports;  // ports[0] is port 1
};

struct Cq;
struct Qp;

struct Context {
  Handle<ibv_context, Context> h;
  Device* device = nullptr;
  std::deque<ibv_async_event> events;
  int async_waiters = 0;
  int pds = 0, cqs = 0, channels = 0, qps = 0;
};

struct Pd {
  Handle<ibv_pd, Pd> h;
  Context* ctx = nullptr;
  int mrs = 0, qps = 0;
};

struct Mr {
  Handle<ibv_mr, Mr> h;
  Pd* pd = nullptr;
  std::uint64_t iova = 0;  // address space used by sges and remote_addr
  char* base = nullptr;    // host memory behind iova
  std::size_t length = 0;
  int access = 0;
  bool revoked = false;  // revoke_next_remote_mr(): no remote access any more
  int dmabuf_fd = -1;    // reg_dmabuf_mr: the caller's fd (not owned), -1 for reg_mr regions
  std::uint64_t dmabuf_offset = 0;
};

struct Channel {
  Handle<ibv_comp_channel, Channel> h;
  Context* ctx = nullptr;
  std::deque<Cq*> events;
  int waiters = 0;
  int cqs = 0;
};

struct Completion {
  ibv_wc wc{};
  bool send = false;       // from the send queue (retires send slots when polled)
  std::uint64_t seq = 0;   // the WR's sequence number on its queue
};

struct Cq {
  Handle<ibv_cq, Cq> h;
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  int capacity = 0;
  std::deque<Completion> entries;
  bool armed = false;
  bool solicited_only = false;
  bool overrun = false;
  int qps = 0;
  unsigned comp_events_unacked = 0;
  unsigned async_events_unacked = 0;
};

struct SendWr {
  std::uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  bool signaled = false;
  bool solicited = false;
  __be32 imm_data = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::vector<ibv_sge> sges;          // empty when inline
  std::vector<char> inline_data;      // the payload captured at post time (IBV_SEND_INLINE)
  bool is_inline = false;
  std::uint64_t length = 0;
  std::uint64_t seq = 0;
  int rnr_attempts = 0;
  int retry_attempts = 0;
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  std::vector<ibv_sge> sges;
  std::uint64_t seq = 0;
};

struct Qp {
  Handle<ibv_qp, Qp> h;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  ibv_qp_attr attr{};  // attributes set so far (qp_state mirrors h.ibv.state)
  std::deque<SendWr> sq;  // posted, not yet executed
  std::deque<RecvWr> rq;  // posted, not yet consumed
  std::uint64_t send_posted = 0, send_retired = 0;
  std::uint64_t recv_posted = 0, recv_retired = 0;
  bool comm_established = false;
  // Faults.
  int delay_steps = 0;
  bool dropped = false;
  std::optional<ibv_wc_status> fail_next;
  unsigned async_events_unacked = 0;

  std::uint32_t num() const { return h.ibv.qp_num; }
  ibv_qp_state state() const { return h.ibv.state; }
};

struct FabricState {
  explicit FabricState(FabricOptions opts);
  ~FabricState();

  FabricOptions options;
  mutable std::mutex mu;
  std::condition_variable events_cv;    // async and completion-channel events
  std::condition_variable executor_cv;  // thread mode: work posted
  bool stopping = false;
  std::thread executor;

  std::vector<std::unique_ptr<Device>> devices;
  std::unordered_map<Context*, std::unique_ptr<Context>> contexts;
  std::unordered_map<Pd*, std::unique_ptr<Pd>> pds;
  std::unordered_map<std::uint32_t, std::unique_ptr<Mr>> mrs;  // by key (lkey == rkey)
  std::unordered_map<Channel*, std::unique_ptr<Channel>> channels;
  std::unordered_map<Cq*, std::unique_ptr<Cq>> cqs;
  std::map<std::uint32_t, std::unique_ptr<Qp>> qps;  // by QP number: steps visit in order
  std::uint32_t next_qp_num = 0x000101;
  std::uint32_t next_key = 1;
  std::uint32_t next_handle = 1;
  std::uint64_t locked_bytes = 0;
  RegistrationStats registrations;  // reg_mr counters (registration_stats())
  std::size_t dmabuf_closed_before_dereg = 0;
  WriteTraffic traffic;
  bool corrupt_next_write = false;
  bool revoke_next_write = false;

  // resources.cc
  ibv_context* open_device(Device* dev);
  int close_device(Context* ctx);
  int query_device(Context* ctx, ibv_device_attr* attr);
  int query_port(Context* ctx, std::uint8_t port, ibv_port_attr* attr);
  int query_gid(Context* ctx, std::uint8_t port, int index, ibv_gid* gid);
  ibv_pd* alloc_pd(Context* ctx);
  int dealloc_pd(Pd* pd);
  ibv_mr* reg_mr(Pd* pd, void* addr, std::size_t length, std::uint64_t iova, int access);
  int dereg_mr(Mr* mr);
  ibv_mr* reg_dmabuf_mr(Pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova,
                        int fd, int access);
  ibv_comp_channel* create_comp_channel(Context* ctx);
  int destroy_comp_channel(Channel* ch);
  ibv_cq* create_cq(Context* ctx, int cqe, void* cq_context, Channel* ch, int comp_vector);
  int destroy_cq(Cq* cq);

  // qp.cc
  ibv_qp* create_qp(Pd* pd, ibv_qp_init_attr* init);
  int modify_qp(Qp* qp, const ibv_qp_attr* attr, int mask);
  int query_qp(Qp* qp, ibv_qp_attr* attr, ibv_qp_init_attr* init);
  int destroy_qp(Qp* qp);
  // Moves the QP to ERR and flushes every outstanding WR (no-op when already in ERR).
  void error_qp_locked(Qp* qp);
  // Drops queued WRs and their completions without completing them (transition to RESET).
  void reset_qp_locked(Qp* qp);

  // events.cc
  void push_completion_locked(Cq* cq, const Completion& c, Qp* qp, bool solicited);
  void post_async_locked(Context* ctx, const ibv_async_event& ev);
  int get_async_event(Context* ctx, ibv_async_event* ev);
  void ack_async_event(const ibv_async_event* ev);
  int req_notify_cq(Cq* cq, int solicited_only);
  int get_cq_event(Channel* ch, ibv_cq** cq, void** cq_context);
  void ack_cq_events(Cq* cq, unsigned n);
  // Removes unread async events about a QP or CQ that is being destroyed.
  void drop_pending_events_locked(Context* ctx, const void* element);

  // work.cc
  int post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int poll_cq(Cq* cq, int num_entries, ibv_wc* wc);
  std::size_t step_locked();
  enum class Outcome { finished, waiting };
  struct LocalSpan {
    char* ptr;
    std::size_t len;
  };
  Outcome execute_head_locked(Qp* qp);
  Outcome rnr_wait_locked(Qp* qp);
  Qp* peer_locked(Qp* qp);
  bool resolve_local_locked(const Pd* pd, const std::vector<ibv_sge>& sges, int need_access,
                            std::vector<LocalSpan>& out);
  char* resolve_remote_locked(const Qp* target, std::uint32_t rkey, std::uint64_t addr,
                              std::uint64_t len, int need);
  void fail_head_locked(Qp* qp, ibv_wc_status status);
  void complete_head_locked(Qp* qp, std::uint32_t byte_len);
  void deliver_recv_locked(Qp* target, const SendWr& wr, ibv_wc_opcode opcode);
  void remote_access_error_locked(Qp* qp, Qp* target);
  bool has_pending_work_locked() const;
  void executor_loop();

  // Lookups (nullptr when absent).
  Qp* find_qp_locked(std::uint32_t num);
  Device* find_device_locked(std::string_view name);
  const Port* port_of_locked(const Qp* qp) const;
};

// The table whose entries forward to `state` (entry_points.cc).
IbvApi make_fake_api(FabricState* state);

// Which member of ibv_async_event::element an event type uses.
enum class EventElement { qp, cq, port, device };
EventElement element_of(ibv_event_type type);

// Completion with the fields every completion shares.
ibv_wc make_wc(const Qp* qp, std::uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode);
// The completion opcode for a send WR opcode.
ibv_wc_opcode wc_opcode_for(ibv_wr_opcode op);

}  // namespace tictac::verbs::fake
