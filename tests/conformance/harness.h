// Test harness shared by the conformance and fault tests: the list of backends to instantiate the
// suite for, a connected pair of Contexts, deterministic payloads, and a thread-safe recorder of
// completions with bounded waits (a hang fails the test instead of blocking it).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/context.h"
#include "transport/loopback/factory.h"
#include "transport/tcp/factory.h"

namespace tictac::transport::testing {

// How to build one backend kind; `fabric` is shared by the contexts of one test (loopback).
struct BackendKind {
  std::string name;
  std::function<std::unique_ptr<Backend>(const std::shared_ptr<loopback::Fabric>&)> make;
  std::string listen_address;
};

inline void PrintTo(const BackendKind& kind, std::ostream* os) { *os << kind.name; }

inline std::vector<BackendKind> all_backends() {
  return {
      {"loopback", [](const std::shared_ptr<loopback::Fabric>& f) { return loopback::create(f); }, "loopback://"},
      {"tcp", [](const std::shared_ptr<loopback::Fabric>&) { return tcp::create(); }, "tcp://127.0.0.1:0"},
  };
}

inline TransportConfig small_config() {
  TransportConfig c;
  c.chunk_bytes = 64 << 10;
  c.window_chunks = 4;
  c.eager_bytes = 128 << 10;
  c.timeout = std::chrono::seconds(20);
  // The transport_conformance_mac run sets TICTAC_AUTH_MAC=1 (with a token) for the whole suite.
  const char* mac = std::getenv("TICTAC_AUTH_MAC");
  c.frame_mac = mac != nullptr && std::string(mac) == "1";
  return c;
}

inline constexpr auto kWait = std::chrono::seconds(60);  // a bound against hangs, not a timing check

struct Completion {
  std::string label;
  Status status;
  std::uint64_t bytes = 0;
  PeerId source = 0;
  std::thread::id thread;
};

// Records completions from any thread; wait() is bounded.
class Recorder {
 public:
  Callback make(std::string label) {
    return [this, label](const Status& s, std::uint64_t n, PeerId src) {
      std::lock_guard<std::mutex> lock(m_);
      done_.push_back(Completion{label, s, n, src, std::this_thread::get_id()});
      cv_.notify_all();
    };
  }
  // Waits until at least n completions arrived (or the bound passed: returns false).
  bool wait(std::size_t n) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, kWait, [&] { return done_.size() >= n; });
  }
  // Waits until a completion with `label` arrived (bounded).
  bool wait_label(const std::string& label) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, kWait, [&] {
      for (const auto& c : done_) {
        if (c.label == label) return true;
      }
      return false;
    });
  }
  std::vector<Completion> all() {
    std::lock_guard<std::mutex> lock(m_);
    return done_;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(m_);
    return done_.size();
  }
  Completion find(const std::string& label) {
    std::lock_guard<std::mutex> lock(m_);
    for (const auto& c : done_) {
      if (c.label == label) return c;
    }
    return Completion{"<missing " + label + ">", Status(StatusCode::internal, "no completion"), 0, 0, {}};
  }
  std::size_t count(const std::string& label) {
    std::lock_guard<std::mutex> lock(m_);
    std::size_t n = 0;
    for (const auto& c : done_) n += c.label == label ? 1 : 0;
    return n;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Completion> done_;
};

// "r" + 7 -> "r7" (avoids a GCC 12 -Wrestrict false positive on operator+ with literals).
inline std::string L(const char* prefix, long i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// Deterministic, position- and seed-dependent bytes.
inline void fill(std::byte* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<std::byte>(seed + i);
}

inline std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  fill(v.data(), n, seed);
  return v;
}

// A buffer plus its region.
struct Buffer {
  explicit Buffer(std::size_t n, std::uint64_t seed = 0, bool filled = false)
      : bytes(n), region(MemoryRegion::host(bytes.data(), n).value()) {
    if (filled) fill(bytes.data(), n, seed);
  }
  Buffer(const Buffer&) = delete;
  std::vector<std::byte> bytes;
  MemoryRegion region;
};

inline bool same_bytes(const std::byte* got, std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> want = pattern(n, seed);
  return n == 0 || std::memcmp(got, want.data(), n) == 0;
}

struct ContextSpec {
  std::string name;
  ProgressEngine::Mode mode = ProgressEngine::Mode::thread;
  TransportConfig config = small_config();
  std::optional<std::string> trace_path;  // ContextOptions::trace_path (unset = TICTAC_TRACE)
};

inline std::unique_ptr<Context> make_context(const BackendKind& kind, const std::shared_ptr<loopback::Fabric>& fabric,
                                             const ContextSpec& spec) {
  ContextOptions o;
  o.name = spec.name;
  o.mode = spec.mode;
  o.config = spec.config;
  o.trace_path = spec.trace_path;
  o.backends.push_back(kind.make(fabric));
  Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  return ctx.ok() ? std::move(ctx).value() : nullptr;
}

// `client` connects to `server`; returns (client's id for server, server's id for client).
// The client connects from a helper thread so that manual-mode contexts on either side can be
// driven by their own blocking helpers.
inline bool connect_pair(Context& client, Context& server, const std::string& listen_address,
                         PeerId* client_to_server, PeerId* server_to_client) {
  Result<std::string> addr = server.listen(listen_address);
  EXPECT_TRUE(addr.ok()) << addr.status().to_string();
  if (!addr.ok()) return false;
  Result<PeerId> c = Status(StatusCode::internal, "not run");
  std::thread t([&] { c = client.connect(*addr); });
  Result<PeerId> s = server.accept(std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
  t.join();
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!c.ok() || !s.ok()) return false;
  *client_to_server = *c;
  *server_to_client = *s;
  return true;
}

}  // namespace tictac::transport::testing
