// Ring vs zero-copy bandwidth of the verbs backend on the fake fabric (docs/verbs.md, "Zero-copy
// on the fake fabric"): two Contexts in this process on one fake fabric (thread mode), one 4 MiB
// rendezvous message per iteration, a -> b, waiting for the receive to complete.
// Argument: 0 = TICTAC_VERBS_ZERO_COPY=0 (every byte through the rings: copied into staging, by
// the fabric, out of the ring), 1 = zero-copy (copied by the fabric only). The fake copies under
// its lock, so the numbers compare host copies, not a NIC: only the ratio means something.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/context.h"
#include "transport/verbs/backend/factory.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac {
namespace {

using transport::Context;
using transport::MemoryRegion;
using transport::PeerId;

std::unique_ptr<Context> make_context(verbs::fake::FakeFabric& fabric, const char* name, bool zero_copy) {
  transport::ContextOptions o;
  o.name = name;
  verbs::VerbsConfig vc;
  vc.zero_copy = zero_copy;
  o.backends.push_back(verbs::create(fabric.api(), vc));
  Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
  if (!ctx.ok()) return nullptr;
  return std::move(ctx).value();
}

// Waits for `n` completions; records the first failure.
class Waiter {
 public:
  transport::Callback make() {
    return [this](const Status& s, std::uint64_t, PeerId) {
      std::lock_guard lk(mu_);
      if (!s.ok() && error_.ok()) error_ = s;
      ++done_;
      cv_.notify_all();
    };
  }
  Status wait(int n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return done_ >= n; });
    done_ -= n;
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
  Status error_;
};

void BM_VerbsFake4MiB(benchmark::State& state) {
  const bool zero_copy = state.range(0) != 0;
  verbs::fake::FabricOptions fo;
  fo.execution = verbs::fake::Execution::thread;
  verbs::fake::FakeFabric fabric(fo);
  std::unique_ptr<Context> a = make_context(fabric, "alice", zero_copy);
  std::unique_ptr<Context> b = make_context(fabric, "bob", zero_copy);
  if (!a || !b) {
    state.SkipWithError("cannot create the contexts");
    return;
  }
  Result<std::string> addr = b->listen("verbs://127.0.0.1:0");
  if (!addr.ok()) {
    state.SkipWithError(addr.status().to_string().c_str());
    return;
  }
  Result<PeerId> ab = Status(StatusCode::internal, "not run");
  std::thread t([&] { ab = a->connect(*addr); });
  Result<PeerId> ba = b->accept(std::chrono::seconds(30));
  t.join();
  if (!ab.ok() || !ba.ok()) {
    state.SkipWithError("cannot connect");
    return;
  }
  const std::size_t n = 4 << 20;
  std::vector<std::byte> src(n, std::byte{0x5a}), dst(n);
  MemoryRegion src_region = MemoryRegion::host(src.data(), n).value();
  MemoryRegion dst_region = MemoryRegion::host(dst.data(), n).value();
  Waiter w;
  const verbs::fake::WriteTraffic before = fabric.write_traffic();
  for (auto _ : state) {
    b->recv(*ba, 1, dst_region, 0, n, w.make());
    a->send(*ab, 1, src_region, 0, n, 0, w.make());
    const Status st = w.wait(2);
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
  }
  const verbs::fake::WriteTraffic after = fabric.write_traffic();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
  // Where the bytes went: plain RDMA WRITEs (zero-copy) or WRITE WITH IMMEDIATE (ring).
  const double per_iter = static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
  state.counters["plain_write_MiB"] = static_cast<double>(after.write_bytes - before.write_bytes) / per_iter / (1 << 20);
  state.counters["ring_write_MiB"] =
      static_cast<double>(after.write_with_imm_bytes - before.write_with_imm_bytes) / per_iter / (1 << 20);
  a.reset();
  b.reset();
}
BENCHMARK(BM_VerbsFake4MiB)->ArgName("zero_copy")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tictac

BENCHMARK_MAIN();
