// ConnectorSet<C>: a backend's connectors (or acceptors) in flight (backend scaffold,
// docs/transport.md). start() numbers a new one, hands it the `finished` callback that erases it
// from a task deferred on the engine (never from inside its own report), keeps it and starts it;
// shutdown() abandons every one still there (C::abandon(), where C has one: no report follows)
// and drops them. C needs start() and takes `finished` in the factory passed to start().
// Threading: loop thread of the engine only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "transport/progress_engine.h"
#include "transport/scaffold/lifetime.h"

namespace tictac::transport::scaffold {

template <class C>
class ConnectorSet {
 public:
  using Finished = std::function<void()>;

  ConnectorSet() = default;
  ConnectorSet(const ConnectorSet&) = delete;
  ConnectorSet& operator=(const ConnectorSet&) = delete;

  // make(Finished) -> std::unique_ptr<C>; the new connector is kept, then started.
  template <class Make>
  C& start(ProgressEngine& engine, Make&& make) {
    const std::uint64_t id = next_id_++;
    Finished finished = lifetime_.guard(
        [this, id, &engine] { engine.defer(lifetime_.guard([this, id] { items_.erase(id); })); });
    std::unique_ptr<C> c = std::forward<Make>(make)(std::move(finished));
    C* raw = c.get();
    items_.emplace(id, std::move(c));
    raw->start();
    return *raw;
  }

  // Abandons (where C can) and drops every connector.
  void shutdown() {
    if constexpr (requires(C & c) { c.abandon(); }) {
      for (auto& [id, c] : items_) c->abandon();
    }
    items_.clear();
  }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::map<std::uint64_t, std::unique_ptr<C>> items_;
  std::uint64_t next_id_ = 1;
  LoopLifetime lifetime_;  // last: erase tasks still queued after the set is gone do nothing
};

}  // namespace tictac::transport::scaffold
