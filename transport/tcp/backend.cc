// TcpBackend: creates listeners and connectors; the front door is tcp::create() in factory.h.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "transport/scaffold/connector_set.h"
#include "transport/shaping/shaping_endpoint.h"
#include "transport/tcp/connector.h"
#include "transport/tcp/factory.h"
#include "transport/tcp/lanes.h"
#include "transport/tcp/linger.h"
#include "transport/tcp/listener.h"

namespace tictac::transport::tcp {
namespace {

class TcpBackend final : public Backend {
 public:
  ~TcpBackend() override { shutdown(); }

  std::string_view name() const override { return "tcp"; }

  Viability viability() const override {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return Viability{false, std::string("cannot create an IPv4 TCP socket: ") + std::strerror(errno)};
    }
    ::close(fd);
    return Viability{true, "kernel TCP over IPv4"};
  }

  Capabilities capabilities() const override {
    Capabilities c;
    c.host_memory = true;
    c.max_frames_in_flight = 256;
    // Past 1 MiB a chunk saves no per-chunk work that shows, but the socket's unsent limit
    // follows it (socket_options.h) and a new level waits behind it: loopback 1 MiB solo chunks
    // gave 1.12x the bandwidth of 2-4 MiB ones and 0.09 instead of 0.50 ms steady-state
    // pre-emption latency (docs/benchmarks.md, "The largest solo chunk").
    c.solo_chunk_max = 1 << 20;
    return c;
  }

  void set_auth_token(const std::optional<std::string>& token) override {
    has_token_ = token.has_value();
  }

  Status attach(ProgressEngine& engine) override {
    Result<bool> lanes = lanes_from_env();
    if (!lanes.ok()) return lanes.status();
    Result<std::uint64_t> lane_switch = lane_switch_bytes_from_env();
    if (!lane_switch.ok()) return lane_switch.status();
    // The lane socket is not authenticated (transport/tcp/lanes.h): none where a token is set.
    lanes_ = *lanes && !has_token_;
    // TICTAC_RATE_LIMIT: reject a bad value now (while it is set, every new endpoint is wrapped
    // in a ShapingEndpoint).
    Result<shaping::EgressLimiter*> limiter = shaping::EgressLimiter::process_wide();
    if (!limiter.ok()) return limiter.status();
    engine_ = &engine;
    return Status::Ok();
  }

  Result<std::string> listen(std::string_view address, AcceptFn on_accept) override {
    AcceptFn shaped = [engine = engine_,
                       on_accept = std::move(on_accept)](std::unique_ptr<Endpoint> ep) {
      Result<std::unique_ptr<Endpoint>> w =
          shaping::ShapingEndpoint::wrap_if_limited(*engine, std::move(ep));
      if (w.ok()) {
        on_accept(std::move(w).value());
      } else {  // TICTAC_RATE_LIMIT was changed to a bad value after attach(): refuse the peer
        TICTAC_LOG(error) << "tcp: closing an accepted connection: " << w.status().to_string();
      }
    };
    Result<std::unique_ptr<TcpListener>> l =
        TcpListener::open(*engine_, address, std::move(shaped), lanes_, registry_);
    TICTAC_RETURN_IF_ERROR(l);
    std::string bound = "tcp://" + (*l)->address();
    listeners_.push_back(std::move(l).value());
    return bound;
  }

  void connect(std::string_view address, Clock::time_point deadline, ConnectFn on_done) override {
    ConnectFn shaped = [engine = engine_,
                        on_done = std::move(on_done)](Result<std::unique_ptr<Endpoint>> ep) {
      if (ep.ok()) ep = shaping::ShapingEndpoint::wrap_if_limited(*engine, std::move(ep).value());
      on_done(std::move(ep));
    };
    connectors_.start(*engine_, [&](std::function<void()> finished) {
      return std::make_unique<TcpConnector>(*engine_, std::string(address), deadline,
                                            std::move(shaped), std::move(finished), lanes_);
    });
  }

  void shutdown() override {
    listeners_.clear();
    connectors_.shutdown();  // abandoned: no report
    finish_lingering();  // the closed connections' sockets (tcp/linger.h)
  }

 private:
  ProgressEngine* engine_ = nullptr;
  bool has_token_ = false;
  bool lanes_ = false;
  std::shared_ptr<LaneRegistry> registry_ = std::make_shared<LaneRegistry>();
  std::vector<std::unique_ptr<TcpListener>> listeners_;
  scaffold::ConnectorSet<TcpConnector> connectors_;
};

}  // namespace

std::unique_ptr<Backend> create() { return std::make_unique<TcpBackend>(); }

}  // namespace tictac::transport::tcp
