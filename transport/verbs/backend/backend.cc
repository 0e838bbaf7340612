// VerbsBackend: the Device, side-channel listeners, connectors and pending accepts.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "transport/auth/token.h"
#include "transport/scaffold/connector_set.h"
#include "transport/verbs/backend/device.h"
#include "transport/verbs/backend/factory.h"
#include "transport/verbs/backend/handshake.h"
#include "transport/verbs/ibv_loader.h"
#include "transport/verbs/probe.h"

namespace tictac::verbs {
namespace {

class VerbsBackend final : public transport::Backend {
 public:
  VerbsBackend(Result<IbvApi> api, Result<VerbsConfig> config)
      : api_(std::move(api)), config_(std::move(config)) {}
  ~VerbsBackend() override {
    shutdown();
    if (device_) device_->detach();
  }

  std::string_view name() const override { return "verbs"; }

  void set_handshake_limits(std::uint32_t max_concurrent,
                            std::chrono::milliseconds timeout) override {
    max_acceptors_ = std::max<std::uint32_t>(1, max_concurrent);
    accept_timeout_ = timeout;
  }

  void set_auth_token(const std::optional<std::string>& token) override {
    token_ = std::make_unique<SideToken>(token);
    token_set_ = true;
  }

  transport::Viability viability() const override {
    if (!api_.ok()) return {false, api_.status().message()};
    if (!config_.ok()) return {false, "verbs not viable: " + config_.status().message()};
    Result<std::vector<ActivePort>> ports = find_active_ports(*api_);
    if (!ports.ok()) return {false, ports.status().message()};
    const ActivePort& p = ports->front();
    return {true, "RC queue pairs via " + api_->provider + " on " + p.device + " port " +
                      std::to_string(p.port) + " (" + link_layer_name(p.attr.link_layer) +
                      ", MTU " + std::to_string(mtu_bytes(p.attr.active_mtu)) + "); " +
                      std::to_string(config_->bytes_per_peer() >> 10) + " KiB registered per peer"};
  }

  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.host_memory = true;
    // cuda_memory stays false (device buffers are staged by the core) until the send, receive
    // and zero-copy paths register device ranges through GpuRegistrar instead of memcpy'ing
    // them into host rings (docs/backends.md "GPU memory" lists what is missing).
    c.max_frames_in_flight = config_.ok() ? config_->ring_slots : 0;
    return c;
  }

  Status attach(transport::ProgressEngine& engine) override {
    TICTAC_RETURN_IF_ERROR(api_);
    TICTAC_RETURN_IF_ERROR(config_);
    if (!token_set_) {  // used without a Context: the token comes from TICTAC_AUTH_TOKEN
      Result<std::optional<std::string>> env = auth::kAuthToken.get();
      TICTAC_RETURN_IF_ERROR(env);
      token_ = std::make_unique<SideToken>(std::move(env).value());
    }
    engine_ = &engine;
    Result<std::shared_ptr<Device>> dev = Device::open(*api_, *config_, engine);
    TICTAC_RETURN_IF_ERROR(dev);
    device_ = std::move(dev).value();
    return Status::Ok();
  }

  Result<std::string> listen(std::string_view address, transport::AcceptFn on_accept) override {
    if (!device_) return Status(StatusCode::unavailable, "verbs backend is not attached");
    Result<sockaddr_in> addr = parse_side_address(address);
    TICTAC_RETURN_IF_ERROR(addr);
    Result<int> fd = listen_side(*addr);
    TICTAC_RETURN_IF_ERROR(fd);
    auto fn = std::make_shared<transport::AcceptFn>(std::move(on_accept));
    Status st =
        engine_->watch(*fd, EPOLLIN, [this, lfd = *fd, fn](std::uint32_t) { accept_all(lfd, fn); });
    if (!st.ok()) {
      ::close(*fd);
      return st;
    }
    listeners_.push_back(*fd);
    return "verbs://" + local_address_of(*fd);
  }

  void connect(std::string_view address, transport::Clock::time_point deadline,
               transport::ConnectFn on_done) override {
    Result<sockaddr_in> addr = parse_side_address(address);
    Status why =
        !device_ ? Status(StatusCode::unavailable, "verbs backend is not attached") : addr.status();
    if (!why.ok()) {
      engine_->defer([on_done = std::move(on_done), why] { on_done(why); });
      return;
    }
    connectors_.start(*engine_, [&](std::function<void()> finished) {
      return std::make_unique<Connector>(device_, *token_, *addr, std::string(address), deadline,
                                         std::move(on_done), std::move(finished));
    });
  }

  void shutdown() override {
    for (int fd : listeners_) {
      engine_->unwatch(fd);
      ::close(fd);
    }
    listeners_.clear();
    connectors_.shutdown();  // abandoned: no report
    acceptors_.shutdown();   // dropped: an Acceptor reports only to the log
  }

 private:
  void accept_all(int lfd, const std::shared_ptr<transport::AcceptFn>& fn) {
    for (;;) {
      const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          TICTAC_LOG(warn) << "verbs side channel: accept failed: " << std::strerror(errno);
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      if (acceptors_.size() >= max_acceptors_) {
        // A flood of side-channel connects (authenticated or not) holds at most this many fds
        // and acceptors, each for at most accept_timeout_; the rest are closed at once.
        TICTAC_LOG(warn) << "verbs side channel: refusing an incoming connection from "
                         << peer_address_of(fd) << ": " << acceptors_.size()
                         << " handshakes are already in progress (TICTAC_MAX_HANDSHAKES="
                         << max_acceptors_ << ")";
        ::close(fd);
        continue;
      }
      auto done = [fn](Result<std::unique_ptr<VerbsEndpoint>> ep) {
        if (!ep.ok()) {
          TICTAC_LOG(warn) << "verbs: refused an incoming connection: " << ep.status().to_string();
          return;
        }
        (*fn)(std::move(ep).value());
      };
      acceptors_.start(*engine_, [&](std::function<void()> finished) {
        return std::make_unique<Acceptor>(device_, *token_, fd, accept_timeout_, done,
                                          std::move(finished));
      });
    }
  }

  Result<IbvApi> api_;
  Result<VerbsConfig> config_;
  transport::ProgressEngine* engine_ = nullptr;
  std::shared_ptr<Device> device_;
  std::unique_ptr<SideToken> token_ =
      std::make_unique<SideToken>();  // outlives acceptors/connectors
  bool token_set_ = false;
  std::vector<int> listeners_;
  std::uint32_t max_acceptors_ = 64;  // TICTAC_MAX_HANDSHAKES (set_handshake_limits)
  std::chrono::milliseconds accept_timeout_{10'000};  // TICTAC_HANDSHAKE_TIMEOUT
  transport::scaffold::ConnectorSet<Connector> connectors_;
  transport::scaffold::ConnectorSet<Acceptor> acceptors_;
};

}  // namespace

std::unique_ptr<transport::Backend> create() {
  return std::make_unique<VerbsBackend>(load_libibverbs(), VerbsConfig::from_env());
}

std::unique_ptr<transport::Backend> create(const IbvApi& api, const VerbsConfig& config) {
  Status valid = config.validate();
  if (!valid.ok()) return std::make_unique<VerbsBackend>(api, Result<VerbsConfig>(valid));
  return std::make_unique<VerbsBackend>(api, config);
}

}  // namespace tictac::verbs
