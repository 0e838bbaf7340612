// The message timeline (TICTAC_TRACE, transport/message_trace.h), on the loopback backend: every
// request, data chunk and landed frame is in the file, the file is strict JSON once the Context
// is gone, the event limit counts what it drops, and a path that cannot be created fails
// Context::create with the variable's name. (Order on the wire, read from a trace, is checked in
// tests/cli/test_trace_order.py.)
#include "transport/message_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/json.h"
#include "tests/conformance/harness.h"

namespace tictac::transport::testing {
namespace {

// A fresh directory under $TMPDIR (or /tmp), removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string t =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/tictac-trace-XXXXXX";
    path_ = mkdtemp(t.data()) != nullptr ? t : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Result<json::Value> load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(StatusCode::unavailable, "no trace file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

double num(const json::Value& e, const char* key) {
  const json::Value* v = e.find(key);
  return v != nullptr ? v->as_number() : -1;
}
std::string str(const json::Value& e, const char* key) {
  const json::Value* v = e.find(key);
  return v != nullptr ? v->as_string() : "";
}
double arg(const json::Value& e, const char* key) {
  const json::Value* a = e.find("args");
  return a != nullptr ? num(*a, key) : -1;
}

TEST(MessageTrace, TimelineHasEveryRequestChunkAndLandedFrame) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string a_path = dir.path() + "/alice.json", b_path = dir.path() + "/bob.json";
  constexpr std::size_t kBig = 200 << 10, kSmall = 8;
  {
    auto fabric = loopback::create_fabric();
    const BackendKind kind = all_backends()[0];  // loopback
    ContextSpec as{"alice"}, bs{"bob"};
    as.trace_path = a_path;
    bs.trace_path = b_path;
    auto a = make_context(kind, fabric, as);
    auto b = make_context(kind, fabric, bs);
    PeerId ab = 0, ba = 0;
    ASSERT_TRUE(a && b && connect_pair(*a, *b, "loopback://", &ab, &ba));
    Buffer big(kBig, 1, true), small(kSmall, 2, true), big_in(kBig), small_in(kSmall);
    Recorder rec;
    b->recv(ba, 5, big_in.region, 0, kBig, rec.make("big"));
    b->recv(ba, 6, small_in.region, 0, kSmall, rec.make("small"));
    a->send(ab, 5, big.region, 0, kBig, 3, rec.make("big-sent"));
    a->send(ab, 6, small.region, 0, kSmall, 0, rec.make("small-sent"));
    ASSERT_TRUE(rec.wait(4));
    for (const Completion& c : rec.all())
      EXPECT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
    a->close();
    b->close();
    a->join();
    b->join();
  }  // the Contexts are gone: both files are closed

  Result<json::Value> at = load(a_path), bt = load(b_path);
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  ASSERT_TRUE(bt.ok()) << bt.status().to_string();

  // Sender: both sends, with bytes and priority; the big one's chunks cover it exactly, each
  // chunk's interval inside its send's.
  std::map<std::string, const json::Value*> sends;
  std::map<double, double> chunk_bytes_at;  // offset -> bytes, for the big message
  std::size_t events = 0;
  const json::Value* footer = nullptr;
  for (const json::Value& e : at->items()) {
    if (str(e, "ph") != "M") ++events;
    if (str(e, "name") == "tictac_trace") footer = &e;
    if (str(e, "cat") == "send") sends[str(e, "name")] = &e;
    if (str(e, "cat") == "chunk" && arg(e, "tag") == 5) {
      EXPECT_EQ(arg(e, "priority"), 3);
      EXPECT_GE(num(e, "dur"), 0);
      chunk_bytes_at[arg(e, "offset")] = arg(e, "bytes");
    }
  }
  ASSERT_EQ(sends.count("send tag 5"), 1u);
  ASSERT_EQ(sends.count("send tag 6"), 1u);
  EXPECT_EQ(arg(*sends["send tag 5"], "bytes"), kBig);
  EXPECT_EQ(arg(*sends["send tag 5"], "priority"), 3);
  EXPECT_EQ(arg(*sends["send tag 6"], "priority"), 0);
  EXPECT_EQ(str(*sends["send tag 5"]->find("args"), "status"), "ok");
  // Posted before the send, the receive makes the big message cleared to go within the READY's
  // round trip; its first chunk cannot leave before that.
  EXPECT_GE(arg(*sends["send tag 5"], "us_before_cleared"), 0);
  EXPECT_GE(arg(*sends["send tag 5"], "us_before_first_chunk"),
            arg(*sends["send tag 5"], "us_before_cleared"));
  double covered = 0;
  for (const auto& [offset, bytes] : chunk_bytes_at) {
    EXPECT_EQ(offset, covered) << "chunks of the big message leave a gap or overlap";
    covered += bytes;
  }
  EXPECT_EQ(covered, kBig);
  EXPECT_GE(chunk_bytes_at.size(), kBig / small_config().chunk_bytes);
  ASSERT_NE(footer, nullptr);
  EXPECT_EQ(arg(*footer, "events"), events);
  EXPECT_EQ(arg(*footer, "dropped"), 0);

  // Receiver: both receives completed; the landed frames of each message add up to it.
  std::map<double, double> landed;  // tag -> bytes
  std::size_t recvs = 0;
  for (const json::Value& e : bt->items()) {
    if (str(e, "cat") == "recv" &&
        (str(e, "name") == "recv tag 5" || str(e, "name") == "recv tag 6")) {
      ++recvs;
      EXPECT_EQ(str(*e.find("args"), "status"), "ok");
    }
    if (str(e, "cat") == "landed") landed[arg(e, "tag")] += arg(e, "bytes");
  }
  EXPECT_EQ(recvs, 2u);
  EXPECT_EQ(landed[5], kBig);
  EXPECT_EQ(landed[6], kSmall);
}

TEST(MessageTrace, TheEventLimitCountsWhatItDrops) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/limited.json";
  ASSERT_EQ(setenv("TICTAC_TRACE_MAX_EVENTS", "3", 1), 0);
  {
    auto fabric = loopback::create_fabric();
    const BackendKind kind = all_backends()[0];
    ContextSpec as{"alice"};
    as.trace_path = path;
    auto a = make_context(kind, fabric, as);
    auto b = make_context(kind, fabric, {"bob"});
    PeerId ab = 0, ba = 0;
    ASSERT_TRUE(a && b && connect_pair(*a, *b, "loopback://", &ab, &ba));
    Buffer out(8, 1, true), in(8);
    for (int i = 0; i < 4; ++i) {  // 4 sends: 4 send events and 4 chunk events
      Recorder rec;
      b->recv(ba, 9, in.region, 0, 8, rec.make("in"));
      a->send(ab, 9, out.region, 0, 8, 0, rec.make("out"));
      ASSERT_TRUE(rec.wait(2));
    }
    a->close();
    b->close();
    a->join();
    b->join();
  }
  unsetenv("TICTAC_TRACE_MAX_EVENTS");
  Result<json::Value> t = load(path);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::size_t events = 0;
  const json::Value* footer = nullptr;
  for (const json::Value& e : t->items()) {
    if (str(e, "ph") != "M") ++events;
    if (str(e, "name") == "tictac_trace") footer = &e;
  }
  EXPECT_EQ(events, 3u);
  ASSERT_NE(footer, nullptr);
  EXPECT_EQ(arg(*footer, "events"), 3);
  EXPECT_GE(arg(*footer, "dropped"), 5);  // at least the other 5 of the 8
}

TEST(MessageTrace, AFileThatCannotBeCreatedFailsCreateNamingTheVariable) {
  ContextOptions o;
  o.name = "alice";
  o.trace_path = "/nonexistent-tictac-dir/t.json";
  o.backends.push_back(all_backends()[0].make(loopback::create_fabric()));
  Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(ctx.status().message().find("TICTAC_TRACE"), std::string::npos)
      << ctx.status().to_string();
  EXPECT_NE(ctx.status().message().find("/nonexistent-tictac-dir/t.json"), std::string::npos);
}

TEST(MessageTrace, PathPatternNamesTheProcessAndTheContext) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string pattern = dir.path() + "/t-%p-%c.json";
  std::vector<std::unique_ptr<Context>> ctxs;
  auto fabric = loopback::create_fabric();
  for (const char* name : {"one", "two"}) {
    ContextSpec s{name};
    s.trace_path = pattern;
    ctxs.push_back(make_context(all_backends()[0], fabric, s));
    ASSERT_NE(ctxs.back(), nullptr);
  }
  for (auto& c : ctxs) {
    c->close();
    c->join();
  }
  ctxs.clear();
  std::size_t files = 0;
  const std::string prefix = "t-" + std::to_string(getpid()) + "-";
  FILE* ls = popen(("ls '" + dir.path() + "'").c_str(), "r");
  ASSERT_NE(ls, nullptr);
  char line[512];
  while (std::fgets(line, sizeof line, ls) != nullptr) {
    files += std::string(line).rfind(prefix, 0) == 0 ? 1 : 0;
  }
  pclose(ls);
  EXPECT_EQ(files, 2u) << "one file per Context, named by pid and Context number";
}

TEST(MessageTrace, OffByDefault) {
  Result<std::unique_ptr<MessageTrace>> t =
      MessageTrace::open(std::string(), "x", TransportConfig::defaults());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, nullptr);
}

}  // namespace
}  // namespace tictac::transport::testing
