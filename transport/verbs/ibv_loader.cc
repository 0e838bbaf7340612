// dlopen/dlvsym loader for libibverbs. See ibv_loader.h for the contract.
#include "transport/verbs/ibv_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

namespace tictac::verbs {
namespace {

constexpr const char* kLibrary = "libibverbs.so.1";

// Raw entry points that need a wrapper (set once under call_once, read-only afterwards).
using QueryPortFn = int (*)(ibv_context*, std::uint8_t, ibv_port_attr*);
using GetDeviceListFn = ibv_device** (*)(int*);
QueryPortFn g_query_port = nullptr;

// The exported ibv_query_port@IBVERBS_1.1 may fill only the old (compat) prefix of the struct;
// the header's inline wrapper clears it first, and so do we.
int query_port_cleared(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr) {
  std::memset(attr, 0, sizeof(*attr));
  return g_query_port(context, port_num, attr);
}

// The static-inline data-path calls of <infiniband/verbs.h>, dispatching through context->ops.
int post_send_via_ops(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return ibv_post_send(qp, wr, bad_wr);
}
int post_recv_via_ops(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return ibv_post_recv(qp, wr, bad_wr);
}
int poll_cq_via_ops(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  return ibv_poll_cq(cq, num_entries, wc);
}
int req_notify_cq_via_ops(ibv_cq* cq, int solicited_only) {
  return ibv_req_notify_cq(cq, solicited_only);
}

class SymbolBinder {
 public:
  explicit SymbolBinder(void* handle) : handle_(handle) {}

  // Binds `out` to name@version. A required symbol that is missing is remembered for error().
  template <typename Fn>
  void bind(Fn& out, const char* name, const char* version, bool required = true) {
    void* sym = dlvsym(handle_, name, version);
    if (sym == nullptr) {
      out = nullptr;
      if (required && missing_.empty()) missing_ = std::string(name) + "@" + version;
      return;
    }
    out = reinterpret_cast<Fn>(sym);
  }
  const std::string& missing() const { return missing_; }

 private:
  void* handle_;
  std::string missing_;
};

Result<IbvApi> load_once() {
  dlerror();
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::unavailable,
                  std::string("verbs not viable: cannot load ") + kLibrary + " (" +
                      (why != nullptr ? why : "unknown dlopen error") +
                      "); install libibverbs1 (rdma-core) and the provider for your NIC "
                      "(ibverbs-providers), or use the tcp or ucx backend",
                  "dlopen");
  }
  SymbolBinder b(handle);
  IbvApi api;
  api.provider = kLibrary;
  GetDeviceListFn get_device_list = nullptr;
  b.bind(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
  b.bind(api.free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
  b.bind(api.get_device_name, "ibv_get_device_name", "IBVERBS_1.1");
  b.bind(api.get_device_guid, "ibv_get_device_guid", "IBVERBS_1.1");
  b.bind(api.open_device, "ibv_open_device", "IBVERBS_1.1");
  b.bind(api.close_device, "ibv_close_device", "IBVERBS_1.1");
  b.bind(api.query_device, "ibv_query_device", "IBVERBS_1.1");
  b.bind(g_query_port, "ibv_query_port", "IBVERBS_1.1");
  b.bind(api.query_gid, "ibv_query_gid", "IBVERBS_1.1");
  b.bind(api.alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
  b.bind(api.dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1");
  b.bind(api.reg_mr, "ibv_reg_mr", "IBVERBS_1.1");
  b.bind(api.reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8", /*required=*/false);
  b.bind(api.reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", /*required=*/false);
  b.bind(api.dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1");
  b.bind(api.create_comp_channel, "ibv_create_comp_channel", "IBVERBS_1.0");
  b.bind(api.destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0");
  b.bind(api.create_cq, "ibv_create_cq", "IBVERBS_1.1");
  b.bind(api.destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
  b.bind(api.get_cq_event, "ibv_get_cq_event", "IBVERBS_1.1");
  b.bind(api.ack_cq_events, "ibv_ack_cq_events", "IBVERBS_1.1");
  b.bind(api.create_qp, "ibv_create_qp", "IBVERBS_1.1");
  b.bind(api.modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
  b.bind(api.query_qp, "ibv_query_qp", "IBVERBS_1.1");
  b.bind(api.destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
  b.bind(api.get_async_event, "ibv_get_async_event", "IBVERBS_1.1");
  b.bind(api.ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1");
  b.bind(api.wc_status_str, "ibv_wc_status_str", "IBVERBS_1.1");
  b.bind(api.event_type_str, "ibv_event_type_str", "IBVERBS_1.1");
  b.bind(api.port_state_str, "ibv_port_state_str", "IBVERBS_1.1");
  if (!b.missing().empty()) {
    // Keep the handle open: dlclose of a partly used libibverbs is not safe, and it is tiny.
    return Status(StatusCode::unavailable,
                  std::string("verbs not viable: ") + kLibrary + " lacks " + b.missing() +
                      "; rdma-core is too old or broken, install rdma-core >= 17 (IBVERBS_1.1)",
                  "dlvsym");
  }
  api.get_device_list = get_device_list;
  api.query_port = &query_port_cleared;
  api.post_send = &post_send_via_ops;
  api.post_recv = &post_recv_via_ops;
  api.poll_cq = &poll_cq_via_ops;
  api.req_notify_cq = &req_notify_cq_via_ops;
  TICTAC_RETURN_IF_ERROR(check_complete(api));
  return api;
}

}  // namespace

Result<IbvApi> load_libibverbs() {
  static std::once_flag once;
  static Result<IbvApi>* loaded = nullptr;  // leaked on purpose: lives as long as the library
  std::call_once(once, [] { loaded = new Result<IbvApi>(load_once()); });
  return *loaded;
}

}  // namespace tictac::verbs
