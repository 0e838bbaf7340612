#include "transport/verbs/probe.h"

#include <cerrno>
#include <cstring>
#include <sstream>

#include "transport/verbs/ibv_loader.h"

namespace tictac::verbs {
namespace {

Status not_viable(const std::string& reason, std::string origin = {}) {
  return Status(StatusCode::unavailable, "verbs not viable: " + reason, std::move(origin));
}

// Appends the ports of one device: ACTIVE ones to `active`, a note per other port to `notes`.
void scan_device(const IbvApi& api, ibv_device* device, std::vector<ActivePort>& active,
                 std::vector<std::string>& notes) {
  const std::string name = api.get_device_name(device) != nullptr ? api.get_device_name(device)
                                                                  : "(unnamed)";
  ibv_context* context = api.open_device(device);
  if (context == nullptr) {
    const int err = errno;
    notes.push_back(name + ": ibv_open_device failed (" + std::strerror(err) + ")");
    return;
  }
  ibv_device_attr dev_attr{};
  if (const int rc = api.query_device(context, &dev_attr); rc != 0) {
    notes.push_back(name + ": ibv_query_device failed (" + std::strerror(rc) + ")");
  } else {
    for (int p = 1; p <= dev_attr.phys_port_cnt; ++p) {
      ibv_port_attr port_attr{};
      const auto port = static_cast<std::uint8_t>(p);
      if (const int rc = api.query_port(context, port, &port_attr); rc != 0) {
        notes.push_back(name + " port " + std::to_string(p) + ": ibv_query_port failed (" +
                        std::strerror(rc) + ")");
      } else if (port_attr.state != IBV_PORT_ACTIVE) {
        notes.push_back(name + " port " + std::to_string(p) + " is " +
                        api.port_state_str(port_attr.state));
      } else {
        active.push_back(ActivePort{name, port, port_attr});
      }
    }
  }
  (void)api.close_device(context);
}

}  // namespace

const char* link_layer_name(std::uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
    default:
      return "unspecified";
  }
}

int mtu_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

Result<std::vector<ActivePort>> find_active_ports(const IbvApi& api) {
  TICTAC_RETURN_IF_ERROR(check_complete(api));
  int num = 0;
  errno = 0;
  ibv_device** list = api.get_device_list(&num);
  if (list == nullptr) {
    const int err = errno;
    if (err == ENOSYS) {
      return not_viable(
          "no RDMA support in the kernel (ibv_get_device_list: " + std::string(std::strerror(err)) +
              "); load the RDMA driver modules (ib_uverbs and the NIC's, e.g. mlx5_ib) or use "
              "the tcp or ucx backend",
          "ibv_get_device_list errno=" + std::to_string(err));
    }
    return not_viable("ibv_get_device_list failed (" + std::string(std::strerror(err)) +
                          "); check permissions on /dev/infiniband or use the tcp or ucx backend",
                      "ibv_get_device_list errno=" + std::to_string(err));
  }
  std::vector<ActivePort> active;
  std::vector<std::string> notes;
  for (int i = 0; i < num; ++i) scan_device(api, list[i], active, notes);
  api.free_device_list(list);
  if (num == 0) {
    return not_viable(
        "no RDMA devices found (ibv_get_device_list returned an empty list); check `ibv_devices` "
        "and that the provider for your NIC (ibverbs-providers) is installed");
  }
  if (active.empty()) {
    std::string joined;
    for (const std::string& n : notes) joined += (joined.empty() ? "" : "; ") + n;
    return not_viable("no ACTIVE port (" + joined +
                      "); check the cable and the subnet manager (`ibstat`), or the RoCE "
                      "interface's link");
  }
  return active;
}

std::string probe(const IbvApi& api) {
  Result<std::vector<ActivePort>> ports = find_active_ports(api);
  if (!ports.ok()) return ports.status().message();
  std::ostringstream os;
  os << "verbs: viable via " << api.provider << ":";
  bool first = true;
  for (const ActivePort& p : *ports) {
    os << (first ? " " : "; ") << p.device << " port " << static_cast<int>(p.port) << " ("
       << link_layer_name(p.attr.link_layer) << ", MTU " << mtu_bytes(p.attr.active_mtu);
    if (p.attr.link_layer != IBV_LINK_LAYER_ETHERNET) os << ", LID " << p.attr.lid;
    os << ")";
    first = false;
  }
  return os.str();
}

std::string probe() {
  Result<IbvApi> api = load_libibverbs();
  if (!api.ok()) return api.status().message();
  return probe(*api);
}

}  // namespace tictac::verbs
