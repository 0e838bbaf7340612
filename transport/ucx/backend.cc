// UcxBackend: owns the UCP context and worker, creates listeners and connectors; the front door
// is ucx::create() in factory.h.
#include <vector>

#include "transport/scaffold/connector_set.h"
#include "transport/ucx/connector.h"
#include "transport/ucx/factory.h"
#include "transport/ucx/listener.h"
#include "transport/ucx/memory.h"
#include "transport/ucx/ucp_context.h"
#include "transport/ucx/worker.h"

namespace tictac::transport::ucx {
namespace {

class UcxBackend final : public Backend {
 public:
  UcxBackend() : context_(UcpContext::create()) {}
  ~UcxBackend() override {
    shutdown();
    worker_.reset();  // after every listener, connector and endpoint of it
  }

  std::string_view name() const override { return "ucx"; }

  Viability viability() const override {
    if (!context_.ok()) return Viability{false, context_.status().message()};
    return Viability{true, (*context_)->description()};
  }

  Capabilities capabilities() const override {
    Capabilities c;
    c.host_memory = true;
    // Device buffers stage through host memory (the core's staged path) even when the loaded
    // UCX has CUDA support: the endpoint posts every buffer as UcxWorker::kMemoryType (host) and
    // copies eager payloads with memcpy, so claiming cuda_memory would hand it device pointers it
    // cannot move. Registration still refuses device regions UCX cannot handle (memory.cc).
    c.cuda_memory = false;
    c.max_frames_in_flight = 256;
    return c;
  }

  Status attach(ProgressEngine& engine) override {
    TICTAC_RETURN_IF_ERROR(context_);
    Result<std::unique_ptr<UcxWorker>> w = UcxWorker::create(engine, *context_);
    TICTAC_RETURN_IF_ERROR(w);
    worker_ = std::move(w).value();
    return Status::Ok();
  }

  Result<std::string> listen(std::string_view address, AcceptFn on_accept) override {
    Result<std::unique_ptr<UcxListener>> l = UcxListener::open(*worker_, address, std::move(on_accept));
    TICTAC_RETURN_IF_ERROR(l);
    std::string bound = "ucx://" + (*l)->address();
    listeners_.push_back(std::move(l).value());
    return bound;
  }

  void connect(std::string_view address, Clock::time_point deadline, ConnectFn on_done) override {
    connectors_.start(worker_->engine(), [&](std::function<void()> finished) {
      return std::make_unique<UcxConnector>(*worker_, std::string(address), deadline,
                                            std::move(on_done), std::move(finished));
    });
  }

  void shutdown() override {
    listeners_.clear();
    connectors_.shutdown();  // abandoned: no report
    // The connections were closed just before (Core::close): let their goodbyes and closes
    // finish while the peers' loops still answer.
    if (worker_) worker_->finish_closing_now();
  }

 private:
  Result<std::shared_ptr<UcpContext>> context_;
  std::unique_ptr<UcxWorker> worker_;
  std::vector<std::unique_ptr<UcxListener>> listeners_;
  scaffold::ConnectorSet<UcxConnector> connectors_;
};

}  // namespace

std::unique_ptr<Backend> create() { return std::make_unique<UcxBackend>(); }

}  // namespace tictac::transport::ucx
