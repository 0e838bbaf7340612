#include "tests/unit/cuda/fake_api.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tictac::cuda::testing {

FakeApi::FakeApi(int devices, Status viability)
    : devices_(devices), viability_(std::move(viability)) {
  streams_[nullptr];  // the legacy default stream always exists
}

FakeApi::~FakeApi() {
  for (auto& [p, bytes] : pinned_) std::free(p);
  for (void* p : device_allocs_) std::free(p);
}

Status FakeApi::enter(const std::string& call) {
  calls_.push_back(call);
  if (!viability_.ok()) return viability_;
  auto it = failures_.find(call);
  if (it == failures_.end()) return Status::Ok();
  Status s = std::move(it->second);
  failures_.erase(it);
  return s;
}

void FakeApi::register_memory(const void* p, std::size_t bytes, MemoryType type, int device) {
  regions_[static_cast<const unsigned char*>(p)] = Region{bytes, type, device};
}

void* FakeApi::alloc_device(std::size_t bytes, int device) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  device_allocs_.push_back(p);
  register_memory(p, bytes, MemoryType::device, device);
  return p;
}

void FakeApi::enqueue_marker(Stream s, std::string name) {
  Op op{OpKind::marker};
  op.name = std::move(name);
  streams_[s].push_back(op);
}

void FakeApi::enqueue_hold(Stream s) { streams_[s].push_back(Op{OpKind::hold}); }

void FakeApi::release_hold(Stream s) { held_[s] = true; }

bool FakeApi::ready(const Op& op) const {
  switch (op.kind) {
    case OpKind::wait_value: {
      // The host writes the word with an atomic store while the "GPU" polls it, as a real
      // stream's wait-value reads pinned memory the host updates: read it atomically too.
      auto* word = reinterpret_cast<std::uint32_t*>(op.addr);
      const std::uint32_t now =
          std::atomic_ref<std::uint32_t>(*word).load(std::memory_order_acquire);
      return static_cast<std::int32_t>(now - op.value) >= 0;
    }
    case OpKind::wait_event:
      return events_.at(op.event).completed >= op.generation;
    case OpKind::hold:
      return false;  // run() checks held_ for holds
    default:
      return true;
  }
}

std::size_t FakeApi::run() {
  std::size_t executed = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto& [stream, ops] : streams_) {
      while (!ops.empty()) {
        Op& op = ops.front();
        if (op.kind == OpKind::hold) {
          if (!held_[stream]) break;
          held_[stream] = false;
        } else if (!ready(op)) {
          break;
        }
        if (op.kind == OpKind::record) {
          EventState& e = events_.at(op.event);
          if (op.generation > e.completed) e.completed = op.generation;
        } else if (op.kind == OpKind::memcpy) {
          std::memcpy(op.dst, op.src, op.bytes);
        } else if (op.kind == OpKind::marker) {
          trace_.push_back(op.name);
        }
        ops.pop_front();
        ++executed;
        progress = true;
      }
    }
  }
  return executed;
}

std::size_t FakeApi::queued(Stream s) const {
  auto it = streams_.find(s);
  return it == streams_.end() ? 0 : it->second.size();
}

Result<DeviceCaps> FakeApi::device_caps(int device) {
  TICTAC_RETURN_IF_ERROR(enter("device_caps"));
  if (device < 0 || device >= devices_) return invalid_argument("no such fake device");
  return caps_;
}

Status FakeApi::use_device(int device) {
  TICTAC_RETURN_IF_ERROR(enter("use_device"));
  if (device < 0 || device >= devices_) return invalid_argument("no such fake device");
  current_device_ = device;
  return Status::Ok();
}

Result<PointerInfo> FakeApi::pointer_info(const void* ptr) {
  calls_.push_back("pointer_info");
  if (auto it = failures_.find("pointer_info"); it != failures_.end()) {
    Status s = std::move(it->second);
    failures_.erase(it);
    return s;
  }
  const auto* p = static_cast<const unsigned char*>(ptr);
  auto it = regions_.upper_bound(p);
  if (it == regions_.begin()) return PointerInfo{};
  --it;
  if (p >= it->first + it->second.bytes) return PointerInfo{};
  PointerInfo info;
  info.type = it->second.type;
  info.device = it->second.device;
  info.range_start = reinterpret_cast<std::uint64_t>(it->first);
  info.range_size = it->second.bytes;
  return info;
}

