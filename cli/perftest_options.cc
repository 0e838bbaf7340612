#include "cli/perftest_options.h"

#include <algorithm>
#include <initializer_list>

#include "common/tunables.h"

namespace tictac::cli {
namespace {

bool one_of(const std::string& v, std::initializer_list<const char*> set) {
  return std::any_of(set.begin(), set.end(), [&](const char* s) { return v == s; });
}

// "host:port" -> "<backend>://host:port"; an explicit scheme must name the backend.
Result<std::string> with_scheme(const std::string& flag, const std::string& address, const std::string& backend) {
  if (address.empty()) return invalid_argument("--" + flag + " needs an address such as 127.0.0.1:18515");
  const std::size_t sep = address.find("://");
  if (sep == std::string::npos) return backend + "://" + address;
  if (address.substr(0, sep) != backend) {
    return invalid_argument("--" + flag + " '" + address + "' is not a " + backend + " address (use " + backend +
                            "://host:port or host:port)");
  }
  return address;
}

Status in_range(const char* flag, std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return invalid_argument(std::string("--") + flag + " " + std::to_string(v) + " is out of range [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// Flags that only make sense for some tests or modes: given elsewhere, they are an error (a
// benchmark that silently ignores a flag measures something else than its user thinks).
Status reject_if_given(Args& args, std::initializer_list<const char*> flags, const std::string& why) {
  for (const char* f : flags) {
    if (args.get(f).has_value()) return invalid_argument(std::string("--") + f + " " + why);
  }
  return Status::Ok();
}

Status parse_mode(Args& args, PerftestOptions& o) {
  const bool server = args.flag("server");
  const bool client = args.flag("client");
  const bool local = args.flag("local");
  if (int(server) + int(client) + int(local) != 1) {
    return invalid_argument("choose exactly one of --server, --client --connect ADDR, or --local");
  }
  o.mode = server ? PerfMode::server : client ? PerfMode::client : PerfMode::local;
  if (o.backend == "loopback" && o.mode != PerfMode::local) {
    return invalid_argument("the loopback backend joins Contexts inside one process: use --local");
  }
  std::optional<std::string> listen = args.get("listen");
  std::optional<std::string> connect = args.get("connect");
  if (listen && o.mode != PerfMode::server) return invalid_argument("--listen is for --server");
  if (connect && o.mode != PerfMode::client) return invalid_argument("--connect is for --client");
  if (o.mode == PerfMode::server) {
    Result<std::string> a = with_scheme("listen", listen.value_or("127.0.0.1:0"), o.backend);
    if (!a.ok()) return a.status();
    o.listen = *a;
  }
  if (o.mode == PerfMode::client) {
    if (!connect) return invalid_argument("--client needs --connect ADDR (the address the server printed)");
    Result<std::string> a = with_scheme("connect", *connect, o.backend);
    if (!a.ok()) return a.status();
    o.connect = *a;
  }
  return Status::Ok();
}

Status parse_test_params(Args& args, PerftestOptions& o) {
  if (o.mode == PerfMode::server) {
    // The client sends the test and its parameters; the server follows.
    return reject_if_given(args,
                           {"test", "size", "iters", "warmup", "bulk", "hi-after", "outstanding", "recv-buffers"},
                           "is chosen by the client; a --server takes the test parameters from it");
  }
  const std::string test = args.get_or("test", "lat");
  if (!one_of(test, {"lat", "bw", "priority"})) {
    return invalid_argument("--test '" + test + "' is not one of lat, bw, priority");
  }
  o.test = test == "lat" ? PerfTest::lat : test == "bw" ? PerfTest::bw : PerfTest::priority;

  const std::uint64_t def_size = o.test == PerfTest::lat ? 8 : 64 << 10;
  Result<std::uint64_t> size = args.get_size("size", def_size);
  if (!size.ok()) return size.status();
  o.size = *size;
  TICTAC_RETURN_IF_ERROR(in_range("size", o.size, o.test == PerfTest::lat ? 0 : 1, kMaxPerfSize));

  const std::uint64_t def_iters = o.test == PerfTest::priority ? 1 : 1000;
  Result<std::uint64_t> iters = args.get_size("iters", def_iters);
  if (!iters.ok()) return iters.status();
  o.iters = *iters;
  TICTAC_RETURN_IF_ERROR(in_range("iters", o.iters, 1, o.test == PerfTest::priority ? 100 : kMaxPerfIters));

  if (o.test == PerfTest::priority) {
    TICTAC_RETURN_IF_ERROR(
        reject_if_given(args, {"warmup", "outstanding", "recv-buffers"}, "does not apply to --test priority"));
    Result<std::uint64_t> bulk = args.get_size("bulk", std::uint64_t{256} << 20);
    if (!bulk.ok()) return bulk.status();
    o.bulk = *bulk;
    TICTAC_RETURN_IF_ERROR(in_range("bulk", o.bulk, 1, kMaxPerfBufferBytes));
    Result<std::uint64_t> after = args.get_size("hi-after", 0);
    if (!after.ok()) return after.status();
    o.hi_after = *after;
    if (o.hi_after >= o.bulk) {
      return invalid_argument("--hi-after " + std::to_string(o.hi_after) +
                              " must be below --bulk " + std::to_string(o.bulk) +
                              " (some bulk must still be queued to pre-empt)");
    }
    return Status::Ok();
  }
  TICTAC_RETURN_IF_ERROR(reject_if_given(args, {"bulk", "hi-after"}, "is for --test priority"));
  Result<std::uint64_t> warmup = args.get_size("warmup", o.test == PerfTest::lat ? 100 : 10);
  if (!warmup.ok()) return warmup.status();
  o.warmup = *warmup;
  TICTAC_RETURN_IF_ERROR(in_range("warmup", o.warmup, 0, kMaxPerfIters));
  if (o.test == PerfTest::bw && o.warmup == 0 && o.iters < 2) {
    return invalid_argument("--test bw with --warmup 0 needs --iters >= 2 (the first message starts the clock)");
  }
  if (o.test == PerfTest::lat) {
    return reject_if_given(args, {"outstanding", "recv-buffers"},
                           "is for --test bw (ping-pong has one message in flight)");
  }
  Result<std::uint64_t> out = args.get_size("outstanding", default_outstanding(o.size));
  if (!out.ok()) return out.status();
  o.outstanding = *out;
  TICTAC_RETURN_IF_ERROR(in_range("outstanding", o.outstanding, 1, 1024));
  if (o.outstanding * o.size > kMaxPerfBufferBytes) {
    return invalid_argument("--outstanding " + std::to_string(o.outstanding) + " x --size " + std::to_string(o.size) +
                            " needs more than 4 GiB of receive buffers; lower one of them");
  }
  Result<std::uint64_t> bufs = args.get_size("recv-buffers", 0);
  if (!bufs.ok()) return bufs.status();
  o.recv_buffers = *bufs;
  TICTAC_RETURN_IF_ERROR(in_range("recv-buffers", o.recv_buffers, 0, 1024));
  return Status::Ok();
}

Status parse_config(Args& args, PerftestOptions& o) {
  Result<transport::TransportConfig> env = transport::TransportConfig::from_env();
  if (!env.ok()) return env.status();
  o.config = *env;
  // --chunk/--window: a value fixes it, "auto" tunes it (transport/chunk_tuner.h).
  const std::optional<std::string> chunk_flag = args.get("chunk");
  if (chunk_flag && *chunk_flag == "auto") {
    o.config.auto_chunk = true;
  } else if (chunk_flag) {
    Result<std::uint64_t> chunk = args.get_size("chunk", o.config.chunk_bytes);
    if (!chunk.ok()) return chunk.status();
    o.config.chunk_bytes = *chunk;
    o.config.auto_chunk = false;
  }
  const std::optional<std::string> window_flag = args.get("window");
  if (window_flag && *window_flag == "auto") {
    o.config.auto_window = true;
  } else if (window_flag) {
    Result<std::uint64_t> window = args.get_size("window", o.config.window_chunks);
    if (!window.ok()) return window.status();
    TICTAC_RETURN_IF_ERROR(in_range("window", *window, 1, 4096));
    o.config.window_chunks = static_cast<std::uint32_t>(*window);
    o.config.auto_window = false;
  }
  if (std::optional<std::string> t = args.get("timeout")) {
    Result<std::chrono::nanoseconds> d = parse_duration(*t);
    if (!d.ok()) return d.status().with_context("--timeout");
    o.config.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
    if (o.config.timeout.count() <= 0) return invalid_argument("--timeout must be positive, e.g. 30s or 500ms");
  }
  Status valid = o.config.validate();
  if (!valid.ok()) return valid.with_context("--chunk/--window/--timeout");
  return Status::Ok();
}

}  // namespace

const char* to_string(PerfTest test) {
  switch (test) {
    case PerfTest::lat:
      return "lat";
    case PerfTest::bw:
      return "bw";
    case PerfTest::priority:
      return "priority";
  }
  return "?";
}

std::uint64_t default_outstanding(std::uint64_t size) {
  const std::uint64_t by_memory = (std::uint64_t{64} << 20) / std::max<std::uint64_t>(size, 1);
  return std::clamp<std::uint64_t>(by_memory, 2, 64);
}

Result<PerftestOptions> parse_perftest_options(Args& args) {
  PerftestOptions o;
  o.backend = args.get_or("backend", "tcp");
  if (!one_of(o.backend, {"tcp", "loopback", "ucx", "verbs"})) {
    return invalid_argument("--backend '" + o.backend + "' is not one of tcp, ucx, verbs, loopback");
  }
  const std::string format = args.get_or("format", "table");
  if (!one_of(format, {"table", "json"})) return invalid_argument("--format '" + format + "' is not table or json");
  o.format = format == "json" ? PerfFormat::json : PerfFormat::table;
  TICTAC_RETURN_IF_ERROR(parse_mode(args, o));
  TICTAC_RETURN_IF_ERROR(parse_test_params(args, o));
  TICTAC_RETURN_IF_ERROR(parse_config(args, o));
  TICTAC_RETURN_IF_ERROR(args.finish());
  return o;
}

}  // namespace tictac::cli
