// Building blocks shared by the perftest's tests: a connected peer (Link), registered host
// buffers, and control messages (short texts, perftest_protocol.h) sent and received with bounded
// waits.
//
// Ownership: every request keeps what it reads or writes alive by holding a shared_ptr to it in
// its callback, so a session that gives up early (a failure, a timeout) never leaves the
// transport writing into freed memory. Callbacks run on the Context's loop thread and only touch
// state under a Monitor (perftest_monitor.h).
// Errors: transport failures are returned as the transport reported them (connection_lost naming
// the peer, ...), with what the perftest was doing as context.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/perftest_monitor.h"
#include "cli/perftest_protocol.h"
#include "common/status.h"
#include "transport/context.h"

namespace tictac::cli::perftest {

struct Link {
  transport::Context* ctx = nullptr;
  transport::PeerId peer = transport::kNoPeer;
  // How long any wait may see no progress at all (the transport's timeout plus a margin, so that
  // the transport's own, more precise error normally arrives first).
  std::chrono::milliseconds idle_limit{0};
};

// A host buffer and its registration; the bytes are zeroed (pages touched) up front so that page
// faults do not land in the timed part.
struct HostBuffer {
  explicit HostBuffer(std::size_t n);
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::vector<std::byte> bytes;
  transport::MemoryRegion region;
};

// A callback that records a failure of the request in `mon` as "<what>: <status>" and otherwise
// runs `on_ok(bytes)` inside mon->update().
transport::Callback on_done(const std::shared_ptr<Monitor>& mon, std::string what,
                            std::function<void(std::uint64_t bytes)> on_ok);

// Sends a control message and waits until it has left this host.
Status send_control(const Link& link, Tag tag, const Fields& fields);

// A control message receive posted ahead of its use. State is read under the monitor's lock
// (inside Monitor::wait's condition or update()).
class PendingControl {
 public:
  // `then` (optional) runs on the loop thread, under the monitor's lock, right after arrival.
  static std::shared_ptr<PendingControl> post(const Link& link, const std::shared_ptr<Monitor>& mon, Tag tag,
                                              std::string what, std::function<void()> then = {});
  bool arrived() const { return arrived_; }
  std::uint64_t arrival_ns() const { return arrival_ns_; }
  // The decoded message (protocol_error for garbage); call only after arrived().
  Result<Fields> fields() const;

 private:
  PendingControl() : buffer_(kMaxControlBytes) {}
  HostBuffer buffer_;
  bool arrived_ = false;
  std::uint64_t arrival_ns_ = 0;
  std::uint64_t bytes_ = 0;
};

// Posts a control receive and waits for it.
Result<Fields> recv_control(const Link& link, Tag tag, std::string_view what);

}  // namespace tictac::cli::perftest
