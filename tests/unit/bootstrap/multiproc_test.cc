// Stores shared by forked processes (gloo-style: peers as processes when failure semantics
// matter). Children report through their exit code: 0 ok, anything else names the failed step.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "tests/unit/bootstrap/store_fixture.h"

namespace tictac::bootstrap {
namespace {

using namespace std::chrono_literals;

// Forks a child that runs `body` and _exit()s with its return value (never returns to gtest).
pid_t fork_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    rc = body();
    ::_exit(rc);
  }
  return pid;
}

// The child's exit code, or 128+signal.
int wait_child(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// The rendezvous every rank runs: publish, count in, wait for all, read a neighbour, add.
int rank_body(Store& store, int rank, int world) {
  if (!store.set_string("addr/" + std::to_string(rank), "host-" + std::to_string(rank)).ok()) return 10;
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back("addr/" + std::to_string(r));
  if (!store.wait(keys, 20s).ok()) return 11;
  Result<std::string> next = store.get_string(keys[(rank + 1) % world], 20s);
  if (!next.ok() || *next != "host-" + std::to_string((rank + 1) % world)) return 12;
  for (int i = 0; i < 20; ++i) {
    if (!store.add("arrivals", 1).ok()) return 13;
  }
  return 0;
}

TEST(MultiProcess, FileStoreRendezvousAndAtomicAdd) {
  testing::TempDir dir;
  constexpr int kWorld = 4;
  std::vector<pid_t> pids;
  for (int r = 1; r < kWorld; ++r) {
    pids.push_back(fork_child([&, r] {
      auto s = FileStore::open(dir.path());
      return s.ok() ? rank_body(**s, r, kWorld) : 20;
    }));
  }
  auto store = FileStore::open(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(rank_body(**store, 0, kWorld), 0);
  for (pid_t p : pids) EXPECT_EQ(wait_child(p), 0);
  EXPECT_EQ(*(*store)->get_string("arrivals", 1s), std::to_string(20 * kWorld));
}

TEST(MultiProcess, TcpStoreRendezvousAndAtomicAdd) {
  constexpr int kWorld = 4;
  auto server = TcpStoreServer::start();
  ASSERT_TRUE(server.ok());
  const std::uint16_t port = (*server)->port();
  std::vector<pid_t> pids;
  for (int r = 1; r < kWorld; ++r) {
    pids.push_back(fork_child([&, r] {
      // Only the forking thread exists in the child; it uses its own connection.
      auto c = TcpStore::connect("127.0.0.1", port);
      return c.ok() ? rank_body(**c, r, kWorld) : 20;
    }));
  }
  auto client = TcpStore::connect("127.0.0.1", port);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(rank_body(**client, 0, kWorld), 0);
  for (pid_t p : pids) EXPECT_EQ(wait_child(p), 0);
  EXPECT_EQ(*(*client)->get_string("arrivals", 1s), std::to_string(20 * kWorld));
}

TEST(MultiProcess, TcpServerProcessDeathFailsClientsWithConnectionLost) {
  int ports[2];
  ASSERT_EQ(::pipe(ports), 0);
  const pid_t server_pid = fork_child([&] {
    ::close(ports[0]);
    auto s = TcpStoreServer::start();
    if (!s.ok()) return 1;
    const std::uint16_t port = (*s)->port();
    if (::write(ports[1], &port, sizeof(port)) != sizeof(port)) return 2;
    ::pause();  // serve until killed
    return 0;
  });
  ::close(ports[1]);
  std::uint16_t port = 0;
  ASSERT_EQ(::read(ports[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ::close(ports[0]);

  TcpStoreOptions options;
  options.io_timeout = 20s;  // the failure must come from the closed socket, not this timeout
  auto client = TcpStore::connect("127.0.0.1", port, options);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->set_string("k", "v").ok());
  Status blocked;
  std::thread waiter([&] { blocked = (*client)->wait({"never"}, 60s); });
  std::this_thread::sleep_for(20ms);
  ASSERT_EQ(::kill(server_pid, SIGKILL), 0);
  waiter.join();
  EXPECT_EQ(wait_child(server_pid), 128 + SIGKILL);
  EXPECT_EQ(blocked.code(), StatusCode::connection_lost) << blocked.to_string();
  EXPECT_NE(blocked.message().find(std::to_string(port)), std::string::npos) << blocked.message();
  EXPECT_EQ((*client)->get("k", 1s).status().code(), StatusCode::connection_lost);
}

TEST(MultiProcess, FileStoreWriterKilledMidwayLeavesReadersConsistent) {
  testing::TempDir dir;
  // A child overwrites one key with growing values until it is killed; the parent keeps reading
  // and must only ever see complete values (all bytes equal to the value's length mod 256).
  const pid_t writer = fork_child([&] {
    auto s = FileStore::open(dir.path());
    if (!s.ok()) return 1;
    for (std::size_t n = 1;; n = n % 200000 + 4099) {
      Bytes v(n, static_cast<std::uint8_t>(n % 256));
      if (!(*s)->set("blob", v).ok()) return 2;
    }
  });
  auto store = FileStore::open(dir.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->get("blob", 20s).ok());
  for (int i = 0; i < 200; ++i) {
    Result<Bytes> v = (*store)->get("blob", 1s);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    const auto expect = static_cast<std::uint8_t>(v->size() % 256);
    ASSERT_TRUE(std::all_of(v->begin(), v->end(), [&](std::uint8_t b) { return b == expect; }))
        << "torn value of " << v->size() << " bytes";
  }
  ::kill(writer, SIGKILL);
  EXPECT_EQ(wait_child(writer), 128 + SIGKILL);
  EXPECT_TRUE((*store)->add("after", 1).ok());  // the killed writer's lock was released
}

}  // namespace
}  // namespace tictac::bootstrap
