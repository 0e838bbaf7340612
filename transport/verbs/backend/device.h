// Device: the verbs resources one backend shares among all its endpoints: an open device context
// on one ACTIVE port, one protection domain, one completion queue with a completion channel, the
// registration cache, and the watchers that feed completions and asynchronous events to the
// endpoints they belong to.
//
// Progress: the completion channel's fd and the context's async-event fd are made non-blocking
// and watched by the ProgressEngine. A CQ event is acknowledged, the CQ re-armed, then the CQ is
// drained (arm before drain: a completion that lands in between raises a new event). Completions
// are routed by wr_id (see make_wr_id): the client id in its top bits; ids are never reused, so a
// completion of a closed endpoint is dropped. Async events are acknowledged at once (before any
// QP may be destroyed), then routed: QP errors fail that endpoint, CQ overrun, port down and
// device fatal fail every endpoint.
//
// Threading: loop-thread only. Lifetime: shared by the backend and its endpoints (shared_ptr);
// detach() (called by the backend's destructor, while the engine is alive) stops all engine use,
// after which the last owner may release the verbs objects on any thread.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "transport/progress_engine.h"
#include "transport/verbs/backend/config.h"
#include "transport/verbs/backend/qp_info.h"
#include "transport/verbs/backend/registration.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

// What the device routes to an endpoint.
class DeviceClient {
 public:
  virtual ~DeviceClient() = default;
  virtual void on_completion(const ibv_wc& wc) = 0;
  // A fatal asynchronous event for this client's QPs, or for the whole port/device.
  virtual void on_async_error(const Status& status) = 0;
};

// wr_id layout: client id (24 bits) | kind (4 bits) | value (36 bits).
// data_write: a zero-copy RDMA WRITE (never signalled; only its errors and flushes complete).
enum class WrKind : std::uint8_t { data_send = 1, data_recv = 2, ctrl_send = 3, ctrl_recv = 4, data_write = 5 };
inline constexpr int kWrValueBits = 36;
inline constexpr std::uint64_t kWrValueMask = (std::uint64_t{1} << kWrValueBits) - 1;
inline std::uint64_t make_wr_id(std::uint32_t client, WrKind kind, std::uint64_t value) {
  return (std::uint64_t{client} << 40) | (std::uint64_t{static_cast<std::uint8_t>(kind)} << kWrValueBits) |
         (value & kWrValueMask);
}
inline std::uint32_t wr_client(std::uint64_t wr_id) { return static_cast<std::uint32_t>(wr_id >> 40); }
inline WrKind wr_kind(std::uint64_t wr_id) { return static_cast<WrKind>((wr_id >> kWrValueBits) & 0xf); }
inline std::uint64_t wr_value(std::uint64_t wr_id) { return wr_id & kWrValueMask; }

class Device {
 public:
  // Opens the port chosen by config.device (or the first ACTIVE one), allocates the PD, the CQ
  // (config.cq_entries, capped by the device) and its channel, and starts watching.
  static Result<std::shared_ptr<Device>> open(const IbvApi& api, const VerbsConfig& config,
                                              transport::ProgressEngine& engine);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const IbvApi& api() const { return api_; }
  const VerbsConfig& config() const { return config_; }
  transport::ProgressEngine& engine() { return engine_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  std::uint8_t port() const { return port_; }
  RegistrationCache& registrations() { return *registrations_; }
  // "mlx5_0:1" / "fake0:1".
  const std::string& name() const { return name_; }
  // Link layer, LID, GID and MTU of our port, for QpInfo (QP and ring fields left empty).
  QpInfo port_info() const;
  int gid_index() const { return gid_index_; }
  // Why the device is unusable (port down, device fatal), or ok.
  const Status& dead() const { return dead_; }

  // Routing. add_client() returns the id to put into wr_ids; set_qps() names the QPs whose async
  // events go to the client; remove_client() stops all routing to it.
  std::uint32_t add_client(DeviceClient* client);
  void set_qps(std::uint32_t id, std::vector<std::uint32_t> qp_nums);
  void remove_client(std::uint32_t id);
  std::size_t clients() const { return clients_.size(); }

  // Completion-queue entries reserved by endpoints (each reserves its worst case).
  Status reserve_cq(std::uint32_t entries, const std::string& who);
  void release_cq(std::uint32_t entries);

  // Processes every completion and async event available now (also used before a peer's
  // disconnect is acted upon, so its last frames are delivered first).
  void drain();
  void drain_async_events();

  // Stops watching fds and cancels timers; later drain() calls still work (tests, teardown).
  void detach();

 private:
  Device(const IbvApi& api, const VerbsConfig& config, transport::ProgressEngine& engine);
  Status init(const std::string& device_name, std::uint8_t port);
  void on_cq_event();
  void drain_cq();
  void handle_async(ibv_event_type type, std::uint32_t qp_num, int port);
  void fail_all(const Status& status);

  const IbvApi api_;
  const VerbsConfig config_;
  transport::ProgressEngine& engine_;
  std::string name_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::uint32_t cq_capacity_ = 0;
  std::uint32_t cq_reserved_ = 0;
  std::uint8_t port_ = 1;
  ibv_port_attr port_attr_{};
  int gid_index_ = 0;
  ibv_gid gid_{};
  ibv_mtu mtu_ = IBV_MTU_1024;
  std::unique_ptr<RegistrationCache> registrations_;
  bool watching_ = false;
  bool drain_scheduled_ = false;
  transport::ProgressEngine::TimerId drain_timer_ = 0;
  Status dead_;

  std::uint32_t next_client_ = 1;
  std::map<std::uint32_t, DeviceClient*> clients_;
  std::unordered_map<std::uint32_t, std::uint32_t> client_of_qp_;
};

}  // namespace tictac::verbs
