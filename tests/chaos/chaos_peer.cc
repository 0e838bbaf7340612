// chaos_peer: one side of a chaos-suite transfer (tests/chaos/chaos.sh runs two of them in
// network namespaces joined by a veth pair with loss, delay and reordering on it). The address's
// scheme picks the backend (tcp://, ucx://).
//
//   chaos_peer recv --listen SCHEME://IP:PORT --count N [--tags T] [--seed S] [--max-bytes B]
//   [--expect-lost] chaos_peer send --connect SCHEME://IP:PORT --count N [--tags T] [--seed S]
//   [--max-bytes B]
//                   [--partition-after K --partition-file F] [--pause-after K --pause-file F]
//
// Message i (0..N-1) has tag i % T, a random priority in 0..7 and a random size in 1..B, and its
// bytes are a function of (seed, i), so the receiver can check every byte. The receiver posts its
// receives in message order, one per message; since matching is FIFO per (source, tag), the k-th
// receive of tag t must get the k-th message of tag t: the check is byte-exact delivery AND
// per-(source, tag) order. Default: exit 0 when all N arrived intact, 1 otherwise (the first
// mismatch is printed).
// Partition mode (sender): after K sends completed it creates F (the script then sets 100% loss)
// and every request still pending must fail with connection_lost whose message names the peer,
// all within TICTAC_TIMEOUT + 1 s of F's creation; exit 0 when so. --expect-lost on the receiver:
// it must end with connection_lost too (not hang).
// Pause mode (sender): after its first K sends completed it creates F; the script SIGSTOPs the
// receiver and creates F.stopped; the sender then posts the other N-K sends, and the script
// resumes the receiver before TICTAC_TIMEOUT. Every message must still arrive intact: exit 0
// when all N sends completed ok. Exit 2 on bad flags.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "integration/group/backend_registry.h"
#include "transport/context.h"

namespace {

using namespace tictac;
using namespace tictac::transport;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string mode, address, partition_file, pause_file;
  std::uint64_t count = 0, tags = 16, seed = 1, max_bytes = 16384, partition_after = 0,
                pause_after = 0;
  bool expect_lost = false;
};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t size_of(const Flags& f, std::uint64_t i) {
  return 1 + mix(f.seed * 1000003 + i) % f.max_bytes;
}
Priority priority_of(const Flags& f, std::uint64_t i) {
  return static_cast<Priority>(mix(f.seed + 7 * i) % 8);
}
void fill(const Flags& f, std::uint64_t i, std::vector<std::byte>& out) {
  out.resize(size_of(f, i));
  std::uint64_t x = mix(f.seed ^ (i << 20));
  for (std::size_t j = 0; j < out.size(); ++j) {
    if (j % 8 == 0) x = mix(x);
    out[j] = static_cast<std::byte>(x >> (8 * (j % 8)));
  }
}

bool parse(int argc, char** argv, Flags& f) {
  if (argc < 2) return false;
  f.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--listen" || a == "--connect")
      f.address = next();
    else if (a == "--count")
      f.count = std::stoull(next());
    else if (a == "--tags")
      f.tags = std::stoull(next());
    else if (a == "--seed")
      f.seed = std::stoull(next());
    else if (a == "--max-bytes")
      f.max_bytes = std::stoull(next());
    else if (a == "--partition-after")
      f.partition_after = std::stoull(next());
    else if (a == "--partition-file")
      f.partition_file = next();
    else if (a == "--pause-after")
      f.pause_after = std::stoull(next());
    else if (a == "--pause-file")
      f.pause_file = next();
    else if (a == "--expect-lost")
      f.expect_lost = true;
    else
      return false;
  }
  return (f.mode == "send" || f.mode == "recv") && !f.address.empty() && f.count > 0 &&
         f.tags > 0 && f.max_bytes > 0 && (f.pause_after == 0 || !f.pause_file.empty()) &&
         (f.partition_after == 0 || !f.partition_file.empty()) &&
         (f.pause_after == 0 || f.partition_after == 0) && f.pause_after < f.count &&
         f.partition_after < f.count;
}

