// Fake fabric: the IbvApi entries. Each converts the ibv_* pointers back to fake objects and
// forwards to the FabricState that owns them; the state does the locking.
#include <cerrno>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

FabricState* fabric(ibv_context* c) { return owner_of<Context>(c)->device->fabric; }
FabricState* fabric(ibv_pd* p) { return owner_of<Pd>(p)->ctx->device->fabric; }
FabricState* fabric(ibv_mr* m) { return owner_of<Mr>(m)->pd->ctx->device->fabric; }
FabricState* fabric(ibv_cq* c) { return owner_of<Cq>(c)->ctx->device->fabric; }
FabricState* fabric(ibv_comp_channel* c) { return owner_of<Channel>(c)->ctx->device->fabric; }
FabricState* fabric(ibv_qp* q) { return owner_of<Qp>(q)->ctx->device->fabric; }

void free_device_list(ibv_device** list) { delete[] list; }
const char* get_device_name(ibv_device* d) { return owner_of<Device>(d)->name.c_str(); }
__be64 get_device_guid(ibv_device* d) { return htobe64(owner_of<Device>(d)->guid); }
ibv_context* open_device(ibv_device* d) {
  Device* dev = owner_of<Device>(d);
  return dev->fabric->open_device(dev);
}
int close_device(ibv_context* c) { return fabric(c)->close_device(owner_of<Context>(c)); }
int query_device(ibv_context* c, ibv_device_attr* a) {
  return fabric(c)->query_device(owner_of<Context>(c), a);
}
int query_port(ibv_context* c, std::uint8_t port, ibv_port_attr* a) {
  return fabric(c)->query_port(owner_of<Context>(c), port, a);
}
int query_gid(ibv_context* c, std::uint8_t port, int index, ibv_gid* gid) {
  return fabric(c)->query_gid(owner_of<Context>(c), port, index, gid);
}
ibv_pd* alloc_pd(ibv_context* c) { return fabric(c)->alloc_pd(owner_of<Context>(c)); }
int dealloc_pd(ibv_pd* p) { return fabric(p)->dealloc_pd(owner_of<Pd>(p)); }
ibv_mr* reg_mr(ibv_pd* p, void* addr, std::size_t length, int access) {
  return fabric(p)->reg_mr(owner_of<Pd>(p), addr, length, reinterpret_cast<std::uintptr_t>(addr),
                           access);
}
ibv_mr* reg_mr_iova2(ibv_pd* p, void* addr, std::size_t length, std::uint64_t iova,
                     unsigned access) {
  return fabric(p)->reg_mr(owner_of<Pd>(p), addr, length, iova, static_cast<int>(access));
}
ibv_mr* reg_dmabuf_mr(ibv_pd* p, std::uint64_t offset, std::size_t length, std::uint64_t iova,
                      int fd, int access) {
  return fabric(p)->reg_dmabuf_mr(owner_of<Pd>(p), offset, length, iova, fd, access);
}
int dereg_mr(ibv_mr* m) { return fabric(m)->dereg_mr(owner_of<Mr>(m)); }
ibv_comp_channel* create_comp_channel(ibv_context* c) {
  return fabric(c)->create_comp_channel(owner_of<Context>(c));
}
int destroy_comp_channel(ibv_comp_channel* ch) {
  return fabric(ch)->destroy_comp_channel(owner_of<Channel>(ch));
}
ibv_cq* create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch,
                  int comp_vector) {
  return fabric(c)->create_cq(owner_of<Context>(c), cqe, cq_context,
                              ch != nullptr ? owner_of<Channel>(ch) : nullptr, comp_vector);
}
int destroy_cq(ibv_cq* cq) { return fabric(cq)->destroy_cq(owner_of<Cq>(cq)); }
int req_notify_cq(ibv_cq* cq, int solicited_only) {
  return fabric(cq)->req_notify_cq(owner_of<Cq>(cq), solicited_only);
}
int get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  return fabric(ch)->get_cq_event(owner_of<Channel>(ch), cq, cq_context);
}
void ack_cq_events(ibv_cq* cq, unsigned n) { fabric(cq)->ack_cq_events(owner_of<Cq>(cq), n); }
ibv_qp* create_qp(ibv_pd* p, ibv_qp_init_attr* init) {
  return fabric(p)->create_qp(owner_of<Pd>(p), init);
}
int modify_qp(ibv_qp* q, ibv_qp_attr* a, int mask) {
  return fabric(q)->modify_qp(owner_of<Qp>(q), a, mask);
}
int query_qp(ibv_qp* q, ibv_qp_attr* a, int /*mask: everything is always filled*/,
             ibv_qp_init_attr* init) {
  return fabric(q)->query_qp(owner_of<Qp>(q), a, init);
}
int destroy_qp(ibv_qp* q) { return fabric(q)->destroy_qp(owner_of<Qp>(q)); }
int get_async_event(ibv_context* c, ibv_async_event* ev) {
  return fabric(c)->get_async_event(owner_of<Context>(c), ev);
}
void ack_async_event(ibv_async_event* ev) {
  switch (element_of(ev->event_type)) {
    case EventElement::qp:
      fabric(ev->element.qp)->ack_async_event(ev);
      break;
    case EventElement::cq:
      fabric(ev->element.cq)->ack_async_event(ev);
      break;
    default:
      break;  // port and device events are not counted
  }
}
int post_send(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
  return fabric(q)->post_send(owner_of<Qp>(q), wr, bad);
}
int post_recv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return fabric(q)->post_recv(owner_of<Qp>(q), wr, bad);
}
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) { return fabric(cq)->poll_cq(owner_of<Cq>(cq), n, wc); }

