#include "transport/message_trace.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "common/log.h"
#include "common/tunables.h"
#include "transport/request.h"

namespace tictac::transport {
namespace {

const StringTunable kTrace{"TICTAC_TRACE", "",
                           "write a timeline of every Context's requests, chunks and landed "
                           "frames to this file as Chrome trace-event JSON (Perfetto, "
                           "chrome://tracing); %p = process id, %c = the Context's number in "
                           "the process. Empty = off (docs/trace.md)"};
const IntTunable kTraceMaxEvents{"TICTAC_TRACE_MAX_EVENTS", 1'000'000,
                                 "events written per trace file at most; later ones are counted, "
                                 "not written"};

std::atomic<int> g_contexts{0};  // Contexts of this process that opened a trace
std::mutex g_paths_mutex;
std::set<std::string> g_paths;  // trace files this process has opened

// `path`, or `path.<k>` with the smallest k >= 1 that this process has not opened yet.
std::string unused_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_paths_mutex);
  std::string out = path;
  for (int k = 1; g_paths.count(out) != 0; ++k) {
    out = path;
    out.push_back('.');
    out.append(std::to_string(k));
  }
  g_paths.insert(out);
  return out;
}

// The path with %p and %c replaced.
std::string expand(const std::string& pattern, long pid, int number) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() &&
        (pattern[i + 1] == 'p' || pattern[i + 1] == 'c')) {
      out.append(std::to_string(pattern[i + 1] == 'p' ? pid : number));
      ++i;
    } else {
      out.push_back(pattern[i]);
    }
  }
  return out;
}

// JSON string body: quotes, backslashes and control characters escaped.
std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out.append(buf);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

std::int64_t trace_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Result<std::unique_ptr<MessageTrace>> MessageTrace::open(const std::optional<std::string>& path,
                                                         const std::string& context_name,
                                                         const TransportConfig& config) {
  std::string pattern;
  if (path) {
    pattern = *path;
  } else {
    Result<std::string> env = kTrace.get();
    TICTAC_RETURN_IF_ERROR(env);
    pattern = *env;
  }
  if (pattern.empty()) return std::unique_ptr<MessageTrace>();
  Result<std::int64_t> max_events = kTraceMaxEvents.get();
  TICTAC_RETURN_IF_ERROR(max_events);
  if (*max_events < 0) {
    return invalid_argument("TICTAC_TRACE_MAX_EVENTS=" + std::to_string(*max_events) +
                            " is negative (0 writes no events, only the drop count)");
  }
  const long pid = static_cast<long>(getpid());
  const std::string file_path = unused_path(expand(pattern, pid, g_contexts.fetch_add(1)));
  std::FILE* f = std::fopen(file_path.c_str(), "w");
  if (f == nullptr) {
    const int err = errno;
    return invalid_argument("TICTAC_TRACE: cannot create the trace file '" + file_path +
                            "': " + std::strerror(err) +
                            " (point it at a writable directory, or unset it to trace nothing)");
  }
  std::unique_ptr<MessageTrace> t(
      new MessageTrace(f, file_path, static_cast<std::uint64_t>(*max_events)));
  std::fprintf(f,
               "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,\"args\":{"
               "\"name\":\"tictac %s (pid %ld)\"}},\n",
               pid, json_escape(context_name).c_str(), pid);
  const std::string chunk = config.auto_chunk ? "\"auto\"" : std::to_string(config.chunk_bytes);
  const std::string window = config.auto_window ? "\"auto\"" : std::to_string(config.window_chunks);
  std::fprintf(f,
               "{\"name\":\"tictac_config\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,\"args\":{\"enforce_"
               "priority\":%s,"
               "\"chunk_bytes\":%s,\"window\":%s,\"eager_bytes\":%llu}},\n",
               pid, config.enforce_priority ? "true" : "false", chunk.c_str(), window.c_str(),
               static_cast<unsigned long long>(config.eager_bytes));
  return t;
}

MessageTrace::MessageTrace(std::FILE* file, std::string path, std::uint64_t max_events)
    : file_(file),
      path_(std::move(path)),
      max_events_(max_events),
      pid_(static_cast<long>(getpid())) {}

MessageTrace::~MessageTrace() {
  std::fprintf(
      file_,
      "{\"name\":\"tictac_trace\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,\"args\":{\"events\":%llu,"
      "\"dropped\":%llu}}\n]\n",
      pid_, static_cast<unsigned long long>(written_), static_cast<unsigned long long>(dropped_));
  const bool failed = std::ferror(file_) != 0;
  if (std::fclose(file_) != 0 || failed) {
    TICTAC_LOG(warn) << "TICTAC_TRACE: writing " << path_
                     << " failed (disk full or the file removed?): the trace is incomplete";
  }
}

