// cuda_staged_bw: device-buffer bandwidth through the transport over TCP on 127.0.0.1, with host
// staging (TCP cannot touch GPU memory). Two Contexts in this process (thread mode): one sends a
// device buffer, the other receives into a device buffer on its consumer stream; the same size
// moved host->host is the baseline. The last transfer is checked byte by byte.
//
// Usage: cuda_staged_bw [--bytes N] [--iters N]   (defaults 64M and 16; sizes accept K/M/G)
// Output: one "cuda_staged_bw: ..." summary line. Exit: 0 measured, 1 a transfer failed or the
// bytes differ, 77 SKIP (CUDA not viable here: the reason is printed).
#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/tunables.h"
#include "cuda/runtime_api.h"
#include "transport/context.h"
#include "transport/tcp/factory.h"

namespace {

using namespace tictac;
using namespace tictac::transport;

struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  Status first_error;
  Callback make() {
    return [this](const Status& s, std::uint64_t, PeerId) {
      std::lock_guard<std::mutex> lock(m);
      ++done;
      if (!s.ok() && first_error.ok()) first_error = s;
      cv.notify_all();
    };
  }
  bool wait(int n) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::seconds(120), [&] { return done >= n; });
  }
};

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("cuda_staged_bw: FAIL %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

std::unique_ptr<Context> make_context(const char* name, cuda::Api* api) {
  ContextOptions o;
  o.name = name;
  o.auth_token = "";
  o.cuda_api = api;
  o.backends.push_back(tcp::create());
  Result<std::unique_ptr<Context>> c = Context::create(std::move(o));
  if (!c.ok()) {
    std::printf("cuda_staged_bw: FAIL creating a context: %s\n", c.status().to_string().c_str());
    return nullptr;
  }
  return std::move(c).value();
}

// Moves `bytes` from `out` to `in` `iters` times (one message in flight); GB/s, or < 0 on error.
double measure(Context& tx, Context& rx, PeerId to, PeerId from, const MemoryRegion& out, MemoryRegion& in,
               std::uint64_t bytes, int iters) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    Waiter w;
    rx.recv(from, 1, in, 0, bytes, w.make());
    tx.send(to, 1, out, 0, bytes, 0, w.make());
    if (!w.wait(2)) {
      std::printf("cuda_staged_bw: FAIL transfer %d did not finish within 120 s\n", i);
      return -1;
    }
    if (!w.first_error.ok()) {
      std::printf("cuda_staged_bw: FAIL transfer %d: %s\n", i, w.first_error.to_string().c_str());
      return -1;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(bytes) * iters / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t bytes = 64u << 20;
  int iters = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bytes") {
      Result<std::uint64_t> b = parse_size(argv[i + 1]);
      if (!b.ok()) return std::printf("cuda_staged_bw: bad --bytes: %s\n", b.status().message().c_str()), 2;
      bytes = *b;
    } else if (flag == "--iters") {
      iters = std::atoi(argv[i + 1]);
    } else {
      return std::printf("usage: cuda_staged_bw [--bytes N] [--iters N]\n"), 2;
    }
  }
  std::unique_ptr<cuda::Api> api = cuda::open_runtime_api();
  if (!api->viability().ok()) {
    std::printf("SKIP: %s\n", api->viability().message().c_str());
    return 77;
  }
  std::printf("%s\n", cuda::describe(*api).c_str());

  std::unique_ptr<Context> rx = make_context("bw-receiver", api.get());
  std::unique_ptr<Context> tx = make_context("bw-sender", api.get());
  if (!rx || !tx) return 1;
  Result<std::string> addr = rx->listen("tcp://127.0.0.1:0");
  if (!addr.ok()) return std::printf("cuda_staged_bw: FAIL listen: %s\n", addr.status().to_string().c_str()), 1;
  Result<PeerId> to = tx->connect(*addr);
  Result<PeerId> from = rx->accept(std::chrono::seconds(10));
  if (!to.ok() || !from.ok()) {
    std::printf("cuda_staged_bw: FAIL connect: %s / %s\n", to.status().to_string().c_str(),
                from.status().to_string().c_str());
    return 1;
  }

  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t producer = nullptr;
  cudaStream_t consumer = nullptr;
  if (!check(cudaMalloc(&src, bytes), "cudaMalloc") || !check(cudaMalloc(&dst, bytes), "cudaMalloc") ||
      !check(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !check(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), "cudaStreamCreate")) {
    return 1;
  }
  std::vector<unsigned char> pattern(bytes), back(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) pattern[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
  // The producer stream writes the tensor; the first send must wait for it (stream order).
  if (!check(cudaMemsetAsync(dst, 0, bytes, consumer), "cudaMemsetAsync") ||
      !check(cudaMemcpyAsync(src, pattern.data(), bytes, cudaMemcpyHostToDevice, producer), "cudaMemcpyAsync")) {
    return 1;
  }
  Result<MemoryRegion> out = tx->register_buffer(BufferDesc{src, bytes, MemoryType::cuda, -1, producer});
  Result<MemoryRegion> in = rx->register_buffer(BufferDesc{dst, bytes, MemoryType::cuda, -1, consumer});
  if (!out.ok() || !in.ok()) {
    std::printf("cuda_staged_bw: FAIL registering device buffers: %s / %s\n", out.status().to_string().c_str(),
                in.status().to_string().c_str());
    return 1;
  }
  const double dev_gbs = measure(*tx, *rx, *to, *from, *out, *in, bytes, iters);
  if (dev_gbs < 0) return 1;
  // Work enqueued on the consumer stream now is ordered after the last arrival.
  if (!check(cudaMemcpyAsync(back.data(), dst, bytes, cudaMemcpyDeviceToHost, consumer), "cudaMemcpyAsync") ||
      !check(cudaStreamSynchronize(consumer), "cudaStreamSynchronize")) {
    return 1;
  }
  const bool exact = std::memcmp(back.data(), pattern.data(), bytes) == 0;

  std::vector<unsigned char> host_in(bytes);
  Result<MemoryRegion> hout = tx->register_buffer(BufferDesc{pattern.data(), bytes});
  Result<MemoryRegion> hin = rx->register_buffer(BufferDesc{host_in.data(), bytes});
  const double host_gbs = measure(*tx, *rx, *to, *from, *hout, *hin, bytes, iters);

  std::printf("cuda_staged_bw: tcp 127.0.0.1, %llu bytes x %d, device->device staged %.2f GB/s, "
              "host->host %.2f GB/s, bytes %s\n",
              static_cast<unsigned long long>(bytes), iters, dev_gbs, host_gbs, exact ? "exact" : "DIFFER");
  tx->close();
  rx->close();
  tx->join();
  rx->join();
  cudaFree(src);
  cudaFree(dst);
  return exact && host_gbs >= 0 ? 0 : 1;
}