Result<HostMapping> FakeApi::alloc_pinned(std::size_t bytes, bool mapped) {
  TICTAC_RETURN_IF_ERROR(enter("alloc_pinned"));
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  std::memset(p, 0xA5, bytes);  // like fresh memory: callers must initialise what they use
  pinned_[p] = bytes;
  register_memory(p, bytes, MemoryType::pinned_host, -1);
  return HostMapping{p, mapped ? reinterpret_cast<DevicePtr>(p) : 0, bytes};
}

Status FakeApi::free_pinned(void* host) {
  TICTAC_RETURN_IF_ERROR(enter("free_pinned"));
  auto it = pinned_.find(host);
  if (it == pinned_.end()) return invalid_argument("free_pinned of memory the fake did not pin");
  regions_.erase(static_cast<const unsigned char*>(host));
  pinned_.erase(it);
  std::free(host);
  return Status::Ok();
}

Result<Stream> FakeApi::create_stream() {
  TICTAC_RETURN_IF_ERROR(enter("create_stream"));
  auto s = reinterpret_cast<Stream>(next_handle_++);
  streams_[s];
  ++streams_created_;
  return s;
}

Status FakeApi::destroy_stream(Stream stream) {
  TICTAC_RETURN_IF_ERROR(enter("destroy_stream"));
  if (stream == nullptr || streams_.erase(stream) == 0)
    return invalid_argument("unknown fake stream");
  --streams_created_;
  return Status::Ok();
}

Status FakeApi::wait_value32(Stream stream, DevicePtr addr, std::uint32_t value, bool flush) {
  TICTAC_RETURN_IF_ERROR(enter(flush ? "wait_value32+flush" : "wait_value32"));
  if (addr % 4 != 0) return invalid_argument("misaligned flag address");
  last_wait_addr_ = addr;
  Op op{OpKind::wait_value};
  op.addr = addr;
  op.value = value;
  streams_.at(stream).push_back(op);
  return Status::Ok();
}

Status FakeApi::memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) {
  TICTAC_RETURN_IF_ERROR(enter("memcpy_async"));
  Op op{OpKind::memcpy};
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  streams_.at(stream).push_back(op);
  return Status::Ok();
}

Result<Event> FakeApi::create_event() {
  TICTAC_RETURN_IF_ERROR(enter("create_event"));
  auto e = reinterpret_cast<Event>(next_handle_++);
  events_[e];
  return e;
}

Status FakeApi::destroy_event(Event event) {
  TICTAC_RETURN_IF_ERROR(enter("destroy_event"));
  if (events_.erase(event) == 0) return invalid_argument("unknown fake event");
  return Status::Ok();
}

Status FakeApi::record_event(Event event, Stream stream) {
  TICTAC_RETURN_IF_ERROR(enter("record_event"));
  Op op{OpKind::record};
  op.event = event;
  op.generation = ++events_.at(event).recorded;
  streams_.at(stream).push_back(op);
  return Status::Ok();
}

Result<bool> FakeApi::event_fired(Event event) {
  TICTAC_RETURN_IF_ERROR(enter("event_fired"));
  const EventState& e = events_.at(event);
  return e.completed >= e.recorded;
}

Status FakeApi::stream_wait_event(Stream stream, Event event) {
  TICTAC_RETURN_IF_ERROR(enter("stream_wait_event"));
  Op op{OpKind::wait_event};
  op.event = event;
  op.generation = events_.at(event).recorded;  // CUDA captures the most recent record now
  streams_.at(stream).push_back(op);
  return Status::Ok();
}

Result<int> FakeApi::dmabuf_fd(DevicePtr aligned_ptr, std::size_t aligned_bytes) {
  TICTAC_RETURN_IF_ERROR(enter("dmabuf_fd"));
  last_dmabuf_ptr_ = aligned_ptr;
  last_dmabuf_bytes_ = aligned_bytes;
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return internal_error("fake dmabuf: cannot open /dev/null");
  return fd;
}

}  // namespace tictac::cuda::testing
