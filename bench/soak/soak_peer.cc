// soak_peer: one side of the soak benchmark (bench/soak.sh). The point is resource growth over a
// long run, not speed: every round the client makes a NEW Context, connects, sends a burst of
// messages of random sizes and priorities, waits for the server's 1-byte acknowledgement, and
// closes; the server keeps one Context and one listener for the whole run and accepts a new peer
// every round. So both connection set-up and tear-down and the message path are exercised, and a
// leak per round (a peer entry, a socket, a buffer) shows up as growth.
//
//   soak_peer server --listen tcp://127.0.0.1:0 --address-file F --duration S [--report-every S]
//                    [--messages N] [--max-bytes B]
//   soak_peer client --connect ADDR --duration S [--report-every S] [--messages N] [--max-bytes B]
//
// Both print one line per report interval:
//   soak <role> t=<seconds> rounds=<n> rss_kib=<VmRSS> heap_kib=<malloc in use> fds=<open fds>
// and a final line "soak <role> done rounds=<n> errors=<n>". Exit 0 when every round succeeded,
// 1 on a transfer error (printed), 2 on bad flags.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <malloc.h>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/context.h"

namespace {

using namespace tictac;
using namespace tictac::transport;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string role, address, address_file;
  double duration_s = 0, report_every_s = 10;
  std::uint64_t messages = 200, max_bytes = 1 << 20;
};

bool parse(int argc, char** argv, Flags& f) {
  if (argc < 2) return false;
  f.role = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--listen" || a == "--connect")
      f.address = v;
    else if (a == "--address-file")
      f.address_file = v;
    else if (a == "--duration")
      f.duration_s = std::stod(v);
    else if (a == "--report-every")
      f.report_every_s = std::stod(v);
    else if (a == "--messages")
      f.messages = std::stoull(v);
    else if (a == "--max-bytes")
      f.max_bytes = std::stoull(v);
    else
      return false;
  }
  return (f.role == "server" || f.role == "client") && !f.address.empty() && f.duration_s > 0 &&
         f.report_every_s > 0 && f.messages > 0 && f.max_bytes > 0 &&
         (f.role == "client" || !f.address_file.empty());
}

std::uint64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      std::uint64_t kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

// Bytes the allocator has handed out and not got back (RSS also counts freed-but-kept pages):
// growth here is memory the program still holds.
std::uint64_t heap_kib() { return mallinfo2().uordblks / 1024; }

