// `tictac perftest`: the transport's microbenchmark, like ucx_perftest / ib_write_bw.
//   --server [--listen ADDR]      prints "tictac perftest server: listening on <addr>", serves one client
//   --client --connect ADDR       runs the test against a server and prints the figures
//   --local                       both in one command: tcp = a forked server process and a forked
//                                 client process on 127.0.0.1 that exchange the address through a
//                                 bootstrap FileStore in a temporary directory; loopback = two
//                                 Contexts in this process
// Tests, figures and the exact definitions: docs/benchmarks.md. Exit codes: 0 ok, 1 the run
// failed (a backend that is not viable, a peer that died: the transport's error is printed),
// 2 bad flags.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/perftest_options.h"
#include "cli/perftest_runner.h"
#include "transport/bootstrap/file_store.h"
#include "transport/bootstrap/in_memory_store.h"
#include "integration/group/backend_registry.h"
#include "transport/loopback/factory.h"

namespace tictac::cli {
namespace {

using perftest::BackendMaker;
using perftest::Report;

constexpr char kAddrKey[] = "perftest/server-address";
constexpr char kServerFailed = '!';  // an address value starting with it carries the server's error

// A run failure: printed, exit 1 (even for invalid_argument coming back from the transport).
int fail(const char* who, const Status& s) {
  std::fprintf(stderr, "tictac perftest%s: %s\n", who, s.to_string().c_str());
  return kExitFailure;
}

Result<BackendMaker> backend_maker(const std::string& name) {
  BackendMaker make;
  if (name == "loopback") {  // not in the registry: its fabric is per process
    std::shared_ptr<transport::loopback::Fabric> fabric = transport::loopback::create_fabric();
    make = [fabric] { return transport::loopback::create(fabric); };
  } else if (const group::BackendEntry* e = group::find_backend(name); e != nullptr && e->create) {
    make = e->create;
  } else if (e != nullptr) {
    return Status(StatusCode::unavailable, name + " not viable: not built (" + e->missing + ")");
  } else {
    return Status(StatusCode::unavailable, name + " not viable: not built (this build has no " + name + " backend)");
  }
  const transport::Viability v = make()->viability();
  if (!v.viable) {
    const std::string prefix = name + " not viable";
    return Status(StatusCode::unavailable, v.reason.rfind(prefix, 0) == 0 ? v.reason : prefix + ": " + v.reason);
  }
  return make;
}

int print_report(const PerftestOptions& o, const Result<Report>& r, const char* who) {
  if (!r.ok()) return fail(who, r.status());
  r->print(o.format, stdout);
  std::fflush(stdout);
  return kExitOk;
}

int run_server_mode(const PerftestOptions& o, const BackendMaker& make) {
  Status s = perftest::run_server(o, make, o.listen, [](const std::string& addr) {
    std::printf("tictac perftest server: listening on %s\n", addr.c_str());
    std::fflush(stdout);
    return Status::Ok();
  });
  return s.ok() ? kExitOk : fail(" (server)", s);
}

// Runs the server role and publishes its address, or its failure, under kAddrKey.
int serve_and_publish(const PerftestOptions& o, const BackendMaker& make, const std::string& listen,
                      bootstrap::Store& store) {
  bool published = false;
  Status s = perftest::run_server(o, make, listen, [&](const std::string& addr) {
    published = true;
    return store.set_string(kAddrKey, addr);
  });
  if (s.ok()) return kExitOk;
  if (!published) {
    std::string value(1, kServerFailed);
    value += s.to_string();
    (void)store.set_string(kAddrKey, value);
  }
  return fail(" (server)", s);
}

int client_from_store(const PerftestOptions& o, const BackendMaker& make, bootstrap::Store& store) {
  Result<std::string> addr = store.get_string(kAddrKey, o.config.timeout);
  if (!addr.ok()) return fail(" (client)", addr.status().with_context("waiting for the server's address"));
  if (!addr->empty() && (*addr)[0] == kServerFailed) {
    return fail(" (client)", Status(StatusCode::unavailable, "the server did not start: " + addr->substr(1)));
  }
  return print_report(o, perftest::run_client(o, make, *addr), " (client)");
}

int run_local_threads(const PerftestOptions& o, const BackendMaker& make, const std::string& listen) {
  bootstrap::InMemoryStore store;
  int server_code = kExitFailure;
  std::thread server([&] { server_code = serve_and_publish(o, make, listen, store); });
  const int client_code = client_from_store(o, make, store);
  server.join();
  return client_code != kExitOk ? client_code : server_code;
}

// Exit code of a reaped child; a signal is a failure that we name.
int child_code(const char* who, int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "tictac perftest: the %s process was killed by signal %d\n", who, WTERMSIG(status));
  }
  return kExitFailure;
}