// Counts completions; wait() returns when all are in or the deadline passes.
struct Tally {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t done = 0, ok = 0, lost = 0;
  std::string first_error;
  Clock::time_point last = Clock::now();
  void add(const Status& st, const std::string& peer_hint) {
    std::lock_guard lk(mu);
    ++done;
    last = Clock::now();
    if (st.ok()) {
      ++ok;
    } else if (st.code() == StatusCode::connection_lost &&
               st.to_string().find(peer_hint) != std::string::npos) {
      ++lost;
    } else if (first_error.empty()) {
      first_error = st.to_string();
    }
    cv.notify_all();
  }
  bool wait(std::uint64_t n, Clock::duration limit) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, limit, [&] { return done >= n; });
  }
};

// A context with the backend that the address's scheme names (tcp://, ucx://), from the registry.
Result<std::unique_ptr<Context>> make_context(const std::string& address) {
  const std::string scheme = address.substr(0, address.find("://"));
  const group::BackendEntry* entry = group::find_backend(scheme);
  if (entry == nullptr)
    return Status(StatusCode::invalid_argument, "no backend named '" + scheme + "'");
  if (!entry->create) return Status(StatusCode::unavailable, entry->missing);
  ContextOptions options;
  options.name = "chaos_peer";
  options.backends.push_back(entry->create());
  return Context::create(std::move(options));
}

