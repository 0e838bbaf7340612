#include "transport/verbs/backend/device.h"

#include <fcntl.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/check.h"
#include "common/log.h"
#include "transport/verbs/probe.h"

namespace tictac::verbs {
namespace {

constexpr int kPollBatch = 32;
constexpr int kMaxPollRounds = 64;  // then yield to other fds and continue from a timer
constexpr std::uint32_t kMaxClientId = (1u << 24) - 1;

Status set_nonblocking(int fd, const char* what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return errno_status(StatusCode::internal, std::string("cannot make the ") + what + " non-blocking",
                        "fcntl", errno);
  }
  return Status::Ok();
}

bool is_zero(const ibv_gid& g) {
  for (std::uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

// ::ffff:a.b.c.d, the form RoCE v2 uses for IPv4 addresses.
bool is_ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

ibv_mtu mtu_code(int bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

Status unavailable(const std::string& what) {
  return Status(StatusCode::unavailable, "verbs not viable: " + what);
}

}  // namespace

Device::Device(const IbvApi& api, const VerbsConfig& config, transport::ProgressEngine& engine)
    : api_(api), config_(config), engine_(engine) {}

Result<std::shared_ptr<Device>> Device::open(const IbvApi& api, const VerbsConfig& config,
                                             transport::ProgressEngine& engine) {
  Result<std::vector<ActivePort>> ports = find_active_ports(api);
  TICTAC_RETURN_IF_ERROR(ports);
  // TICTAC_VERBS_DEVICE: "name" or "name:port".
  std::string want_dev = config.device;
  int want_port = 0;
  if (const auto colon = want_dev.rfind(':'); colon != std::string::npos) {
    want_port = std::atoi(want_dev.c_str() + colon + 1);
    want_dev.resize(colon);
    if (want_port < 1 || want_port > 255) {
      return invalid_argument("TICTAC_VERBS_DEVICE=" + config.device + ": the port after ':' must be 1..255");
    }
  }
  const ActivePort* chosen = nullptr;
  std::string seen;
  for (const ActivePort& p : *ports) {
    seen += (seen.empty() ? "" : ", ") + p.device + ":" + std::to_string(p.port);
    if (chosen == nullptr && (want_dev.empty() || p.device == want_dev) &&
        (want_port == 0 || p.port == want_port)) {
      chosen = &p;
    }
  }
  if (chosen == nullptr) {
    return unavailable("TICTAC_VERBS_DEVICE=" + config.device + " names no ACTIVE port (active: " + seen +
                       "); unset it or pick one of those");
  }
  std::shared_ptr<Device> dev(new Device(api, config, engine));
  TICTAC_RETURN_IF_ERROR(dev->init(chosen->device, chosen->port));
  return dev;
}

Status Device::init(const std::string& device_name, std::uint8_t port) {
  name_ = device_name + ":" + std::to_string(port);
  port_ = port;
  int num = 0;
  ibv_device** list = api_.get_device_list(&num);
  if (list == nullptr) return unavailable("ibv_get_device_list failed while opening " + name_);
  for (int i = 0; i < num && ctx_ == nullptr; ++i) {
    const char* n = api_.get_device_name(list[i]);
    if (n != nullptr && device_name == n) {
      errno = 0;
      ctx_ = api_.open_device(list[i]);
    }
  }
  const int open_err = errno;
  api_.free_device_list(list);
  if (ctx_ == nullptr) {
    return errno_status(StatusCode::unavailable, "verbs not viable: cannot open " + device_name,
                        "ibv_open_device", open_err);
  }
  if (const int rc = api_.query_port(ctx_, port_, &port_attr_); rc != 0) {
    return errno_status(StatusCode::unavailable, "verbs not viable: cannot query " + name_, "ibv_query_port", rc);
  }
  ibv_device_attr dev_attr{};
  if (const int rc = api_.query_device(ctx_, &dev_attr); rc != 0) {
    return errno_status(StatusCode::unavailable, "verbs not viable: cannot query " + device_name,
                        "ibv_query_device", rc);
  }
  // GID: RoCE needs one for the GRH; InfiniBand routes by LID and reports index 0.
  const bool roce = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  gid_index_ = config_.gid_index >= 0 ? config_.gid_index : 0;
  if (roce && config_.gid_index < 0) {
    for (int i = 0; i < port_attr_.gid_tbl_len; ++i) {
      ibv_gid g{};
      if (api_.query_gid(ctx_, port_, i, &g) == 0 && is_ipv4_mapped(g)) {
        gid_index_ = i;
        break;
      }
    }
  }
  if (api_.query_gid(ctx_, port_, gid_index_, &gid_) != 0 || (roce && is_zero(gid_))) {
    return unavailable("GID index " + std::to_string(gid_index_) + " of " + name_ +
                       " is empty or invalid; set TICTAC_VERBS_GID_INDEX to a populated entry "
                       "(show_gids lists them)");
  }
  mtu_ = port_attr_.active_mtu;
  if (config_.mtu_bytes != 0 && mtu_code(config_.mtu_bytes) < mtu_) mtu_ = mtu_code(config_.mtu_bytes);

  pd_ = api_.alloc_pd(ctx_);
  if (pd_ == nullptr) return errno_status(StatusCode::internal, "cannot allocate a PD on " + name_, "ibv_alloc_pd", errno);
  registrations_ = std::make_unique<RegistrationCache>(api_, pd_);
  channel_ = api_.create_comp_channel(ctx_);
  if (channel_ == nullptr) {
    return errno_status(StatusCode::internal, "cannot create a completion channel on " + name_,
                        "ibv_create_comp_channel", errno);
  }
  cq_capacity_ = std::min<std::uint32_t>(config_.cq_entries, static_cast<std::uint32_t>(dev_attr.max_cqe));
  cq_ = api_.create_cq(ctx_, static_cast<int>(cq_capacity_), this, channel_, 0);
  if (cq_ == nullptr) {
    return errno_status(StatusCode::resource_exhausted,
                        "cannot create a completion queue of " + std::to_string(cq_capacity_) +
                            " entries on " + name_ + " (TICTAC_VERBS_CQ_ENTRIES)",
                        "ibv_create_cq", errno);
  }
  if (const int rc = api_.req_notify_cq(cq_, 0); rc != 0) {
    return errno_status(StatusCode::internal, "cannot arm the completion queue", "ibv_req_notify_cq", rc);
  }
  TICTAC_RETURN_IF_ERROR(set_nonblocking(channel_->fd, "completion channel"));
  TICTAC_RETURN_IF_ERROR(set_nonblocking(ctx_->async_fd, "async event fd"));
  TICTAC_RETURN_IF_ERROR(engine_.watch(channel_->fd, EPOLLIN, [this](std::uint32_t) { on_cq_event(); }));
  watching_ = true;
  if (Status st = engine_.watch(ctx_->async_fd, EPOLLIN, [this](std::uint32_t) { drain_async_events(); });
      !st.ok()) {
    return st;
  }
  TICTAC_LOG(debug) << "verbs device " << name_ << " via " << api_.provider << ": "
                    << link_layer_name(port_attr_.link_layer) << ", MTU " << mtu_bytes(mtu_) << ", LID "
                    << port_attr_.lid << ", GID index " << gid_index_ << ", CQ " << cq_capacity_ << " entries";
  return Status::Ok();
}

Device::~Device() {
  detach();
  TICTAC_CHECK(clients_.empty(), "verbs device released while " << clients_.size() << " endpoints still use it");
  registrations_.reset();  // every registration was released by its endpoint
  if (cq_ != nullptr) {
    if (const int rc = api_.destroy_cq(cq_); rc != 0) {
      TICTAC_LOG(warn) << "ibv_destroy_cq: " << std::strerror(rc);
    }
  }
  if (channel_ != nullptr) {
    if (const int rc = api_.destroy_comp_channel(channel_); rc != 0) {
      TICTAC_LOG(warn) << "ibv_destroy_comp_channel: " << std::strerror(rc);
    }
  }
  if (pd_ != nullptr) {
    if (const int rc = api_.dealloc_pd(pd_); rc != 0) {
      TICTAC_LOG(warn) << "ibv_dealloc_pd: " << std::strerror(rc);
    }
  }
  if (ctx_ != nullptr) {
    if (const int rc = api_.close_device(ctx_); rc != 0) {
      TICTAC_LOG(warn) << "ibv_close_device: " << std::strerror(rc);
    }
  }
}

void Device::detach() {
  if (watching_) {
    engine_.unwatch(channel_->fd);
    engine_.unwatch(ctx_->async_fd);
    watching_ = false;
  }
  if (drain_scheduled_) {
    engine_.cancel_timer(drain_timer_);
    drain_scheduled_ = false;
  }
}

QpInfo Device::port_info() const {
  QpInfo info;
  info.link_layer = port_attr_.link_layer;
  info.mtu = mtu_;
  info.lid = port_attr_.lid;
  info.gid = gid_;
  return info;
}

std::uint32_t Device::add_client(DeviceClient* client) {
  while (next_client_ > kMaxClientId || next_client_ == 0 || clients_.count(next_client_) != 0) {
    next_client_ = next_client_ > kMaxClientId ? 1 : next_client_ + 1;
  }
  const std::uint32_t id = next_client_++;
  clients_.emplace(id, client);
  return id;
}

void Device::set_qps(std::uint32_t id, std::vector<std::uint32_t> qp_nums) {
  for (std::uint32_t q : qp_nums) client_of_qp_[q] = id;
}

void Device::remove_client(std::uint32_t id) {
  clients_.erase(id);
  for (auto it = client_of_qp_.begin(); it != client_of_qp_.end();) {
    it = it->second == id ? client_of_qp_.erase(it) : std::next(it);
  }
}

Status Device::reserve_cq(std::uint32_t entries, const std::string& who) {
  if (cq_reserved_ + entries > cq_capacity_) {
    return Status(StatusCode::resource_exhausted,
                  "no room for " + who + " in the shared completion queue of " + name_ + ": " +
                      std::to_string(cq_reserved_) + " of " + std::to_string(cq_capacity_) +
                      " entries are reserved by " + std::to_string(clients_.size()) +
                      " endpoints and this one needs " + std::to_string(entries) +
                      "; raise TICTAC_VERBS_CQ_ENTRIES or lower TICTAC_VERBS_RING_SLOTS");
  }
  cq_reserved_ += entries;
  return Status::Ok();
}

void Device::release_cq(std::uint32_t entries) { cq_reserved_ -= std::min(entries, cq_reserved_); }

void Device::on_cq_event() {
  unsigned events = 0;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cq_context = nullptr;
    if (api_.get_cq_event(channel_, &cq, &cq_context) != 0) break;  // EAGAIN: none left
    ++events;
  }
  if (events > 0) api_.ack_cq_events(cq_, events);
  if (const int rc = api_.req_notify_cq(cq_, 0); rc != 0) {
    fail_all(errno_status(StatusCode::internal, "cannot re-arm the completion queue of " + name_,
                          "ibv_req_notify_cq", rc));
    return;
  }
  drain_cq();
}

void Device::drain() {
  drain_async_events();
  drain_cq();
}

void Device::drain_cq() {
  ibv_wc wc[kPollBatch];
  for (int round = 0; round < kMaxPollRounds; ++round) {
    const int n = api_.poll_cq(cq_, kPollBatch, wc);
    if (n < 0) {
      fail_all(Status(StatusCode::internal,
                      "ibv_poll_cq on " + name_ + " failed (" + std::strerror(errno) +
                          "): the completion queue overran and lost completions; raise "
                          "TICTAC_VERBS_CQ_ENTRIES",
                      "ibv_poll_cq"));
      return;
    }
    if (n == 0) return;
    for (int i = 0; i < n; ++i) {
      // Looked up per completion: an earlier one may have closed the endpoint.
      auto it = clients_.find(wr_client(wc[i].wr_id));
      if (it != clients_.end()) it->second->on_completion(wc[i]);
    }
  }
  // Still busy: let other fds run, continue in the next iteration. No new CQ event may come for
  // completions that are already queued, so this timer is what picks them up.
  if (!drain_scheduled_ && watching_) {
    drain_scheduled_ = true;
    drain_timer_ = engine_.add_timer(transport::Clock::now(), [this] {
      drain_scheduled_ = false;
      drain_cq();
    });
  }
}

void Device::drain_async_events() {
  for (;;) {
    ibv_async_event ev{};
    if (api_.get_async_event(ctx_, &ev) != 0) return;  // EAGAIN: none left
    std::uint32_t qp_num = 0;
    int port = 0;
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        qp_num = ev.element.qp != nullptr ? ev.element.qp->qp_num : 0;
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
        port = ev.element.port_num;
        break;
      default:
        break;
    }
    const ibv_event_type type = ev.event_type;
    api_.ack_async_event(&ev);  // before anything may destroy the QP it names
    handle_async(type, qp_num, port);
  }
}

void Device::handle_async(ibv_event_type type, std::uint32_t qp_num, int port) {
  const std::string name = api_.event_type_str(type);
  std::ostringstream qp;
  qp << "0x" << std::hex << qp_num;
  switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
      auto q = client_of_qp_.find(qp_num);
      if (q == client_of_qp_.end()) return;  // a QP of an endpoint that is already gone
      auto c = clients_.find(q->second);
      if (c == clients_.end()) return;
      c->second->on_async_error(Status(StatusCode::connection_lost,
                                       "asynchronous event '" + name + "' on QP " + qp.str() + " of " +
                                           name_ + ": the QP entered the error state",
                                       "ibv_get_async_event"));
      return;
    }
    case IBV_EVENT_CQ_ERR:
      fail_all(Status(StatusCode::internal,
                      "asynchronous event '" + name + "' on " + name_ +
                          ": the completion queue overran; raise TICTAC_VERBS_CQ_ENTRIES",
                      "ibv_get_async_event"));
      return;
    case IBV_EVENT_PORT_ERR:
      if (port != port_) return;
      dead_ = Status(StatusCode::connection_lost,
                     "asynchronous event '" + name + "': port " + name_ +
                         " went down (cable, switch or subnet manager); connections over it are lost",
                     "ibv_get_async_event");
      fail_all(dead_);
      return;
    case IBV_EVENT_DEVICE_FATAL:
      dead_ = Status(StatusCode::connection_lost,
                     "asynchronous event '" + name + "' on " + name_ +
                         ": the RDMA device failed; it needs a driver reset",
                     "ibv_get_async_event");
      fail_all(dead_);
      return;
    case IBV_EVENT_PORT_ACTIVE:
      if (port == port_) {
        dead_ = Status::Ok();
        TICTAC_LOG(info) << "verbs port " << name_ << " is active again";
      }
      return;
    default:
      TICTAC_LOG(debug) << "verbs async event '" << name << "' on " << name_ << " (qp " << qp.str()
                        << ", port " << port << ")";
      return;
  }
}

void Device::fail_all(const Status& status) {
  TICTAC_LOG(warn) << status.message();
  std::vector<std::uint32_t> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  for (std::uint32_t id : ids) {
    auto it = clients_.find(id);  // an earlier failure may have removed others
    if (it != clients_.end()) it->second->on_async_error(status);
  }
}

}  // namespace tictac::verbs
