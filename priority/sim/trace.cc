#include "priority/sim/trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "priority/sim/json_writer.h"

namespace tictac::priority::sim {
namespace {

// Process ids: workers are 1..W, PSs are 1001..1000+K; thread ids per track.
int pid_of(Track t, int index) {
  const bool ps = t == Track::ps_up || t == Track::ps_down || t == Track::ps_update;
  return ps ? 1001 + index : 1 + index;
}
int tid_of(Track t) {
  switch (t) {
    case Track::worker_down: return 1;
    case Track::worker_up: return 2;
    case Track::worker_compute: return 3;
    case Track::ps_up: return 1;
    case Track::ps_down: return 2;
    case Track::ps_update: return 3;
  }
  return 0;
}

void meta(JsonWriter& j, const char* what, int pid, int tid, const std::string& name) {
  j.begin_object().key("ph").value("M").key("name").value(what).key("pid").value(pid);
  if (tid > 0) j.key("tid").value(tid);
  j.key("args").begin_object().key("name").value(name).end_object().end_object().newline();
}

}  // namespace

std::string chrome_trace_json(const SimResult& result, const SimConfig& config) {
  JsonWriter j;
  j.begin_object().key("displayTimeUnit").value("ms").key("traceEvents").begin_array().newline();
  for (int w = 0; w < config.workers; ++w) {
    meta(j, "process_name", pid_of(Track::worker_down, w), 0, "worker " + std::to_string(w));
    for (Track t : {Track::worker_down, Track::worker_up, Track::worker_compute}) {
      meta(j, "thread_name", pid_of(t, w), tid_of(t), std::string(to_string(t)));
    }
  }
  for (int k = 0; k < config.ps; ++k) {
    meta(j, "process_name", pid_of(Track::ps_up, k), 0, "ps " + std::to_string(k));
    for (Track t : {Track::ps_up, Track::ps_down, Track::ps_update}) {
      meta(j, "thread_name", pid_of(t, k), tid_of(t), std::string(to_string(t)));
    }
  }
  for (const TimelineEvent& e : result.timeline) {
    const double offset = e.iteration < static_cast<int>(result.iterations.size())
                              ? result.iterations[e.iteration].start_offset
                              : 0.0;
    j.begin_object()
        .key("ph").value("X")
        .key("name").value(e.name)
        .key("pid").value(pid_of(e.track, e.index))
        .key("tid").value(tid_of(e.track))
        .key("ts").value((offset + e.start) * 1e6)
        .key("dur").value((e.end - e.start) * 1e6)
        .key("args").begin_object().key("iteration").value(e.iteration).end_object()
        .end_object()
        .newline();
  }
  j.end_array().end_object();
  return j.str() + "\n";
}

Status write_chrome_trace(const SimResult& result, const SimConfig& config, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return invalid_argument("cannot open trace file '" + path + "' for writing: " + std::strerror(errno) +
                            "; pass a writable path to --trace");
  }
  out << chrome_trace_json(result, config);
  out.close();
  if (!out) return invalid_argument("writing trace file '" + path + "' failed (disk full?)");
  return Status::Ok();
}

}  // namespace tictac::priority::sim
