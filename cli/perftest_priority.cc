// perftest priority: how long a high-priority message waits behind queued low-priority bulk.
//
// Session (the client sends, the server receives):
//   1. client -> server  setup: hi_size, bulk message sizes.
//   2. server            posts every bulk receive (priority irrelevant on receives) and the
//                        high-priority receive, then -> client "posted" with its clock identity.
//   3. client            in the "posted" callback (so they reach the loop as one batch and all
//                        their ANNOUNCEs leave before any bulk data) submits every bulk message
//                        at priority 1.
//   4. server            when the first bulk message at whose landing at least `hi_after` bulk
//                        bytes have landed (default: message 0, one chunk) -> client "ack0". The
//                        transport sends control frames (READY) before data, so by the time ack0
//                        arrives every bulk message is cleared to send and queued on the client.
//                        A later point (--hi-after) samples the stream in steady state instead of
//                        in TCP's start-up, when the kernel's queues are still filling.
//   5. client            in ack0's callback: stamps t_submit and submits the 64 KiB message at
//                        priority 0.
//   6. server            when it lands: stamps t_landed -> client "hi-ack"; when all bulk landed:
//                        -> client "report" (t_landed, bulk landed before it, t_bulk_done).
// Latency = t_landed - t_submit when both processes read the same CLOCK_MONOTONIC (same kernel
// boot id; always true for --local), else the client's t_hi_ack - t_submit (adds one small
// message on the idle reverse path). Priority vs FIFO is the client Context's enforce_priority.
#include <algorithm>
#include <cstring>
#include <memory>

#include "cli/perftest_tests.h"

