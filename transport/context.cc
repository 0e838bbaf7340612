#include "transport/context.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "common/log.h"
#include "transport/auth/token.h"
#include "transport/counters.h"
#include "transport/core.h"
#include "transport/cuda_devices.h"
#include "transport/request.h"
#include "transport/tcp/factory.h"

namespace tictac::transport {
namespace {

std::string default_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "host") + ":" + std::to_string(getpid());
}

}  // namespace

Result<std::unique_ptr<Context>> Context::create(ContextOptions options) {
  TransportConfig config;
  if (options.config) {
    config = *options.config;
  } else {
    Result<TransportConfig> env = TransportConfig::from_env();
    TICTAC_RETURN_IF_ERROR(env);
    config = *env;
  }
  TICTAC_RETURN_IF_ERROR(config.validate());
  std::optional<std::string> auth_token;
  if (options.auth_token) {
    if (!options.auth_token->empty()) {
      TICTAC_RETURN_IF_ERROR(
          auth::validate_token(*options.auth_token, "ContextOptions::auth_token"));
      auth_token = std::move(options.auth_token);
    }
  } else {
    Result<std::optional<std::string>> env = auth::kAuthToken.get();
    TICTAC_RETURN_IF_ERROR(env);
    auth_token = std::move(env).value();
  }
  if (config.frame_mac && !auth_token) {
    return invalid_argument(
        "TICTAC_AUTH_MAC=1 needs an auth token: frame MACs are keyed by it; set TICTAC_AUTH_TOKEN "
        "(or ContextOptions::auth_token) to the same secret on all ranks, or set TICTAC_AUTH_MAC=0");
  }
  if (options.backends.empty()) options.backends.push_back(tcp::create());
  std::string name = options.name.empty() ? default_name() : options.name;
  if (name.size() > kMaxNameBytes) {
    return invalid_argument("context name of " + std::to_string(name.size()) +
                            " bytes is longer than " + std::to_string(kMaxNameBytes));
  }
  // Before the engine's thread starts: a bad path fails here, with nothing to tear down.
  Result<std::unique_ptr<MessageTrace>> trace =
      MessageTrace::open(options.trace_path, name, config);
  TICTAC_RETURN_IF_ERROR(trace);
  Result<std::unique_ptr<ProgressEngine>> engine = ProgressEngine::create(options.mode);
  TICTAC_RETURN_IF_ERROR(engine);

  for (const auto& b : options.backends) {  // before Core attaches them
    b->set_auth_token(auth_token);
    b->set_handshake_limits(config.max_handshakes,
                            std::min(config.handshake_timeout, config.timeout));
  }
  std::unique_ptr<Context> ctx(new Context(config, name, std::move(engine).value()));
  ctx->cuda_ = std::make_unique<CudaDevices>(options.cuda_api);
  for (const auto& b : options.backends) {
    ctx->backend_status_.push_back(
        BackendStatus{std::string(b->name()), b->viability(), b->capabilities()});
  }
  ctx->trace_on_ = *trace != nullptr;
  ctx->core_ = std::make_unique<Core>(*ctx->engine_, config, name, std::move(options.backends),
                                      std::move(auth_token), *ctx->cuda_);
  ctx->core_->set_trace(std::move(trace).value());
  Core* core = ctx->core_.get();
  Result<bool> init = ctx->call<bool>([core](std::function<void(Result<bool>)> done) {
    Status st = core->init();
    if (st.ok()) {
      done(true);
    } else {
      done(st);
    }
  });
  TICTAC_RETURN_IF_ERROR(init);
  return ctx;
}

Context::Context(TransportConfig config, std::string name, std::unique_ptr<ProgressEngine> engine)
    : config_(config), name_(std::move(name)), engine_(std::move(engine)) {}

Context::~Context() { join(); }

std::vector<BackendStatus> Context::backends() const { return backend_status_; }

