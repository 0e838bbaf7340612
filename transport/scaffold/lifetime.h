// LoopLifetime: the liveness of an object whose work is queued on a ProgressEngine (deferred
// tasks, timers, UCX `later` work) and whose loop callbacks may destroy it. Part of the backend
// scaffold shared by tcp, ucx and verbs (docs/transport.md "Backend scaffold").
//
//   class Owner {
//     void schedule() { engine_.defer(lifetime_.guard([this] { run(); })); }
//     void pump() {
//       const auto self = lifetime_.token();
//       for (...) { sink_->on_frame(h); if (!self.alive()) return; }  // the sink may destroy us
//     }
//     LoopLifetime lifetime_;  // a member: its destruction invalidates every guard and token
//   };
//
// guard(fn) returns a copyable callable that runs fn only while the owner lives; token() gives
// a Token whose alive() says the same, for checks after a callback inside a loop. Destroying the
// LoopLifetime (with its owner) is what invalidates them: nothing else does.
// Threading: tokens and guards may be copied, checked and destroyed on any thread (a weak_ptr:
// atomic reference counts), but alive() says nothing about the owner's state beyond that moment,
// so an owner that may die on another thread needs its own synchronisation, as before; every
// owner in the backends runs on its loop thread only.
#pragma once

#include <memory>
#include <utility>

namespace tictac::transport::scaffold {

class LoopLifetime {
 public:
  class Token {
   public:
    Token() = default;  // never alive
    bool alive() const { return !flag_.expired(); }

   private:
    friend class LoopLifetime;
    explicit Token(std::weak_ptr<const char> flag) : flag_(std::move(flag)) {}
    std::weak_ptr<const char> flag_;
  };

  LoopLifetime() = default;
  LoopLifetime(const LoopLifetime&) = delete;
  LoopLifetime& operator=(const LoopLifetime&) = delete;

  Token token() const { return Token(flag_); }

  // A callable that forwards its arguments to fn while the owner lives and does nothing after.
  template <class Fn>
  auto guard(Fn fn) const {
    return [self = token(), fn = std::move(fn)](auto&&... args) mutable {
      if (self.alive()) fn(std::forward<decltype(args)>(args)...);
    };
  }

 private:
  std::shared_ptr<const char> flag_ = std::make_shared<const char>('\0');
};

}  // namespace tictac::transport::scaffold
