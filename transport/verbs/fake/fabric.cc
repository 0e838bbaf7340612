// Fake fabric: construction (devices, ports, addresses), the executor thread, FakeFabric's
// public methods and fault injection.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

constexpr std::uint64_t kGuidBase = 0x0002c90300000000ULL;  // a made-up vendor prefix

ibv_gid link_local_gid(std::uint64_t port_guid) {
  ibv_gid g{};
  g.global.subnet_prefix = htobe64(0xfe80000000000000ULL);
  g.global.interface_id = htobe64(port_guid);
  return g;
}

// RoCE v2 style IPv4-mapped GID ::ffff:10.<device>.<port>.1.
ibv_gid ipv4_mapped_gid(std::size_t device, std::size_t port) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 10;
  g.raw[13] = static_cast<std::uint8_t>(device);
  g.raw[14] = static_cast<std::uint8_t>(port);
  g.raw[15] = 1;
  return g;
}

std::string hex_qp(std::uint32_t num) {
  std::ostringstream os;
  os << "0x" << std::hex << num;
  return os.str();
}

}  // namespace

FabricState::FabricState(FabricOptions opts) : options(std::move(opts)) {
  std::uint16_t next_lid = 1;
  for (std::size_t i = 0; i < options.devices.size(); ++i) {
    const DeviceSpec& spec = options.devices[i];
    auto dev = std::make_unique<Device>();
    dev->h.owner = dev.get();
    dev->fabric = this;
    dev->name = spec.name;
    dev->guid = kGuidBase + ((i + 1) << 8);
    ibv_device& d = dev->h.ibv;
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(d.name, sizeof(d.name), "%s", spec.name.c_str());
    std::snprintf(d.dev_name, sizeof(d.dev_name), "uverbs%zu", i);
    std::snprintf(d.dev_path, sizeof(d.dev_path), "/fake/infiniband_verbs/uverbs%zu", i);
    std::snprintf(d.ibdev_path, sizeof(d.ibdev_path), "/fake/infiniband/%s", spec.name.c_str());
    for (std::size_t p = 0; p < spec.ports.size(); ++p) {
      Port port;
      port.spec = spec.ports[p];
      port.state = port.spec.state;
      const std::uint64_t port_guid = dev->guid + p + 1;
      port.gids.push_back(link_local_gid(port_guid));
      if (port.spec.link_layer == IBV_LINK_LAYER_ETHERNET) {
        port.gids.push_back(ipv4_mapped_gid(i, p + 1));
      } else {
        port.lid = next_lid++;
      }
      dev->ports.push_back(std::move(port));
    }
    devices.push_back(std::move(dev));
  }
  if (options.execution == Execution::thread) executor = std::thread([this] { executor_loop(); });
}

FabricState::~FabricState() {
  {
    std::lock_guard lk(mu);
    stopping = true;
  }
  executor_cv.notify_all();
  if (executor.joinable()) executor.join();
  for (auto& [ptr, ctx] : contexts) ::close(ctx->h.ibv.async_fd);
  for (auto& [ptr, ch] : channels) ::close(ch->h.ibv.fd);
}

FakeFabric::FakeFabric(FabricOptions options)
    : state_(std::make_unique<FabricState>(std::move(options))) {}

FakeFabric::~FakeFabric() = default;

IbvApi FakeFabric::api() { return make_fake_api(state_.get()); }

std::size_t FakeFabric::progress() {
  std::lock_guard lk(state_->mu);
  return state_->step_locked();
}

std::size_t FakeFabric::run_until_idle(std::size_t max_steps) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < max_steps; ++i) {
    const std::size_t n = progress();
    if (n == 0) break;
    total += n;
  }
  return total;
}

namespace {

Status unknown_qp(std::uint32_t num) {
  return invalid_argument("fake fabric: no QP " + hex_qp(num) +
                          " (pass ibv_qp::qp_num of a live QP of this fabric)");
}

}  // namespace

Status FakeFabric::delay(std::uint32_t qp_num, int steps) {
  std::lock_guard lk(state_->mu);
  Qp* qp = state_->find_qp_locked(qp_num);
  if (qp == nullptr) return unknown_qp(qp_num);
  if (steps < 0) return invalid_argument("fake fabric: delay steps must be >= 0");
  qp->delay_steps = steps;
  return Status::Ok();
}

