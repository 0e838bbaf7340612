#include "transport/verbs/ibv_api.h"

#include <sstream>

namespace tictac::verbs {

Status check_complete(const IbvApi& api) {
  struct Entry {
    const char* name;
    bool present;
  };
  const Entry entries[] = {
      {"get_device_list", static_cast<bool>(api.get_device_list)},
      {"free_device_list", api.free_device_list != nullptr},
      {"get_device_name", api.get_device_name != nullptr},
      {"get_device_guid", api.get_device_guid != nullptr},
      {"open_device", api.open_device != nullptr},
      {"close_device", api.close_device != nullptr},
      {"query_device", api.query_device != nullptr},
      {"query_port", api.query_port != nullptr},
      {"query_gid", api.query_gid != nullptr},
      {"alloc_pd", api.alloc_pd != nullptr},
      {"dealloc_pd", api.dealloc_pd != nullptr},
      {"reg_mr", api.reg_mr != nullptr},
      {"dereg_mr", api.dereg_mr != nullptr},
      {"create_comp_channel", api.create_comp_channel != nullptr},
      {"destroy_comp_channel", api.destroy_comp_channel != nullptr},
      {"create_cq", api.create_cq != nullptr},
      {"destroy_cq", api.destroy_cq != nullptr},
      {"req_notify_cq", api.req_notify_cq != nullptr},
      {"get_cq_event", api.get_cq_event != nullptr},
      {"ack_cq_events", api.ack_cq_events != nullptr},
      {"create_qp", api.create_qp != nullptr},
      {"modify_qp", api.modify_qp != nullptr},
      {"query_qp", api.query_qp != nullptr},
      {"destroy_qp", api.destroy_qp != nullptr},
      {"get_async_event", api.get_async_event != nullptr},
      {"ack_async_event", api.ack_async_event != nullptr},
      {"post_send", api.post_send != nullptr},
      {"post_recv", api.post_recv != nullptr},
      {"poll_cq", api.poll_cq != nullptr},
      {"wc_status_str", api.wc_status_str != nullptr},
      {"event_type_str", api.event_type_str != nullptr},
      {"port_state_str", api.port_state_str != nullptr},
  };
  for (const Entry& e : entries) {
    if (!e.present) {
      return internal_error(std::string("verbs function table from '") + api.provider +
                            "' lacks " + e.name + "; the provider must fill every required entry");
    }
  }
  return Status::Ok();
}

StatusCode classify_wc_status(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return StatusCode::ok;
    case IBV_WC_WR_FLUSH_ERR:
      return StatusCode::cancelled;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_FATAL_ERR:
      return StatusCode::connection_lost;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_BAD_RESP_ERR:
      return StatusCode::protocol_error;
    default:
      return StatusCode::internal;
  }
}

Status wc_status_to_status(const IbvApi& api, const ibv_wc& wc, std::string_view what) {
  const StatusCode code = classify_wc_status(wc.status);
  if (code == StatusCode::ok) return Status::Ok();
  std::ostringstream os;
  os << what << " failed: "
     << (api.wc_status_str != nullptr ? api.wc_status_str(wc.status) : "unknown status")
     << " (status " << static_cast<int>(wc.status) << ", vendor_err 0x" << std::hex
     << wc.vendor_err << std::dec << ", wr_id " << wc.wr_id << ", qp " << wc.qp_num << ")";
  return Status(code, os.str(), "ibv_poll_cq");
}

}  // namespace tictac::verbs