// Forks the server and the client; each ends with _exit so nothing of this process's state is run
// twice. After the first child exits, the other gets the transport's timeout plus a margin to
// notice (a peer's death is reported as connection_lost by the transport) before it is killed.
int run_local_processes(const PerftestOptions& o, const BackendMaker& make) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  std::string dir = (ec ? std::filesystem::path("/tmp") : base).string() + "/tictac-perftest-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return fail("", errno_status(StatusCode::unavailable, "cannot create a temporary directory " + dir, "mkdtemp", errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  auto child = [&](bool is_server) -> pid_t {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    int code = kExitFailure;
    Result<std::unique_ptr<bootstrap::FileStore>> store = bootstrap::FileStore::open(dir);
    if (!store.ok()) {
      code = fail(is_server ? " (server)" : " (client)", store.status());
    } else if (is_server) {
      code = serve_and_publish(o, make, "tcp://127.0.0.1:0", **store);
    } else {
      code = client_from_store(o, make, **store);
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
  };
  const pid_t server = child(true);
  const pid_t client = server < 0 ? -1 : child(false);
  if (server < 0 || client < 0) {
    const int err = errno;
    if (server > 0) {
      kill(server, SIGKILL);
      waitpid(server, nullptr, 0);
    }
    std::filesystem::remove_all(dir, ec);
    return fail("", errno_status(StatusCode::unavailable, "cannot start the local peers", "fork", err));
  }

  int status = 0;
  pid_t first = -1;
  while ((first = waitpid(-1, &status, 0)) < 0 && errno == EINTR) {
  }
  const bool server_first = first == server;
  const int first_code = child_code(server_first ? "server" : "client", status);
  const pid_t other = server_first ? client : server;
  const std::chrono::milliseconds grace = o.config.timeout + std::chrono::seconds(5);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int other_status = 0;
  pid_t got = 0;
  while ((got = waitpid(other, &other_status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int other_code = kExitFailure;
  if (got == other) {
    other_code = child_code(server_first ? "client" : "server", other_status);
  } else {
    std::fprintf(stderr, "tictac perftest: the %s process did not finish within %lld ms of its peer; killing it\n",
                 server_first ? "client" : "server", static_cast<long long>(grace.count()));
    kill(other, SIGKILL);
    waitpid(other, nullptr, 0);
  }
  std::filesystem::remove_all(dir, ec);
  const int client_code = server_first ? other_code : first_code;
  const int server_code = server_first ? first_code : other_code;
  return client_code != kExitOk ? client_code : server_code;
}

}  // namespace

int run_perftest(Args& args) {
  Result<PerftestOptions> o = parse_perftest_options(args);
  if (!o.ok()) return report("perftest", o.status());
  Result<BackendMaker> make = backend_maker(o->backend);
  if (!make.ok()) return fail("", make.status());
  switch (o->mode) {
    case PerfMode::server:
      return run_server_mode(*o, *make);
    case PerfMode::client:
      return print_report(*o, perftest::run_client(*o, *make, o->connect), "");
    case PerfMode::local:
      if (o->backend == "loopback") return run_local_threads(*o, *make, "loopback://");
      if (o->backend == "tcp") return run_local_processes(*o, *make);
      return run_local_threads(*o, *make, o->backend + "://127.0.0.1:0");
  }
  return kExitFailure;
}

}  // namespace tictac::cli