// The same strings as libibverbs, so logs read the same on the fake and on hardware.
const char* wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR: return "memory management operation error";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR: return "aborted error";
    case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
    case IBV_WC_GENERAL_ERR: return "general error";
    case IBV_WC_TM_ERR: return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
  }
  return "unknown";
}

const char* event_type_str(ibv_event_type event) {
  switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal";
  }
  return "unknown";
}

const char* port_state_str(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "PORT_NOP";
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
  }
  return "invalid state";
}

}  // namespace

IbvApi make_fake_api(FabricState* state) {
  IbvApi api;
  api.provider = "fake fabric";
  api.get_device_list = [state](int* num) {
    std::lock_guard lk(state->mu);
    const std::size_t n = state->devices.size();
    auto** list = new ibv_device*[n + 1];
    for (std::size_t i = 0; i < n; ++i) list[i] = &state->devices[i]->h.ibv;
    list[n] = nullptr;
    if (num != nullptr) *num = static_cast<int>(n);
    return list;
  };
  api.free_device_list = &free_device_list;
  api.get_device_name = &get_device_name;
  api.get_device_guid = &get_device_guid;
  api.open_device = &open_device;
  api.close_device = &close_device;
  api.query_device = &query_device;
  api.query_port = &query_port;
  api.query_gid = &query_gid;
  api.alloc_pd = &alloc_pd;
  api.dealloc_pd = &dealloc_pd;
  api.reg_mr = &reg_mr;
  api.reg_mr_iova2 = &reg_mr_iova2;
  api.reg_dmabuf_mr = &reg_dmabuf_mr;
  api.dereg_mr = &dereg_mr;
  api.create_comp_channel = &create_comp_channel;
  api.destroy_comp_channel = &destroy_comp_channel;
  api.create_cq = &create_cq;
  api.destroy_cq = &destroy_cq;
  api.req_notify_cq = &req_notify_cq;
  api.get_cq_event = &get_cq_event;
  api.ack_cq_events = &ack_cq_events;
  api.create_qp = &create_qp;
  api.modify_qp = &modify_qp;
  api.query_qp = &query_qp;
  api.destroy_qp = &destroy_qp;
  api.get_async_event = &get_async_event;
  api.ack_async_event = &ack_async_event;
  api.post_send = &post_send;
  api.post_recv = &post_recv;
  api.poll_cq = &poll_cq;
  api.wc_status_str = &wc_status_str;
  api.event_type_str = &event_type_str;
  api.port_state_str = &port_state_str;
  return api;
}

}  // namespace tictac::verbs::fake
