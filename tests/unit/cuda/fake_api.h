// A scripted, host-only model of the CUDA API table for unit tests.
//
// Streams are FIFOs of operations that run() executes in order until each stream's head blocks:
//   wait_value32  blocks until (int32_t)(*addr - value) >= 0 (CUDA's cyclic GEQ) — the flag is
//                 real host memory, so host stores by the code under test release it;
//   wait_event    blocks until the event's record captured at enqueue time has executed;
//   record        marks that record of the event complete;
//   memcpy        copies bytes (device memory is host memory here);
//   marker(name)  a stand-in for a kernel: appends `name` to trace();
//   hold          blocks until the test calls release_hold(stream).
// Events fire only when run() executes their record; event_fired() never blocks. Calls are
// logged by name in calls(); fail_next(call, status) makes the next call of that name fail.
// Device pointers are host pointers (a UVA-like model); register_memory() decides what
// pointer_info() answers. Single-threaded, like the code it drives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "cuda/api.h"

namespace tictac::cuda::testing {

class FakeApi final : public Api {
 public:
  explicit FakeApi(int devices = 1, Status viability = Status::Ok());
  ~FakeApi() override;

  // Scripting.
  void set_caps(const DeviceCaps& caps) { caps_ = caps; }
  void fail_next(const std::string& call, Status status) { failures_[call] = std::move(status); }
  void register_memory(const void* p, std::size_t bytes, MemoryType type, int device);
  void* alloc_device(std::size_t bytes, int device = 0);  // owned by the fake
  void enqueue_marker(Stream s, std::string name);
  void enqueue_hold(Stream s);
  void release_hold(Stream s);
  // Executes every stream until all heads block; returns the number of operations executed.
  std::size_t run();
  std::size_t queued(Stream s) const;

  // Observation.
  const std::vector<std::string>& calls() const { return calls_; }
  const std::vector<std::string>& trace() const { return trace_; }
  int current_device() const { return current_device_; }
  std::size_t live_events() const { return events_.size(); }
  std::size_t live_streams() const { return streams_created_; }
  std::size_t live_pinned() const { return pinned_.size(); }
  // The flag address of the most recent wait_value32 (its error word follows at +4).
  DevicePtr last_wait_addr() const { return last_wait_addr_; }
  DevicePtr last_dmabuf_ptr() const { return last_dmabuf_ptr_; }
  std::size_t last_dmabuf_bytes() const { return last_dmabuf_bytes_; }

  // Api.
  const Status& viability() const override { return viability_; }
  int device_count() const override { return devices_; }
  Result<DeviceCaps> device_caps(int device) override;
  Status use_device(int device) override;
  Result<PointerInfo> pointer_info(const void* ptr) override;
  Result<HostMapping> alloc_pinned(std::size_t bytes, bool mapped) override;
  Status free_pinned(void* host) override;
  Result<Stream> create_stream() override;
  Status destroy_stream(Stream stream) override;
  Status wait_value32(Stream stream, DevicePtr addr, std::uint32_t value, bool flush) override;
  Status memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) override;
  Result<Event> create_event() override;
  Status destroy_event(Event event) override;
  Status record_event(Event event, Stream stream) override;
  Result<bool> event_fired(Event event) override;
  Status stream_wait_event(Stream stream, Event event) override;
  Result<int> dmabuf_fd(DevicePtr aligned_ptr, std::size_t aligned_bytes) override;

 private:
  enum class OpKind { wait_value, wait_event, record, memcpy, marker, hold };
  struct Op {
    OpKind kind;
    DevicePtr addr = 0;
    std::uint32_t value = 0;
    Event event = nullptr;
    std::uint64_t generation = 0;
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
    std::string name;
  };
  struct EventState {
    std::uint64_t recorded = 0;
    std::uint64_t completed = 0;
  };
  struct Region {
    std::size_t bytes;
    MemoryType type;
    int device;
  };

  Status enter(const std::string& call);
  bool ready(const Op& op) const;

  int devices_;
  Status viability_;
  DeviceCaps caps_{true, false, true, true};
  int current_device_ = -1;
  std::map<std::string, Status> failures_;
  std::vector<std::string> calls_;
  std::vector<std::string> trace_;
  std::map<Stream, std::deque<Op>> streams_;
  std::map<Stream, bool> held_;
  std::size_t streams_created_ = 0;
  std::uintptr_t next_handle_ = 0x1000;
  std::map<Event, EventState> events_;
  std::map<const unsigned char*, Region> regions_;
  std::map<void*, std::size_t> pinned_;
  std::vector<void*> device_allocs_;
  DevicePtr last_wait_addr_ = 0;
  DevicePtr last_dmabuf_ptr_ = 0;
  std::size_t last_dmabuf_bytes_ = 0;
};

}  // namespace tictac::cuda::testing
