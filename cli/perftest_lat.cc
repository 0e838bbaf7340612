// perftest lat: ping-pong. The client posts the pong's receive, stamps the time and sends the
// ping; the server, on each ping, posts the next ping's receive and sends the pong; the client's
// pong callback records the round trip and starts the next exchange on the loop thread (no
// thread hand-off inside the timed loop).
#include <memory>

#include "cli/perftest_tests.h"

namespace tictac::cli::perftest {
namespace {

struct LatClient {
  LatClient(std::uint64_t size, std::uint64_t total, std::uint64_t warmup, std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), ping(size), pong(size), total(total), warmup(warmup) {
    rtt_us.reserve(total - warmup);
  }
  std::shared_ptr<Monitor> mon;
  HostBuffer ping;
  HostBuffer pong;
  const std::uint64_t total;
  const std::uint64_t warmup;
  std::uint64_t pongs = 0;
  std::uint64_t pings_sent = 0;
  std::uint64_t t0 = 0;
  std::vector<double> rtt_us;
};

// Starts exchange number st->pongs (called under the monitor's lock, or before any callback).
void start_exchange(const Link& link, const std::shared_ptr<LatClient>& st) {
  const std::uint64_t size = st->ping.bytes.size();
  link.ctx->recv(link.peer, kTagPong, st->pong.region, 0, size,
                 on_done(st->mon, "receiving a pong", [link, st](std::uint64_t) {
                   const std::uint64_t t1 = now_ns();
                   if (st->pongs >= st->warmup) st->rtt_us.push_back(static_cast<double>(t1 - st->t0) / 1e3);
                   if (++st->pongs < st->total) start_exchange(link, st);
                 }));
  st->t0 = now_ns();
  link.ctx->send(link.peer, kTagPing, st->ping.region, 0, size, /*priority=*/0,
                 on_done(st->mon, "sending a ping", [st](std::uint64_t) { ++st->pings_sent; }));
}

struct LatServer {
  LatServer(std::uint64_t size, std::uint64_t total, std::chrono::milliseconds idle)
      : mon(std::make_shared<Monitor>(idle)), ping(size), pong(size), total(total) {}
  std::shared_ptr<Monitor> mon;
  HostBuffer ping;
  HostBuffer pong;
  const std::uint64_t total;
  std::uint64_t pings = 0;
  std::uint64_t pongs_sent = 0;
};

void serve_ping(const Link& link, const std::shared_ptr<LatServer>& st) {
  const std::uint64_t size = st->ping.bytes.size();
  link.ctx->recv(link.peer, kTagPing, st->ping.region, 0, size,
                 on_done(st->mon, "receiving a ping", [link, st, size](std::uint64_t) {
                   if (++st->pings < st->total) serve_ping(link, st);
                   link.ctx->send(link.peer, kTagPong, st->pong.region, 0, size, /*priority=*/0,
                                  on_done(st->mon, "sending a pong", [st](std::uint64_t) { ++st->pongs_sent; }));
                 }));
}

}  // namespace

Status lat_client(const Link& link, const PerftestOptions& o, Fields setup, Report& report) {
  const std::uint64_t total = o.warmup + o.iters;
  setup.set("size", o.size).set("total", total);
  TICTAC_RETURN_IF_ERROR(send_control(link, kTagSetup, setup));
  auto st = std::make_shared<LatClient>(o.size, total, o.warmup, link.idle_limit);
  st->mon->update([&] { start_exchange(link, st); });
  TICTAC_RETURN_IF_ERROR(
      st->mon->wait([&] { return st->pongs == total && st->pings_sent == total; }, "the ping-pong to finish"));
  report.add("lat_us_median", quantile(st->rtt_us, 0.5) / 2);
  report.add("lat_us_p99", quantile(st->rtt_us, 0.99) / 2);
  report.add("lat_us_min", quantile(st->rtt_us, 0) / 2);
  report.add("lat_us_avg", mean(st->rtt_us) / 2);
  report.add("rtt_us_median", quantile(st->rtt_us, 0.5));
  report.note("one-way latency = round trip / 2, measured on the client over " + std::to_string(o.iters) +
              " exchanges after " + std::to_string(o.warmup) + " warmup exchanges");
  return Status::Ok();
}

Status lat_server(const Link& link, const Fields& setup) {
  Result<std::uint64_t> size = setup.number("size");
  Result<std::uint64_t> total = setup.number("total");
  if (!size.ok()) return size.status();
  if (!total.ok()) return total.status();
  if (*size > kMaxPerfSize || *total == 0 || *total > 2 * kMaxPerfIters) {
    return Status(StatusCode::protocol_error, "perftest lat setup out of range: size=" + std::to_string(*size) +
                                                  " total=" + std::to_string(*total));
  }
  auto st = std::make_shared<LatServer>(*size, *total, link.idle_limit);
  st->mon->update([&] { serve_ping(link, st); });
  return st->mon->wait([&] { return st->pongs_sent == st->total; }, "the client's pings");
}

}  // namespace tictac::cli::perftest
