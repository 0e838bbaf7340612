// TcpEndpoint: one connected, non-blocking TCP socket (internal to the TCP backend).
// Loop-thread only (see transport/backend.h). Owns the socket; close() unwatches and closes it.
#pragma once

#include <sys/uio.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"

namespace tictac::transport::tcp {

class TcpEndpoint final : public Endpoint {
 public:
  // Takes ownership of the connected socket `fd`.
  TcpEndpoint(ProgressEngine& engine, int fd);
  ~TcpEndpoint() override;

  void start(EndpointSink* sink) override;
  bool has_capacity() const override;
  Status post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  void close() override;
  std::string describe() const override { return desc_; }

 private:
  struct OutFrame {
    wire::HeaderBytes header;
    const std::byte* payload;
    std::size_t length;
    std::uint64_t cookie;
    std::size_t done;  // bytes of header+payload written
  };

  void on_events(std::uint32_t events);
  // Auto TCP_NOTSENT_LOWAT: follows the largest payload among the last kRecentFrames posted.
  void follow_chunk_size(std::uint64_t payload_bytes);
  void schedule_flush();
  void flush();
  void read_some();
  // Closes and reports `status` to the sink (once).
  void fail(const Status& status);
  void update_interest();

  ProgressEngine& engine_;
  int fd_;
  std::string desc_;
  EndpointSink* sink_ = nullptr;
  bool closed_ = false;
  bool started_ = false;
  bool watching_out_ = false;
  bool flush_scheduled_ = false;
  ProgressEngine::DeferredCallId flush_call_ = 0;  // registered on the first schedule_flush()
  std::vector<std::uint64_t> sent_spare_;          // flush()'s list of sent cookies, kept for reuse
  bool was_full_ = false;
  bool broken_ = false;  // failed: close at once (no linger_close)
  scaffold::LoopLifetime lifetime_;  // deferred work and sink callbacks check it

  bool auto_lowat_ = false;
  std::uint64_t lowat_ = 0;  // the socket's current TCP_NOTSENT_LOWAT when auto_lowat_
  static constexpr std::size_t kRecentFrames = 8;
  std::uint64_t recent_[kRecentFrames] = {};
  std::size_t recent_at_ = 0;

  std::deque<OutFrame> out_;
  std::size_t queued_bytes_ = 0;  // header and payload bytes in out_ not yet written

  enum class ReadState { header, payload };
  ReadState rstate_ = ReadState::header;
  wire::HeaderBytes hbuf_{};
  std::size_t hgot_ = 0;
  wire::Header cur_;
  Destination dest_;
  std::size_t pgot_ = 0;
  std::vector<std::byte> scratch_;
  // Bytes read ahead in header state (one recv of up to kRxBytes takes a small frame whole, and
  // often the frames behind it), not yet handed to the state machine: rx_[rx_pos_, rx_len_).
  std::vector<std::byte> rx_;
  std::size_t rx_pos_ = 0;
  std::size_t rx_len_ = 0;
};

}  // namespace tictac::transport::tcp