Result<MemoryRegion> Context::register_buffer(const BufferDesc& desc) {
  if (desc.type != MemoryType::cuda) return MemoryRegion::register_buffer(desc);
  Result<MemoryRegion> region = MemoryRegion::register_device(desc, cuda_->api());
  TICTAC_RETURN_IF_ERROR(region);
  Result<CudaDevice*> dev = cuda_->prepare(region->desc().cuda_device);
  TICTAC_RETURN_IF_ERROR(dev);
  return region;
}

template <typename T>
Result<T> Context::call(std::function<void(std::function<void(Result<T>)>)> op) {
  if (joined_.load()) return Status(StatusCode::cancelled, "context is joined");
  const bool manual = engine_->mode() == ProgressEngine::Mode::manual;
  if ((!manual && engine_->on_loop_thread()) || (manual && engine_->dispatching())) {
    return invalid_argument(
        "blocking transport call made from a completion callback; "
        "callbacks must not block (post the work elsewhere)");
  }
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    std::optional<Result<T>> result;
  };
  auto shared = std::make_shared<Shared>();
  engine_->post([op, shared] {
    op([shared](Result<T> r) {
      std::lock_guard<std::mutex> lock(shared->m);
      if (!shared->result) shared->result.emplace(std::move(r));
      shared->cv.notify_all();
    });
  });
  if (manual) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(shared->m);
        if (shared->result) break;
      }
      engine_->progress(std::chrono::milliseconds(10));
    }
  } else {
    std::unique_lock<std::mutex> lock(shared->m);
    shared->cv.wait(lock, [&] { return shared->result.has_value(); });
  }
  std::lock_guard<std::mutex> lock(shared->m);
  return std::move(*shared->result);
}

Result<std::string> Context::listen(std::string_view address) {
  Core* core = core_.get();
  std::string addr(address);
  return call<std::string>(
      [core, addr](std::function<void(Result<std::string>)> done) { done(core->listen(addr)); });
}

Result<PeerId> Context::connect(std::string_view address) {
  Core* core = core_.get();
  std::string addr(address);
  return call<PeerId>([core, addr](std::function<void(Result<PeerId>)> done) {
    core->connect(addr, std::move(done));
  });
}

Result<PeerId> Context::accept(std::chrono::milliseconds timeout) {
  Core* core = core_.get();
  const auto deadline = Clock::now() + timeout;
  return call<PeerId>([core, deadline](std::function<void(Result<PeerId>)> done) {
    core->accept(deadline, std::move(done));
  });
}

Result<std::string> Context::peer_name(PeerId peer) {
  Core* core = core_.get();
  return call<std::string>(
      [core, peer](std::function<void(Result<std::string>)> done) { done(core->peer_name(peer)); });
}

namespace {
// The open batches of this thread: one per Context, with its nesting depth and held tasks.
struct HeldBatch {
  const void* ctx = nullptr;
  int depth = 0;
  std::vector<std::function<void()>> tasks;
};
thread_local std::vector<HeldBatch> t_batches;

HeldBatch* open_batch(const void* ctx) {
  for (HeldBatch& b : t_batches) {
    if (b.ctx == ctx) return &b;
  }
  return nullptr;
}
}  // namespace