bool MessageTrace::begin_event() {
  if (written_ >= max_events_) {
    ++dropped_;
    return false;
  }
  ++written_;
  return true;
}

long MessageTrace::lane(PeerId peer, int kind) {
  const long id = static_cast<long>(peer) * 10 + kind;
  if (named_lanes_.insert(id).second) {
    static const char* const kNames[] = {"", "send -> peer", "wire -> peer", "recv <- peer",
                                         "landed <- peer"};
    std::fprintf(file_,
                 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"args\":{"
                 "\"name\":\"%s %llu\"}},\n",
                 pid_, id, kNames[kind], static_cast<unsigned long long>(peer));
    std::fprintf(file_,
                 "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"args\":{"
                 "\"sort_index\":%ld}},\n",
                 pid_, id, id);
  }
  return id;
}

void MessageTrace::request(const Request& req, const Status& status, std::uint64_t bytes,
                           PeerId source) {
  const std::int64_t submitted = req.trace_submit_ns();
  if (submitted == 0 || !begin_event()) return;  // submitted before the trace, or over the limit
  const std::int64_t now = trace_clock_ns();
  const bool send = req.kind() == RequestKind::send;
  const PeerId peer = req.peer() != kAnyPeer ? req.peer() : source;
  const std::int64_t posted = req.trace_posted_ns();
  char extra[160];
  if (send) {
    const std::int64_t cleared = req.trace_cleared_ns();
    std::snprintf(extra, sizeof extra,
                  "\"priority\":%lld,\"us_before_cleared\":%.3f,\"us_before_first_chunk\":%.3f",
                  static_cast<long long>(req.priority()),
                  cleared != 0 ? us(cleared - submitted) : -1.0,
                  posted != 0 ? us(posted - submitted) : -1.0);
  } else {
    std::snprintf(extra, sizeof extra, "\"us_before_bound\":%.3f",
                  posted != 0 ? us(posted - submitted) : -1.0);
  }
  std::fprintf(
      file_,
      "{\"name\":\"%s tag %llu\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%ld,\"tid\":%ld,\"ts\":%.3f,"
      "\"dur\":%.3f,\"args\":{\"request\":%llu,\"bytes\":%llu,\"status\":\"%s\",%s}},\n",
      send ? "send" : "recv", static_cast<unsigned long long>(req.tag()), send ? "send" : "recv",
      pid_, lane(peer, send ? 1 : 3), us(submitted), us(now - submitted),
      static_cast<unsigned long long>(req.id()),
      static_cast<unsigned long long>(send ? req.length() : bytes),
      std::string(to_string(status.code())).c_str(), extra);
}

void MessageTrace::chunk(PeerId peer, Tag tag, Priority priority, std::uint64_t msg_id,
                         std::uint64_t offset, std::uint64_t bytes, std::int64_t posted_ns) {
  if (!begin_event()) return;
  const std::int64_t now = trace_clock_ns();
  std::fprintf(file_,
               "{\"name\":\"p%lld msg "
               "%llu\",\"cat\":\"chunk\",\"ph\":\"X\",\"pid\":%ld,\"tid\":%ld,\"ts\":%.3f,"
               "\"dur\":%.3f,\"args\":{\"tag\":%llu,\"msg\":%llu,\"offset\":%llu,\"bytes\":%llu,"
               "\"priority\":%lld}},\n",
               static_cast<long long>(priority), static_cast<unsigned long long>(msg_id), pid_,
               lane(peer, 2), us(posted_ns), us(now - posted_ns),
               static_cast<unsigned long long>(tag), static_cast<unsigned long long>(msg_id),
               static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes),
               static_cast<long long>(priority));
}

void MessageTrace::landed(PeerId peer, const wire::Header& h) {
  if (!begin_event()) return;
  // An ANNOUNCE that carries its data is the whole message (its offset field is not an offset).
  const std::uint64_t offset = h.type == wire::FrameType::data ? h.offset : 0;
  std::fprintf(
      file_,
      "{\"name\":\"p%lld msg "
      "%llu\",\"cat\":\"landed\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%ld,\"tid\":%ld,"
      "\"ts\":%.3f,\"args\":{\"tag\":%llu,\"msg\":%llu,\"offset\":%llu,\"bytes\":%u,\"total\":%llu,"
      "\"priority\":%lld}},\n",
      static_cast<long long>(h.priority), static_cast<unsigned long long>(h.msg_id), pid_,
      lane(peer, 4), us(trace_clock_ns()), static_cast<unsigned long long>(h.tag),
      static_cast<unsigned long long>(h.msg_id), static_cast<unsigned long long>(offset), h.length,
      static_cast<unsigned long long>(h.total), static_cast<long long>(h.priority));
}

}  // namespace tictac::transport