std::size_t open_fds() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Counts completions of one round; records the first error.
struct Round {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t done = 0;
  std::string error;
  Callback make() {
    return [this](const Status& st, std::uint64_t, PeerId) {
      std::lock_guard lk(mu);
      ++done;
      if (!st.ok() && error.empty()) error = st.to_string();
      cv.notify_all();
    };
  }
  bool wait(std::uint64_t n, std::chrono::seconds limit) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, limit, [&] { return done >= n; });
  }
};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Reporter {
 public:
  Reporter(std::string role, double every_s) : role_(std::move(role)), every_s_(every_s) {}
  void maybe_report(std::uint64_t rounds, bool force = false) {
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    if (!force && t < next_) return;
    next_ = t + every_s_;
    std::cout << "soak " << role_ << " t=" << static_cast<std::uint64_t>(t) << " rounds=" << rounds
              << " rss_kib=" << rss_kib() << " heap_kib=" << heap_kib() << " fds=" << open_fds()
              << std::endl;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  std::string role_;
  double every_s_;
  double next_ = 0;
  Clock::time_point start_ = Clock::now();
};

constexpr Tag kDataTag = 1, kAckTag = 2;

int run_server(const Flags& f) {
  Result<std::unique_ptr<Context>> ctx = Context::create({});
  if (!ctx.ok()) return std::cerr << "soak_peer: " << ctx.status().to_string() << "\n", 1;
  Result<std::string> addr = (*ctx)->listen(f.address);
  if (!addr.ok()) return std::cerr << "soak_peer: " << addr.status().to_string() << "\n", 1;
  std::ofstream(f.address_file) << *addr << "\n";
  std::vector<std::byte> in(f.max_bytes), ack(1, std::byte{1});
  Result<MemoryRegion> in_region = MemoryRegion::host(in.data(), in.size());
  Result<MemoryRegion> ack_region = MemoryRegion::host(ack.data(), ack.size());
  if (!in_region.ok() || !ack_region.ok()) return std::cerr << "soak_peer: registration failed\n", 1;
  Reporter report("server", f.report_every_s);
  std::uint64_t rounds = 0, errors = 0;
  // Runs a little past the client's duration so the client's last round finds it.
  while (report.elapsed() < f.duration_s + 30) {
    Result<PeerId> peer = (*ctx)->accept(std::chrono::milliseconds(1000));
    if (!peer.ok()) {
      if (peer.status().code() == StatusCode::timeout) {
        if (report.elapsed() > f.duration_s) break;  // the client is done
        continue;
      }
      std::cerr << "soak_peer server: " << peer.status().to_string() << "\n";
      ++errors;
      break;
    }
    Round round;
    // One buffer for every message: the payload is not checked here (the chaos suite checks
    // bytes); the receives complete in order on one tag, so reuse is safe.
    for (std::uint64_t i = 0; i < f.messages; ++i) {
      (*ctx)->recv(*peer, kDataTag, *in_region, 0, in.size(), round.make());
    }
    (*ctx)->send(*peer, kAckTag, *ack_region, 0, 1, 0, [](const Status&, std::uint64_t, PeerId) {});
    if (!round.wait(f.messages, std::chrono::seconds(60)) || !round.error.empty()) {
      std::cerr << "soak_peer server: round " << rounds << ": "
                << (round.error.empty() ? "timed out" : round.error) << "\n";
      ++errors;
      break;
    }
    ++rounds;
    report.maybe_report(rounds);
  }
  report.maybe_report(rounds, true);
  std::cout << "soak server done rounds=" << rounds << " errors=" << errors << std::endl;
  (*ctx)->close();
  (*ctx)->join();
  return errors == 0 ? 0 : 1;
}

int run_client(const Flags& f) {
  std::vector<std::byte> out(f.max_bytes), ack(1);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i * 31);
  Reporter report("client", f.report_every_s);
  std::uint64_t rounds = 0, errors = 0;
  while (report.elapsed() < f.duration_s) {
    Result<std::unique_ptr<Context>> ctx = Context::create({});
    if (!ctx.ok()) return std::cerr << "soak_peer: " << ctx.status().to_string() << "\n", 1;
    Result<MemoryRegion> out_region = MemoryRegion::host(out.data(), out.size());
    Result<MemoryRegion> ack_region = MemoryRegion::host(ack.data(), ack.size());
    Result<PeerId> peer = (*ctx)->connect(f.address);
    if (!peer.ok() || !out_region.ok() || !ack_region.ok()) {
      std::cerr << "soak_peer client: round " << rounds << ": "
                << (peer.ok() ? "registration failed" : peer.status().to_string()) << "\n";
      ++errors;
      break;
    }
    Round round;
    (*ctx)->recv(*peer, kAckTag, *ack_region, 0, 1, round.make());
    {
      Context::Batch batch(**ctx);
      for (std::uint64_t i = 0; i < f.messages; ++i) {
        const std::uint64_t r = mix(rounds * 1000003 + i);
        const std::uint64_t bytes = 1 + r % f.max_bytes;
        (*ctx)->send(*peer, kDataTag, *out_region, 0, bytes, static_cast<Priority>(r % 8),
                     round.make());
      }
    }
    if (!round.wait(f.messages + 1, std::chrono::seconds(60)) || !round.error.empty()) {
      std::cerr << "soak_peer client: round " << rounds << ": "
                << (round.error.empty() ? "timed out" : round.error) << "\n";
      ++errors;
      break;
    }
    (*ctx)->close();
    (*ctx)->join();
    ++rounds;
    report.maybe_report(rounds);
  }
  report.maybe_report(rounds, true);
  std::cout << "soak client done rounds=" << rounds << " errors=" << errors << std::endl;
  return errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  bool parsed = false;
  try {
    parsed = parse(argc, argv, f);
  } catch (const std::exception&) {  // a non-number where a number belongs
    parsed = false;
  }
  if (!parsed) {
    std::cerr << "usage: soak_peer server --listen A --address-file F --duration S | client "
                 "--connect A --duration S  [--report-every S] [--messages N] [--max-bytes B]\n";
    return 2;
  }
  return f.role == "server" ? run_server(f) : run_client(f);
}