RequestId Context::submit(bool is_send, PeerId peer, Tag tag, const MemoryRegion& region,
                          std::uint64_t offset, std::uint64_t length, Priority priority,
                          Callback cb) {
  if (joined_.load()) return kNoRequest;
  const RequestId id = next_request_.fetch_add(1);
  const std::size_t region_bytes = region.size();
  Status range;
  if (offset > region_bytes || length > region_bytes - offset) {
    range =
        invalid_argument("range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                         ") lies outside the region of " + std::to_string(region_bytes) + " bytes");
  } else if (length > (std::uint64_t{1} << 48)) {
    range =
        invalid_argument("message of " + std::to_string(length) + " bytes exceeds the 2^48 limit");
  }
  const bool device = region.type() == MemoryType::cuda;
  DeviceRoute route;
  if (device && range.ok()) {
    route.device = region.desc().cuda_device;
    route.stream = region.desc().cuda_stream;
    // Set-up on this thread (a no-op once done), so that the loop never blocks in CUDA; then the
    // producer gate / consumer wait, so that the stream is ordered at this call (cuda_path.h).
    Result<CudaDevice*> dev = cuda_->prepare(route.device);
    if (!dev.ok()) {
      range = dev.status();
    } else {
      range = enqueue_at_submit(**dev, is_send, route);
    }
  }
  auto req = std::make_unique<Request>(id, is_send ? RequestKind::send : RequestKind::recv, peer,
                                       tag, region.data() + (range.ok() ? offset : 0), length,
                                       priority, std::move(cb));
  if (trace_on_) req->stamp_trace_submit(trace_clock_ns());
  Core* core = core_.get();
  if (range.ok() && !device && open_batch(this) == nullptr) {
    // The common case: the request itself is the posted item (one allocation per submit).
    req->submit_to(core);
    engine_->post(req.release());
    return id;
  }
  // shared_ptr: std::function needs a copyable callable.
  auto holder = std::make_shared<std::unique_ptr<Request>>(std::move(req));
  post_or_hold([core, holder, range, is_send, device, route] {
    if (!range.ok()) {
      (*holder)->complete(range, 0, (*holder)->peer());
      return;
    }
    if (device && is_send) {
      core->send_device(std::move(*holder), route);
    } else if (device) {
      core->recv_device(std::move(*holder), route);
    } else if (is_send) {
      core->send(std::move(*holder));
    } else {
      core->recv(std::move(*holder));
    }
  });
  return id;
}

RequestId Context::send(PeerId peer, Tag tag, const MemoryRegion& region, std::uint64_t offset,
                        std::uint64_t length, Priority priority, Callback callback) {
  return submit(true, peer, tag, region, offset, length, priority, std::move(callback));
}

RequestId Context::recv(PeerId peer, Tag tag, MemoryRegion& region, std::uint64_t offset,
                        std::uint64_t length, Callback callback) {
  return submit(false, peer, tag, region, offset, length, 0, std::move(callback));
}

void Context::post_or_hold(std::function<void()> task) {
  if (HeldBatch* b = open_batch(this)) {
    b->tasks.push_back(std::move(task));
    return;
  }
  engine_->post(std::move(task));
}

void Context::begin_batch() {
  if (HeldBatch* b = open_batch(this)) {
    ++b->depth;
    return;
  }
  t_batches.push_back(HeldBatch{this, 1, {}});
}

void Context::end_batch() {
  for (auto it = t_batches.begin(); it != t_batches.end(); ++it) {
    if (it->ctx != this) continue;
    if (--it->depth > 0) return;
    std::vector<std::function<void()>> tasks = std::move(it->tasks);
    t_batches.erase(it);
    if (tasks.empty() || joined_.load()) return;
    engine_->post([tasks = std::move(tasks)] {
      for (const std::function<void()>& t : tasks) t();
    });
    return;
  }
}

void Context::cancel(RequestId id) {
  if (joined_.load()) return;
  Core* core = core_.get();
  post_or_hold([core, id] { core->cancel(id); });
}

void Context::close() {
  if (joined_.load()) return;
  Core* core = core_.get();
  engine_->post([core] { core->close(Status(StatusCode::cancelled, "context closed")); });
}

void Context::join() {
  if (joined_.load()) return;
  close();
  // Everything posted before this marker ran when it runs (the inbox is FIFO).
  Result<bool> drained = call<bool>([](std::function<void(Result<bool>)> done) { done(true); });
  (void)drained;
  joined_.store(true);
  engine_->stop();
  engine_->join();
  TICTAC_LOG(info) << "transport counters (this process so far): "
                   << describe_counters(transport_counters());
}

std::size_t Context::progress(std::chrono::milliseconds timeout) {
  return engine_->progress(timeout);
}

void Request::run_posted() {
  std::unique_ptr<Request> self(this);
  if (kind_ == RequestKind::send) {
    submit_to_->send(std::move(self));
  } else {
    submit_to_->recv(std::move(self));
  }
}

}  // namespace tictac::transport