Status FakeFabric::drop_connection(std::uint32_t qp_num) {
  std::lock_guard lk(state_->mu);
  Qp* qp = state_->find_qp_locked(qp_num);
  if (qp == nullptr) return unknown_qp(qp_num);
  qp->dropped = true;
  return Status::Ok();
}

Status FakeFabric::restore_connection(std::uint32_t qp_num) {
  std::lock_guard lk(state_->mu);
  Qp* qp = state_->find_qp_locked(qp_num);
  if (qp == nullptr) return unknown_qp(qp_num);
  qp->dropped = false;
  state_->executor_cv.notify_all();
  return Status::Ok();
}

Status FakeFabric::fail_next(std::uint32_t qp_num, ibv_wc_status status) {
  std::lock_guard lk(state_->mu);
  Qp* qp = state_->find_qp_locked(qp_num);
  if (qp == nullptr) return unknown_qp(qp_num);
  if (status == IBV_WC_SUCCESS) {
    return invalid_argument("fake fabric: fail_next needs an error status, not IBV_WC_SUCCESS");
  }
  qp->fail_next = status;
  return Status::Ok();
}

Status FakeFabric::qp_fatal(std::uint32_t qp_num) {
  std::lock_guard lk(state_->mu);
  Qp* qp = state_->find_qp_locked(qp_num);
  if (qp == nullptr) return unknown_qp(qp_num);
  state_->error_qp_locked(qp);
  ibv_async_event ev{};
  ev.element.qp = &qp->h.ibv;
  ev.event_type = IBV_EVENT_QP_FATAL;
  state_->post_async_locked(qp->ctx, ev);
  return Status::Ok();
}

Status FakeFabric::set_port_state(std::string_view device, std::uint8_t port,
                                  ibv_port_state state) {
  std::lock_guard lk(state_->mu);
  Device* dev = state_->find_device_locked(device);
  if (dev == nullptr) {
    return invalid_argument("fake fabric: no device '" + std::string(device) + "'");
  }
  if (port < 1 || port > dev->ports.size()) {
    return invalid_argument("fake fabric: device '" + dev->name + "' has no port " +
                            std::to_string(port) + " (it has " +
                            std::to_string(dev->ports.size()) + ")");
  }
  Port& p = dev->ports[port - 1];
  const bool was_active = p.state == IBV_PORT_ACTIVE;
  const bool is_active = state == IBV_PORT_ACTIVE;
  p.state = state;
  if (was_active != is_active) {
    for (auto& [ptr, ctx] : state_->contexts) {
      if (ctx->device != dev) continue;
      ibv_async_event ev{};
      ev.element.port_num = port;
      ev.event_type = is_active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
      state_->post_async_locked(ctx.get(), ev);
    }
  }
  state_->executor_cv.notify_all();
  return Status::Ok();
}

void FakeFabric::corrupt_next_write_rkey() {
  std::lock_guard lk(state_->mu);
  state_->corrupt_next_write = true;
}

void FakeFabric::revoke_next_remote_mr() {
  std::lock_guard lk(state_->mu);
  state_->revoke_next_write = true;
}

WriteTraffic FakeFabric::write_traffic() const {
  std::lock_guard lk(state_->mu);
  return state_->traffic;
}

RegistrationStats FakeFabric::registration_stats() const {
  std::lock_guard lk(state_->mu);
  return state_->registrations;
}

std::uint64_t FakeFabric::locked_bytes() const {
  std::lock_guard lk(state_->mu);
  return state_->locked_bytes;
}

std::vector<int> FakeFabric::dmabuf_fds() const {
  std::lock_guard lk(state_->mu);
  std::vector<int> out;
  for (const auto& [key, mr] : state_->mrs) {
    if (mr->dmabuf_fd >= 0) out.push_back(mr->dmabuf_fd);
  }
  return out;
}

std::size_t FakeFabric::dmabuf_closed_before_dereg() const {
  std::lock_guard lk(state_->mu);
  return state_->dmabuf_closed_before_dereg;
}

std::size_t FakeFabric::live_objects() const {
  std::lock_guard lk(state_->mu);
  return state_->contexts.size() + state_->pds.size() + state_->mrs.size() +
         state_->channels.size() + state_->cqs.size() + state_->qps.size();
}

}  // namespace tictac::verbs::fake
