// IbvApi: the table of every libibverbs call the verbs backend makes.
//
// Contract
// - All verbs calls in TicTac go through one of these tables, never through libibverbs symbols:
//   the library is never linked. Two providers fill a table: the loader (ibv_loader.h: dlopen of
//   libibverbs.so.1 + dlvsym at fixed symbol versions) and the fake fabric (fake/fake_fabric.h:
//   an in-process RC device for tests). Code written against the table cannot tell them apart.
// - Every entry has exactly the libibverbs signature, argument and return conventions
//   (create calls return NULL and set errno; most int calls return an errno value; poll_cq
//   returns the number of completions or a negative value). The one exception is
//   get_device_list, a std::function, so that a fake can bind its fabric; it still returns NULL
//   and sets errno on failure.
// - post_send, post_recv, poll_cq and req_notify_cq are static inline in <infiniband/verbs.h>
//   (they dispatch through context->ops); the real table holds small wrappers that do exactly
//   that, so a fake can replace them here.
// - reg_mr_iova2 (IBVERBS_1.8) and reg_dmabuf_mr (IBVERBS_1.12) are null when the installed
//   library is older; every other entry is non-null in a table that loaded successfully.
// - Thread safety: the table is an immutable value once filled; copying it is cheap. The calls
//   themselves have libibverbs' thread-safety (all are thread-safe except that one object must
//   not be destroyed while another thread uses it); the fake documents its own.
// - Ownership: the table does not own the library or the fabric behind it; the provider must
//   outlive every table copy and every object created through it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace tictac::verbs {

struct IbvApi {
  // Who filled the table, for logs and `tictac info`: "libibverbs.so.1" or "fake fabric".
  std::string provider;

  // Devices.
  std::function<ibv_device**(int* num_devices)> get_device_list;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  __be64 (*get_device_guid)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*query_port)(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, std::uint8_t port_num, int index, ibv_gid* gid) = nullptr;

  // Protection domains and memory regions.
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, std::size_t length, int access) = nullptr;
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova,
                          unsigned access) = nullptr;  // optional (IBVERBS_1.8)
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, std::uint64_t offset, std::size_t length,
                           std::uint64_t iova, int fd, int access) = nullptr;  // optional (1.12)
  int (*dereg_mr)(ibv_mr* mr) = nullptr;

  // Completion queues and completion channels.
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  int (*req_notify_cq)(ibv_cq* cq, int solicited_only) = nullptr;
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) = nullptr;
  void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents) = nullptr;

  // Queue pairs.
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* init_attr) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) = nullptr;
  int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                  ibv_qp_init_attr* init_attr) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;

  // Asynchronous events (read from context->async_fd; blocking unless it is O_NONBLOCK).
  int (*get_async_event)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ack_async_event)(ibv_async_event* event) = nullptr;

  // Data path (static inline in the header; wrappers here).
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) = nullptr;
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) = nullptr;
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc) = nullptr;

  // Names for messages.
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;
  const char* (*event_type_str)(ibv_event_type event) = nullptr;
  const char* (*port_state_str)(ibv_port_state state) = nullptr;
};

// Internal-error Status naming the first null required entry, or ok. Providers call it before
// handing a table out, so a half-filled table never escapes.
Status check_complete(const IbvApi& api);

// How a work completion status maps onto TicTac's error codes:
//   success -> ok; WR_FLUSH_ERR -> cancelled (a consequence of an earlier error);
//   RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, REM_ABORT_ERR, FATAL_ERR -> connection_lost;
//   REM_ACCESS_ERR, REM_INV_REQ_ERR, REM_OP_ERR, LOC_LEN_ERR, LOC_PROT_ERR, LOC_QP_OP_ERR,
//   MW_BIND_ERR, BAD_RESP_ERR -> protocol_error; anything else -> internal.
StatusCode classify_wc_status(ibv_wc_status status);

// "<what> failed: <ibv status name> (status <n>, vendor_err 0x<hex>, wr_id <id>, qp <num>)",
// using the table's wc_status_str, with the code from classify_wc_status. Ok for success.
Status wc_status_to_status(const IbvApi& api, const ibv_wc& wc, std::string_view what);

}  // namespace tictac::verbs
