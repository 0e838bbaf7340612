// A peer for the UCX failure tests, run as its own process (exec'd by ucx_backend_test.cc so that
// no UCX state crosses a fork): listens on ucx://127.0.0.1:0, prints its address, accepts one
// peer, posts a receive that is never satisfied, prints "ready" and waits to be killed (exits
// with 3 after 60 s if nobody does). Exit codes 10-13 name the step that failed.
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "transport/context.h"
#include "transport/ucx/factory.h"

int main() {
  using namespace tictac::transport;
  ContextOptions o;
  o.name = "victim";
  TransportConfig config;
  config.timeout = std::chrono::seconds(30);
  o.config = config;
  o.backends.push_back(ucx::create());
  auto ctx = Context::create(std::move(o));
  if (!ctx.ok()) return 10;
  auto addr = (*ctx)->listen("ucx://127.0.0.1:0");
  if (!addr.ok()) return 11;
  std::printf("%s\n", addr->c_str());
  std::fflush(stdout);
  auto peer = (*ctx)->accept(std::chrono::seconds(30));
  if (!peer.ok()) return 12;
  std::vector<std::byte> buf(100);
  MemoryRegion region = MemoryRegion::host(buf.data(), buf.size()).value();
  (*ctx)->recv(*peer, 1, region, 0, buf.size(), nullptr);
  if (!(*ctx)->peer_name(*peer).ok()) return 13;
  std::printf("ready\n");
  std::fflush(stdout);
  sleep(60);
  return 3;
}
