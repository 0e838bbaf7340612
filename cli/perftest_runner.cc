#include "cli/perftest_runner.h"

#include <utility>
#include <vector>

#include "cli/perftest_link.h"
#include "cli/perftest_tests.h"
#include "transport/context.h"

namespace tictac::cli::perftest {
namespace {

// Waits give the transport's own failure detection (TICTAC_TIMEOUT) time to report first.
std::chrono::milliseconds idle_limit(const transport::TransportConfig& c) { return c.timeout + std::chrono::seconds(2); }

Result<std::unique_ptr<transport::Context>> make_context(const BackendMaker& make, transport::TransportConfig config,
                                                         const char* name) {
  transport::ContextOptions options;
  options.name = name;
  options.config = config;
  options.backends.push_back(make());
  return transport::Context::create(std::move(options));
}

Status protocol(const std::string& what) {
  return Status(StatusCode::protocol_error, "perftest client's setup: " + what);
}

Status serve_session(const Link& link, const Fields& setup, std::uint64_t& session, std::uint64_t& sessions) {
  Result<std::string> proto = setup.text("proto");
  if (!proto.ok()) return proto.status();
  if (*proto != kProtocol) {
    return protocol("speaks '" + *proto + "', this server speaks '" + kProtocol + "' (same tictac version on both?)");
  }
  Result<std::uint64_t> s = setup.number("session");
  Result<std::uint64_t> n = setup.number("sessions");
  Result<std::string> test = setup.text("test");
  for (const Status& st : {s.status(), n.status(), test.status()}) TICTAC_RETURN_IF_ERROR(st);
  if (*n == 0 || *n > 200 || *s == 0 || *s > *n) return protocol("session " + std::to_string(*s) + " of " + std::to_string(*n));
  session = *s;
  sessions = *n;
  if (*test == "lat") return lat_server(link, setup);
  if (*test == "bw") return bw_server(link, setup);
  if (*test == "priority") return priority_server(link, setup);
  return protocol("unknown test '" + *test + "'");
}

Fields session_fields(const PerftestOptions& o, std::uint64_t session, std::uint64_t sessions) {
  Fields f;
  f.set("proto", kProtocol).set("test", to_string(o.test)).set("session", session).set("sessions", sessions);
  return f;
}

// One client session over a fresh Context with `config`; `body` runs the test over the link.
template <typename Body>
Status client_session(const BackendMaker& make, const transport::TransportConfig& config, const std::string& address,
                      Body&& body) {
  Result<std::unique_ptr<transport::Context>> ctx = make_context(make, config, "perftest-client");
  if (!ctx.ok()) return ctx.status();
  Result<transport::PeerId> peer = (*ctx)->connect(address);
  if (!peer.ok()) return peer.status().with_context("connecting to the perftest server " + address);
  Link link{ctx->get(), *peer, idle_limit(config)};
  TICTAC_RETURN_IF_ERROR(body(link));
  // The server closes its side only after this, so nothing it sent can be cut off by its close.
  return send_control(link, kTagBye, Fields().set("bye", std::uint64_t{1}));
}

void add_priority_figures(const PerftestOptions& o, const std::vector<PrioritySample>& on,
                          const std::vector<PrioritySample>& off, Report& r) {
  auto pick = [](const std::vector<PrioritySample>& v, auto field) {
    std::vector<double> out;
    for (const PrioritySample& s : v) out.push_back(static_cast<double>(s.*field));
    return out;
  };
  const double lat_on = quantile(pick(on, &PrioritySample::hi_lat_ms), 0.5);
  const double lat_off = quantile(pick(off, &PrioritySample::hi_lat_ms), 0.5);
  std::vector<double> rates = pick(on, &PrioritySample::bulk_bytes_per_s);
  for (double x : pick(off, &PrioritySample::bulk_bytes_per_s)) rates.push_back(x);
  const double rate = quantile(rates, 0.5);
  const double chunk_ms = rate > 0 ? static_cast<double>(o.config.chunk_bytes) / rate * 1e3 : 0;
  bool same_clock = true;
  for (const auto* v : {&on, &off}) {
    for (const PrioritySample& s : *v) same_clock = same_clock && s.same_clock;
  }
  r.add("bulk", o.bulk);
  r.add("hi_after", o.hi_after);
  r.add("bulk_messages", on.front().bulk_messages);
  r.add("hi_lat_ms_priority", lat_on);
  r.add("hi_lat_ms_fifo", lat_off);
  r.add("fifo_over_priority", lat_on > 0 ? lat_off / lat_on : 0.0);
  r.add("hi_ack_ms_priority", quantile(pick(on, &PrioritySample::hi_ack_ms), 0.5));
  r.add("hi_ack_ms_fifo", quantile(pick(off, &PrioritySample::hi_ack_ms), 0.5));
  r.add("bulk_before_hi_priority", static_cast<std::uint64_t>(quantile(pick(on, &PrioritySample::bulk_before_hi), 0.5)));
  r.add("bulk_before_hi_fifo", static_cast<std::uint64_t>(quantile(pick(off, &PrioritySample::bulk_before_hi), 0.5)));
  r.add("bulk_gbytes_per_s", rate / 1e9);
  r.add("chunk_ms", chunk_ms);
  r.add("hi_lat_chunks_priority", chunk_ms > 0 ? lat_on / chunk_ms : 0.0);
  r.add("hi_lat_chunks_fifo", chunk_ms > 0 ? lat_off / chunk_ms : 0.0);
  r.add("hi_lat_clock", same_clock ? "monotonic" : "ack");
  r.note(std::string("hi_lat_ms = ") +
         (same_clock ? "submission of the high-priority message (sender) to its receive completion (receiver), one "
                       "CLOCK_MONOTONIC"
                     : "submission of the high-priority message to the receiver's ack back at the sender (different "
                       "hosts: includes one small message on the idle return path)") +
         "; median of " + std::to_string(on.size()) + " run(s) per mode; chunk_ms = chunk_bytes / measured bulk rate");
}

}  // namespace

Status run_server(const PerftestOptions& o, const BackendMaker& make, std::string listen_address,
                  const std::function<Status(const std::string&)>& publish) {
  Result<std::unique_ptr<transport::Context>> ctx = make_context(make, o.config, "perftest-server");
  if (!ctx.ok()) return ctx.status();
  Result<std::string> bound = (*ctx)->listen(listen_address);
  if (!bound.ok()) return bound.status().with_context("listening on " + listen_address);
  TICTAC_RETURN_IF_ERROR(publish(*bound));
  std::uint64_t session = 0;
  std::uint64_t sessions = 1;
  while (session < sessions) {
    Result<transport::PeerId> peer = (*ctx)->accept(o.config.timeout);
    if (!peer.ok()) return peer.status().with_context("waiting for a perftest client on " + *bound);
    Link link{ctx->get(), *peer, idle_limit(o.config)};
    Result<Fields> setup = recv_control(link, kTagSetup, "the client's setup");
    if (!setup.ok()) return setup.status();
    std::uint64_t next = 0;
    Status s = serve_session(link, *setup, next, sessions);
    if (!s.ok()) return s;
    // The client says bye once it has everything; a client that already hung up is done too.
    Result<Fields> bye = recv_control(link, kTagBye, "the client's bye");
    if (!bye.ok() && bye.status().code() != StatusCode::connection_lost) return bye.status();
    if (next <= session) return protocol("session " + std::to_string(next) + " after session " + std::to_string(session));
    session = next;
  }
  return Status::Ok();
}

Result<Report> run_client(const PerftestOptions& o, const BackendMaker& make, const std::string& address) {
  Report r;
  r.add("backend", o.backend);
  r.add("test", to_string(o.test));
  r.add("size", o.size);
  r.add("iters", o.iters);
  if (o.test != PerfTest::priority) r.add("warmup", o.warmup);
  r.add("chunk_bytes", o.config.chunk_bytes);
  r.add("window", static_cast<std::uint64_t>(o.config.window_chunks));
  r.add("chunk_auto", o.config.auto_chunk);  // true: chunk_bytes is only the starting value
  r.add("window_auto", o.config.auto_window);
  if (o.test != PerfTest::priority) {
    r.add("enforce_priority", o.config.enforce_priority);
    Status s = client_session(make, o.config, address, [&](const Link& link) {
      Fields setup = session_fields(o, 1, 1);
      return o.test == PerfTest::lat ? lat_client(link, o, std::move(setup), r) : bw_client(link, o, std::move(setup), r);
    });
    if (!s.ok()) return s;
    return r;
  }
  std::vector<PrioritySample> on;
  std::vector<PrioritySample> off;
  const std::uint64_t sessions = 2 * o.iters;
  for (std::uint64_t i = 1; i <= sessions; ++i) {
    transport::TransportConfig config = o.config;
    config.enforce_priority = i % 2 == 1;  // alternate, so drift affects both modes alike
    Status s = client_session(make, config, address, [&](const Link& link) -> Status {
      Result<PrioritySample> sample = priority_client(link, o, session_fields(o, i, sessions));
      if (!sample.ok()) return sample.status().with_context(config.enforce_priority ? "priority run" : "FIFO run");
      (config.enforce_priority ? on : off).push_back(*sample);
      return Status::Ok();
    });
    if (!s.ok()) return s;
  }
  add_priority_figures(o, on, off, r);
  return r;
}

}  // namespace tictac::cli::perftest
