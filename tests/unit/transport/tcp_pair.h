// Two Contexts joined by one TCP connection on 127.0.0.1, for tests that need a real socket.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "transport/context.h"

namespace tictac::transport::testing {

struct TcpPair {
  std::unique_ptr<Context> a, b;
  PeerId to = 0, from = 0;  // a's peer id of b, b's peer id of a
};

// b listens, a connects. `before_a` / `before_b` (optional) run just before each Context is
// created (to set the environment it reads).
inline TcpPair connect_tcp_pair(const std::function<void()>& before_a = {},
                                const std::function<void()>& before_b = {}) {
  using namespace std::chrono_literals;
  TcpPair p;
  if (before_a) before_a();
  auto a = Context::create({});
  if (before_b) before_b();
  auto b = Context::create({});
  EXPECT_TRUE(a.ok() && b.ok());
  p.a = std::move(a).value();
  p.b = std::move(b).value();
  std::string addr = *p.b->listen("tcp://127.0.0.1:0");
  auto accepted = std::async(std::launch::async, [&] { return p.b->accept(10s); });
  p.to = *p.a->connect(addr);
  p.from = *accepted.get();
  return p;
}

}  // namespace tictac::transport::testing
