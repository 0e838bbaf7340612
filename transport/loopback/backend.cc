// LoopbackBackend: listeners and connects on a Fabric; the front door is loopback::create().
#include <vector>

#include "transport/loopback/fabric.h"

namespace tictac::transport::loopback {
namespace {

constexpr auto kRetry = std::chrono::milliseconds(5);

class LoopbackBackend final : public Backend {
 public:
  explicit LoopbackBackend(std::shared_ptr<Fabric> fabric) : fabric_(std::move(fabric)) {}
  ~LoopbackBackend() override { shutdown(); }

  std::string_view name() const override { return "loopback"; }
  Viability viability() const override { return Viability{true, "in-process fabric"}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.max_frames_in_flight = 64;
    return c;
  }

  Status attach(ProgressEngine& engine) override {
    engine_ = &engine;
    return Status::Ok();
  }

  Result<std::string> listen(std::string_view address, AcceptFn on_accept) override {
    auto fn = std::make_shared<AcceptFn>(std::move(on_accept));
    Result<std::string> name = fabric_->listen(std::string(address), *engine_, fn);
    TICTAC_RETURN_IF_ERROR(name);
    listeners_.emplace_back(*name, std::move(fn));
    return "loopback://" + *name;
  }

  void connect(std::string_view address, Clock::time_point deadline, ConnectFn on_done) override {
    attempt(std::string(address), deadline, std::make_shared<ConnectFn>(std::move(on_done)), generation_);
  }

  void shutdown() override {
    for (auto& [name, fn] : listeners_) fabric_->unlisten(name);
    listeners_.clear();
    ++generation_;  // abandons pending connects
  }

 private:
  // Always reports from a later loop step, never inside connect().
  void attempt(std::string name, Clock::time_point deadline, std::shared_ptr<ConnectFn> done,
               std::uint64_t generation) {
    engine_->add_timer(Clock::now(), [this, name, deadline, done, generation] {
      if (generation != generation_) return;
      Result<std::unique_ptr<Endpoint>> ep = fabric_->connect(name, *engine_);
      if (ep.ok()) {
        (*done)(std::move(ep));
        return;
      }
      if (Clock::now() + kRetry >= deadline) {
        (*done)(Status(StatusCode::timeout, ep.status().message() + " (gave up at the connect deadline)"));
        return;
      }
      engine_->add_timer(Clock::now() + kRetry, [this, name, deadline, done, generation] {
        attempt(name, deadline, done, generation);
      });
    });
  }

  std::shared_ptr<Fabric> fabric_;
  ProgressEngine* engine_ = nullptr;
  std::vector<std::pair<std::string, std::shared_ptr<AcceptFn>>> listeners_;
  std::uint64_t generation_ = 0;
};

}  // namespace

std::unique_ptr<Backend> create(std::shared_ptr<Fabric> fabric) {
  return std::make_unique<LoopbackBackend>(std::move(fabric));
}

}  // namespace tictac::transport::loopback
