// perftest bw: the client keeps `outstanding` sends of `size` bytes in flight (each completion
// submits the next, on the loop thread); the server keeps `outstanding` receives posted, one
// buffer each (or `recv_buffers` shared round robin), and reposts a receive as soon as its
// message has landed. The server's clock times
// the stream: it starts when the last warmup message lands (with no warmup: the first message,
// which is then not counted) and stops when the last message lands.
#include <algorithm>
#include <memory>

#include "cli/perftest_tests.h"

namespace tictac::cli::perftest {
namespace {

struct BwClient {
  BwClient(std::uint64_t size, std::uint64_t total, std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), src(size), total(total) {}
  std::shared_ptr<Monitor> mon;
  HostBuffer src;
  const std::uint64_t total;
  std::uint64_t submitted = 0;
  std::uint64_t sent = 0;
};

void submit(const Link& link, const std::shared_ptr<BwClient>& st) {
  ++st->submitted;
  link.ctx->send(link.peer, kTagData, st->src.region, 0, st->src.bytes.size(), /*priority=*/0,
                 on_done(st->mon, "streaming data", [link, st](std::uint64_t) {
                   ++st->sent;
                   if (st->submitted < st->total) submit(link, st);
                 }));
}

struct BwServer {
  BwServer(std::uint64_t size, std::uint64_t total, std::uint64_t first_timed, std::uint64_t n_buffers,
           std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), size(size), total(total), first_timed(first_timed) {
    for (std::uint64_t i = 0; i < n_buffers; ++i) buffers.push_back(std::make_unique<HostBuffer>(size));
    landed_ns.reserve(total - first_timed);
  }
  std::shared_ptr<Monitor> mon;
  const std::uint64_t size;
  const std::uint64_t total;
  const std::uint64_t first_timed;  // messages [0, first_timed) are untimed
  std::vector<std::unique_ptr<HostBuffer>> buffers;
  std::uint64_t posted = 0;
  std::uint64_t landed = 0;
  std::uint64_t start_ns = 0;
  std::vector<std::uint64_t> landed_ns;  // timed messages
};

void post(const Link& link, const std::shared_ptr<BwServer>& st, std::size_t slot) {
  ++st->posted;
  link.ctx->recv(link.peer, kTagData, st->buffers[slot % st->buffers.size()]->region, 0, st->size,
                 on_done(st->mon, "receiving the stream", [link, st, slot](std::uint64_t) {
                   const std::uint64_t t = now_ns();
                   if (++st->landed == st->first_timed) {
                     st->start_ns = t;
                   } else if (st->landed > st->first_timed) {
                     st->landed_ns.push_back(t);
                   }
                   if (st->posted < st->total) post(link, st, slot);
                 }));
}

// The receives the server keeps posted, and the distinct buffers they rotate through
// (recv_buffers 0: one per receive).
std::uint64_t bw_slots(std::uint64_t outstanding, std::uint64_t total) { return std::min(outstanding, total); }
std::uint64_t bw_buffers(std::uint64_t slots, std::uint64_t recv_buffers) {
  return recv_buffers == 0 ? slots : std::min(recv_buffers, slots);
}

// Median rate over groups of consecutive landings, each group at least 1 MiB (and one message),
// so that small messages landing in one loop iteration do not read as infinite rates.
std::uint64_t median_group_rate(const BwServer& st) {
  const std::uint64_t group = std::max<std::uint64_t>(1, ((std::uint64_t{1} << 20) + st.size - 1) / st.size);
  std::vector<double> rates;
  std::uint64_t prev = st.start_ns;
  for (std::size_t end = group; end <= st.landed_ns.size(); end += group) {
    const std::uint64_t t = st.landed_ns[end - 1];
    if (t > prev) rates.push_back(static_cast<double>(group * st.size) * 1e9 / static_cast<double>(t - prev));
    prev = t;
  }
  return static_cast<std::uint64_t>(quantile(rates, 0.5));
}

}  // namespace

Status bw_client(const Link& link, const PerftestOptions& o, Fields setup, Report& report) {
  const std::uint64_t total = o.warmup + o.iters;
  setup.set("size", o.size).set("total", total).set("warmup", o.warmup).set("outstanding", o.outstanding)
      .set("recv_buffers", o.recv_buffers);
  TICTAC_RETURN_IF_ERROR(send_control(link, kTagSetup, setup));
  auto st = std::make_shared<BwClient>(o.size, total, link.idle_limit);
  std::shared_ptr<PendingControl> done = PendingControl::post(link, st->mon, kTagReport, "the server's bw report");
  st->mon->update([&] {
    for (std::uint64_t i = 0; i < bw_slots(o.outstanding, total); ++i) submit(link, st);
  });
  TICTAC_RETURN_IF_ERROR(
      st->mon->wait([&] { return st->sent == total && done->arrived(); }, "the stream to land at the server"));
  Result<Fields> r = done->fields();
  if (!r.ok()) return r.status();
  Result<std::uint64_t> timed = r->number("timed_messages");
  Result<std::uint64_t> ns = r->number("timed_ns");
  Result<std::uint64_t> median = r->number("median_bytes_per_s");
  for (const Status& s : {timed.status(), ns.status(), median.status()}) TICTAC_RETURN_IF_ERROR(s);
  const double seconds = static_cast<double>(*ns) / 1e9;
  const double bytes = static_cast<double>(*timed) * static_cast<double>(o.size);
  report.add("outstanding", o.outstanding);
  report.add("recv_buffers", bw_buffers(bw_slots(o.outstanding, total), o.recv_buffers));
  report.add("gbytes_per_s", seconds > 0 ? bytes / seconds / 1e9 : 0.0);
  report.add("gbytes_per_s_median", static_cast<double>(*median) / 1e9);
  report.add("timed_messages", *timed);
  report.add("seconds", seconds);
  report.note("GB/s = 10^9 bytes/s on the receiver's clock, from the landing of the last warmup message (or the "
              "first message) to the landing of the last; median over groups of >= 1 MiB");
  return Status::Ok();
}

Status bw_server(const Link& link, const Fields& setup) {
  Result<std::uint64_t> size = setup.number("size");
  Result<std::uint64_t> total = setup.number("total");
  Result<std::uint64_t> warmup = setup.number("warmup");
  Result<std::uint64_t> outstanding = setup.number("outstanding");
  for (const Status& s : {size.status(), total.status(), warmup.status(), outstanding.status()}) {
    TICTAC_RETURN_IF_ERROR(s);
  }
  const std::uint64_t first_timed = std::max<std::uint64_t>(*warmup, 1);
  if (*size == 0 || *size > kMaxPerfSize || *outstanding == 0 || *outstanding > 1024 ||
      *outstanding * *size > kMaxPerfBufferBytes || *total > 2 * kMaxPerfIters || *total <= first_timed) {
    return Status(StatusCode::protocol_error, "perftest bw setup out of range: " + setup.encode());
  }
  // recv_buffers is absent from an older client's setup: one buffer per receive, as before
  std::uint64_t want_buffers = 0;
  if (setup.has("recv_buffers")) {
    Result<std::uint64_t> b = setup.number("recv_buffers");
    if (!b.ok()) return b.status();
    want_buffers = *b;
  }
  if (want_buffers > 1024) {
    return Status(StatusCode::protocol_error, "perftest bw setup out of range: " + setup.encode());
  }
  const std::uint64_t slots = bw_slots(*outstanding, *total);
  auto st = std::make_shared<BwServer>(*size, *total, first_timed, bw_buffers(slots, want_buffers),
                                       link.idle_limit);
  std::shared_ptr<Monitor> mon = st->mon;
  mon->update([&] {
    for (std::uint64_t i = 0; i < slots; ++i) post(link, st, i);
  });
  TICTAC_RETURN_IF_ERROR(mon->wait([&] { return st->landed == st->total; }, "the client's stream"));
  Fields r;
  r.set("timed_messages", st->landed_ns.size())
      .set("timed_ns", st->landed_ns.back() - st->start_ns)
      .set("median_bytes_per_s", median_group_rate(*st));
  return send_control(link, kTagReport, r);
}

}  // namespace tictac::cli::perftest