int run(const Flags& f) {
  Result<std::unique_ptr<Context>> ctx = make_context(f.address);
  if (!ctx.ok()) {
    std::cerr << "chaos_peer: " << ctx.status().to_string() << "\n";
    return 1;
  }
  const auto timeout = (*ctx)->config().timeout;
  PeerId peer = 0;
  std::string peer_hint;  // what a connection_lost must name
  if (f.mode == "recv") {
    Result<std::string> addr = (*ctx)->listen(f.address);
    if (!addr.ok()) return std::cerr << "chaos_peer: " << addr.status().to_string() << "\n", 1;
    std::cout << "listening on " << *addr << std::endl;
    Result<PeerId> p = (*ctx)->accept(std::chrono::seconds(60));
    if (!p.ok()) return std::cerr << "chaos_peer: " << p.status().to_string() << "\n", 1;
    peer = *p;
  } else {
    Result<PeerId> p = (*ctx)->connect(f.address);
    if (!p.ok()) return std::cerr << "chaos_peer: " << p.status().to_string() << "\n", 1;
    peer = *p;
  }
  Result<std::string> name = (*ctx)->peer_name(peer);
  peer_hint = name.ok() ? *name : "";
  std::vector<std::vector<std::byte>> bufs(f.count);
  std::vector<MemoryRegion> regions;
  regions.reserve(f.count);
  Tally tally;
  std::atomic<std::uint64_t> corrupt{f.count};  // first bad message index
  const auto t_start = Clock::now();
  Clock::time_point t_partition{};
  for (std::uint64_t i = 0; i < f.count; ++i) {
    if (f.mode == "send") {
      fill(f, i, bufs[i]);
    } else {
      bufs[i].resize(size_of(f, i));  // exact: a longer message is too long for it (an error)
    }
    Result<MemoryRegion> region = MemoryRegion::host(bufs[i].data(), bufs[i].size());
    if (!region.ok()) return std::cerr << "chaos_peer: " << region.status().to_string() << "\n", 1;
    regions.push_back(std::move(region).value());
  }
  // Pause mode: the sends after the first pause_after are posted only once the script has
  // stopped the receiver (it creates F.stopped), so they are certainly in flight during the stop.
  auto await_stop = [&] {
    std::ofstream(f.pause_file) << "now\n";
    std::cout << "pause requested after " << f.pause_after << " completions" << std::endl;
    const std::string stopped = f.pause_file + ".stopped";
    for (int k = 0; k < 600 && !std::ifstream(stopped).good(); ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::cout << "receiver stopped: posting the remaining " << (f.count - f.pause_after) << " sends"
              << std::endl;
  };
  for (std::uint64_t i = 0; i < f.count; ++i) {
    if (f.mode == "send" && f.pause_after > 0 && i == f.pause_after) {
      tally.wait(f.pause_after, std::chrono::seconds(120));
      await_stop();
    }
    if (f.mode == "send") {
      (*ctx)->send(peer, i % f.tags, regions[i], 0, bufs[i].size(), priority_of(f, i),
                   [&tally, &peer_hint](const Status& st, std::uint64_t, PeerId) {
                     tally.add(st, peer_hint);
                   });
    } else {
      (*ctx)->recv(peer, i % f.tags, regions[i], 0, bufs[i].size(),
                   [&, i](const Status& st, std::uint64_t n, PeerId) {
                     if (st.ok()) {
                       std::vector<std::byte> want;
                       fill(f, i, want);
                       if (n != want.size() || std::memcmp(bufs[i].data(), want.data(), n) != 0) {
                         std::uint64_t cur = corrupt.load();
                         while (i < cur && !corrupt.compare_exchange_weak(cur, i)) {
                         }
                       }
                     }
                     tally.add(st, peer_hint);
                   });
    }
  }
  if (f.partition_after > 0) {
    tally.wait(f.partition_after, std::chrono::seconds(120));
    std::ofstream(f.partition_file) << "now\n";
    t_partition = Clock::now();
    std::cout << "partition requested after " << f.partition_after << " completions" << std::endl;
  }
  const bool all = tally.wait(f.count, f.partition_after > 0 ? timeout + std::chrono::seconds(10)
                                                             : std::chrono::seconds(600));
  const double secs = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::lock_guard lk(tally.mu);
  std::cout << f.mode << ": " << tally.ok << " ok, " << tally.lost
            << " connection_lost naming the peer, " << (tally.done - tally.ok - tally.lost)
            << " other, of " << f.count << " in " << secs << " s" << std::endl;
  int rc = 0;
  if (!all) {
    std::cout << "FAIL: " << (f.count - tally.done) << " requests never completed (hung)"
              << std::endl;
    rc = 1;
  }
  if (!tally.first_error.empty()) {
    std::cout << "FAIL: unexpected error: " << tally.first_error << std::endl;
    rc = 1;
  }
  if (corrupt.load() < f.count) {
    std::cout << "FAIL: message " << corrupt.load() << " (tag " << corrupt.load() % f.tags
              << ") arrived corrupt or out of per-tag order" << std::endl;
    rc = 1;
  }
  if (f.partition_after > 0 || f.expect_lost) {
    if (tally.lost == 0) {
      std::cout << "FAIL: expected connection_lost after the partition, got none" << std::endl;
      rc = 1;
    }
    if (f.partition_after > 0) {
      const auto took =
          std::chrono::duration_cast<std::chrono::milliseconds>(tally.last - t_partition);
      std::cout << "last failure " << took.count()
                << " ms after the partition (limit TICTAC_TIMEOUT + 1 s = "
                << (timeout + std::chrono::seconds(1)).count() << " ms)" << std::endl;
      if (took > timeout + std::chrono::seconds(1)) rc = 1;
    }
  } else if (tally.ok != f.count) {
    rc = 1;
  }
  (*ctx)->close();
  (*ctx)->join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  bool parsed = false;
  try {
    parsed = parse(argc, argv, f);
  } catch (const std::exception&) {  // std::stoull on a non-number
    parsed = false;
  }
  if (!parsed) {
    std::cerr << "usage: chaos_peer recv --listen A --count N | send --connect A --count N "
                 "[--tags T] [--seed S] [--max-bytes B] [--partition-after K --partition-file F] "
                 "[--pause-after K --pause-file F] [--expect-lost]\n";
    return 2;
  }
  return run(f);
}
