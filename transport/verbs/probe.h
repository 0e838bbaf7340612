// Viability probe for the verbs backend: is there a device with an ACTIVE port?
//
// Contract
// - find_active_ports() enumerates devices and ports through any IbvApi (real or fake), opens
//   each device only long enough to query it and closes it again. Errors are Status
//   unavailable with the message "verbs not viable: <reason>", the reason naming the cause and
//   the fix: the device list is NULL (ENOSYS: the kernel has no RDMA support), the list is
//   empty, or no port is ACTIVE (each port's state is listed).
// - probe() loads libibverbs (ibv_loader.h) and returns exactly one line for `tictac info`:
//   "verbs: viable via <provider>: <dev> port <n> (<link layer>, MTU <bytes>, ...)" or
//   "verbs not viable: <reason>". It never crashes and never throws.
// - Thread-safe (each call uses its own device contexts); may block for the duration of a few
//   device queries (milliseconds on real hardware).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

struct ActivePort {
  std::string device;       // ibv_get_device_name, e.g. "mlx5_0"
  std::uint8_t port = 0;    // 1-based port number
  ibv_port_attr attr{};     // as queried
};

Result<std::vector<ActivePort>> find_active_ports(const IbvApi& api);

// "InfiniBand", "Ethernet" (RoCE) or "unspecified".
const char* link_layer_name(std::uint8_t link_layer);
// Bytes for an ibv_mtu value (IBV_MTU_4096 -> 4096); 0 for an invalid value.
int mtu_bytes(ibv_mtu mtu);

// The one-line summary for a given table, and for the real library.
std::string probe(const IbvApi& api);
std::string probe();

}  // namespace tictac::verbs