namespace tictac::cli::perftest {
namespace {

constexpr transport::Priority kHigh = 0;
constexpr transport::Priority kLow = 1;
constexpr std::size_t kMaxBulkMessages = 16;

struct PrioClient {
  PrioClient(std::uint64_t largest, std::uint64_t hi_size, std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), src(largest), hi(hi_size) {}
  std::shared_ptr<Monitor> mon;
  HostBuffer src;  // every bulk message reads it
  HostBuffer hi;
  std::uint64_t bulk_sent = 0;
  bool hi_sent = false;
  std::uint64_t t_bulk_start = 0;
  std::uint64_t t_submit = 0;
};

struct PrioServer {
  PrioServer(std::uint64_t bulk, std::uint64_t hi_size, std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), bulk(bulk), hi(hi_size), ack0(64), hi_ack(kMaxControlBytes) {}
  std::shared_ptr<Monitor> mon;
  HostBuffer bulk;  // every bulk message lands at its own offset
  HostBuffer hi;
  HostBuffer ack0;
  HostBuffer hi_ack;
  std::uint64_t bulk_landed = 0;
  bool hi_landed = false;
  std::uint64_t acks_sent = 0;
  std::uint64_t t_landed = 0;
  std::uint64_t t_bulk_done = 0;
  std::uint64_t bulk_before_hi = 0;
};

// Writes `text` into `buf` and sends it as a control message (under the monitor's lock).
void send_text(const Link& link, const std::shared_ptr<PrioServer>& st, HostBuffer& buf, Tag tag,
               const std::string& text, const char* what) {
  std::memcpy(buf.bytes.data(), text.data(), text.size());
  link.ctx->send(link.peer, tag, buf.region, 0, text.size(), kHigh,
                 on_done(st->mon, what, [st](std::uint64_t) { ++st->acks_sent; }));
}

Status out_of_range(const Fields& setup) {
  return Status(StatusCode::protocol_error, "perftest priority setup out of range: " + setup.encode());
}

}  // namespace

std::vector<std::uint64_t> bulk_message_sizes(std::uint64_t bulk, std::uint64_t chunk) {
  std::vector<std::uint64_t> sizes{std::min(bulk, chunk)};
  const std::uint64_t rest = bulk - sizes[0];
  if (rest == 0) return sizes;
  const std::uint64_t n = std::min<std::uint64_t>(kMaxBulkMessages - 1, (rest + chunk - 1) / chunk);
  const std::uint64_t each = rest / n;
  for (std::uint64_t i = 0; i < n; ++i) sizes.push_back(i + 1 < n ? each : rest - each * (n - 1));
  return sizes;
}

Result<PrioritySample> priority_client(const Link& link, const PerftestOptions& o, Fields setup) {
  const std::vector<std::uint64_t> sizes = bulk_message_sizes(o.bulk, o.config.chunk_bytes);
  setup.set("hi_size", o.size).set("bulk_sizes", join_numbers(sizes)).set("clock", clock_identity());
  setup.set("hi_after", o.hi_after);
  auto st = std::make_shared<PrioClient>(*std::max_element(sizes.begin(), sizes.end()), o.size, link.idle_limit);
  auto submit_hi = [link, st] {
    st->t_submit = now_ns();
    link.ctx->send(link.peer, kTagHi, st->hi.region, 0, st->hi.bytes.size(), kHigh,
                   on_done(st->mon, "sending the high-priority message", [st](std::uint64_t) { st->hi_sent = true; }));
  };
  // Submitted from the loop thread (the "posted" callback), all bulk sends reach the loop as one
  // batch of tasks: their ANNOUNCEs leave together, ahead of any bulk data, so the receiver READYs
  // them all before bulk message 0 can land and trigger ack0.
  auto submit_bulk = [link, st, sizes] {
    st->t_bulk_start = now_ns();
    for (std::uint64_t s : sizes) {
      link.ctx->send(link.peer, kTagBulk, st->src.region, 0, s, kLow,
                     on_done(st->mon, "sending bulk data", [st](std::uint64_t) { ++st->bulk_sent; }));
    }
  };
  auto ack0 = PendingControl::post(link, st->mon, kTagAck0,
                                   "the server's ack of the bulk landed so far", submit_hi);
  auto hi_ack = PendingControl::post(link, st->mon, kTagHiAck, "the server's ack of the high-priority message");
  auto report = PendingControl::post(link, st->mon, kTagReport, "the server's priority report");
  auto posted = PendingControl::post(link, st->mon, kTagPosted, "the server's receives to be posted", submit_bulk);
  TICTAC_RETURN_IF_ERROR(send_control(link, kTagSetup, setup));
  TICTAC_RETURN_IF_ERROR(st->mon->wait(
      [&] { return st->bulk_sent == sizes.size() && st->hi_sent && hi_ack->arrived() && report->arrived(); },
      "the bulk and the high-priority message to land"));
  Result<Fields> server = posted->fields();
  if (!server.ok()) return server.status();
  Result<std::string> server_clock = server->text("clock");
  if (!server_clock.ok()) return server_clock.status();
  Result<Fields> r = report->fields();
  if (!r.ok()) return r.status();
  Result<std::uint64_t> t_landed = r->number("t_landed");
  Result<std::uint64_t> t_bulk_done = r->number("t_bulk_done");
  Result<std::uint64_t> before = r->number("bulk_before_hi");
  for (const Status& s : {t_landed.status(), t_bulk_done.status(), before.status()}) TICTAC_RETURN_IF_ERROR(s);

  PrioritySample sample;
  sample.bulk_messages = sizes.size();
  sample.bulk_before_hi = *before;
  sample.hi_ack_ms = static_cast<double>(hi_ack->arrival_ns() - st->t_submit) / 1e6;
  const std::string mine = clock_identity();
  sample.same_clock = mine != "unknown" && mine == *server_clock && *t_landed >= st->t_submit;
  sample.hi_lat_ms = sample.same_clock ? static_cast<double>(*t_landed - st->t_submit) / 1e6 : sample.hi_ack_ms;
  const std::uint64_t bulk_end = sample.same_clock ? *t_bulk_done : report->arrival_ns();
  const double bulk_s = static_cast<double>(bulk_end - st->t_bulk_start) / 1e9;
  sample.bulk_bytes_per_s = bulk_s > 0 ? static_cast<double>(o.bulk) / bulk_s : 0;
  return sample;
}

Status priority_server(const Link& link, const Fields& setup) {
  Result<std::uint64_t> hi_size = setup.number("hi_size");
  Result<std::vector<std::uint64_t>> sizes = setup.numbers("bulk_sizes", kMaxBulkMessages);
  Result<std::string> client_clock = setup.text("clock");
  Result<std::uint64_t> hi_after = setup.number("hi_after");
  for (const Status& s :
       {hi_size.status(), sizes.status(), client_clock.status(), hi_after.status()}) {
    TICTAC_RETURN_IF_ERROR(s);
  }
  std::uint64_t bulk = 0;
  for (std::uint64_t s : *sizes) {
    if (s == 0 || s > kMaxPerfBufferBytes) return out_of_range(setup);
    bulk += s;
  }
  if (*hi_size == 0 || *hi_size > kMaxPerfSize || bulk > kMaxPerfBufferBytes || *hi_after >= bulk) {
    return out_of_range(setup);
  }

  auto st = std::make_shared<PrioServer>(bulk, *hi_size, link.idle_limit);
  const std::size_t n = sizes->size();
  // Bulk messages share one priority, so they land in order: ack0 goes with the first message at
  // whose landing at least hi_after bytes have landed.
  std::size_t ack_at = 0;
  for (std::uint64_t landed = (*sizes)[0]; landed < *hi_after; landed += (*sizes)[ack_at]) ++ack_at;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    link.ctx->recv(link.peer, kTagBulk, st->bulk.region, offset, (*sizes)[i],
                   on_done(st->mon, "receiving bulk data", [link, st, i, n, ack_at](std::uint64_t) {
                     if (i == ack_at)
                       send_text(link, st, st->ack0, kTagAck0, "bulk=landed", "sending ack0");
                     if (++st->bulk_landed == n) st->t_bulk_done = now_ns();
                   }));
    offset += (*sizes)[i];
  }
  link.ctx->recv(link.peer, kTagHi, st->hi.region, 0, *hi_size,
                 on_done(st->mon, "receiving the high-priority message", [link, st](std::uint64_t) {
                   st->t_landed = now_ns();
                   st->hi_landed = true;
                   st->bulk_before_hi = st->bulk_landed;
                   send_text(link, st, st->hi_ack, kTagHiAck, "t_landed=" + std::to_string(st->t_landed),
                             "sending the high-priority ack");
                 }));
  TICTAC_RETURN_IF_ERROR(send_control(link, kTagPosted, Fields().set("clock", clock_identity())));
  TICTAC_RETURN_IF_ERROR(st->mon->wait(
      [&] { return st->bulk_landed == n && st->hi_landed && st->acks_sent == 2; }, "the client's bulk and message"));
  Fields report;
  report.set("t_landed", st->t_landed).set("t_bulk_done", st->t_bulk_done).set("bulk_before_hi", st->bulk_before_hi);
  return send_control(link, kTagReport, report);
}

}  // namespace tictac::cli::perftest
