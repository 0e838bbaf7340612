#include "priority/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <string>

#include "priority/sim/event_queue.h"
#include "common/random.h"
#include "priority/sim/sizing.h"

namespace tictac::priority::sim {
namespace {

// Seed streams (third component of derive_seed).
constexpr std::uint64_t kJitterStream = 1;
constexpr std::uint64_t kShuffleStream = 2;
constexpr double kMaxChunksPerIteration = 5e7;

// A pending transfer in one (sender, receiver) queue: the parameter's priority at the worker
// involved, then the recv index. Chunks of one recv leave in chunk order.
struct Pending {
  std::int64_t priority;
  int recv;
};
struct PendingAfter {
  bool operator()(const Pending& a, const Pending& b) const {
    return a.priority != b.priority ? a.priority > b.priority : a.recv > b.recv;
  }
};
using PendingQueue = std::priority_queue<Pending, std::vector<Pending>, PendingAfter>;

enum class EventKind : std::uint8_t { link_free, arrive, compute_done, update_done };

struct Event {
  EventKind kind;
  bool pull = true;  // link_free/arrive: which direction
  int sender = 0;
  int receiver = 0;
  int worker = 0;    // arrive, compute_done
  int id = 0;        // arrive: recv index; compute_done: node; update_done: recv index
};

// One direction of traffic: pulls (senders = PSs, receivers = workers) or pushes (senders =
// workers, receivers = PSs). Every transfer involves exactly one worker and one parameter.
struct Direction {
  bool pull = true;
  int senders = 0;
  int receivers = 0;
  std::vector<double> send_rate, recv_rate;
  std::vector<char> send_busy, recv_busy;
  std::vector<int> inflight;
  std::vector<int> last_receiver;  // round-robin among receivers with equal head priority
  int last_sender = -1;            // round-robin among senders with equal candidates
  std::vector<PendingQueue> queues;  // senders x receivers
  std::vector<int> next_chunk;       // workers x recvs
  std::vector<int> arrived;          // workers x recvs

  void reset(int s, int r, int workers, int recvs) {
    senders = s;
    receivers = r;
    send_busy.assign(s, 0);
    recv_busy.assign(r, 0);
    inflight.assign(s, 0);
    last_receiver.assign(s, -1);
    last_sender = -1;
    queues.assign(static_cast<std::size_t>(s) * r, PendingQueue());
    next_chunk.assign(static_cast<std::size_t>(workers) * recvs, 0);
    arrived.assign(static_cast<std::size_t>(workers) * recvs, 0);
  }
  PendingQueue& queue(int s, int r) { return queues[static_cast<std::size_t>(s) * receivers + r]; }
};

class Simulation {
 public:
  Simulation(const Graph& graph, const Schedule& schedule, const SimConfig& config)
      : g_(graph), schedule_(schedule), cfg_(config), rates_(link_rates(config)) {
    n_ = static_cast<int>(g_.size());
    R_ = static_cast<int>(g_.recvs().size());
    W_ = cfg_.workers;
    K_ = cfg_.ps;
    training_ = cfg_.mode == SimMode::training;
    bytes_ = recv_sizes(g_, cfg_);
    shard_ = shard_by_bytes(bytes_, K_);
    chunks_of_.resize(R_);
    for (int r = 0; r < R_; ++r) {
      chunks_of_[r] = cfg_.chunk_bytes == 0
                          ? 1
                          : std::max<int>(1, static_cast<int>(std::ceil(bytes_[r] / static_cast<double>(cfg_.chunk_bytes))));
    }
    pull_.pull = true;
    pull_.send_rate = rates_.ps_up;
    pull_.recv_rate = rates_.worker_down;
    push_.pull = false;
    push_.send_rate = rates_.worker_up;
    push_.recv_rate = rates_.ps_down;
    // Static dependency counts.
    fwd_inputs_.resize(n_);
    bwd_deps_.assign(n_, 0);
    grad_deps_.assign(R_, 0);
    for (int op = 0; op < n_; ++op) {
      fwd_inputs_[op] = static_cast<int>(g_.op(op).inputs.size());
      if (g_.is_recv(op)) continue;
      int deps = 1;  // the forward op itself
      for (OpId c : g_.consumers(op)) deps += g_.is_recv(c) ? 0 : 1;
      bwd_deps_[op] = deps;
      for (OpId in : g_.op(op).inputs) {
        if (g_.is_recv(in)) ++grad_deps_[g_.recv_index(in)];
      }
    }
  }

  SimResult run(const ProgressFn& progress) {
    SimResult result;
    result.shard = shard_;
    result.recv_bytes = bytes_;
    double offset = 0;
    for (int it = 0; it < cfg_.iterations; ++it) {
      IterationResult ir = run_iteration(it, result);
      ir.start_offset = offset;
      offset += ir.time;
      result.iterations.push_back(std::move(ir));
      if (progress) progress(it + 1, cfg_.iterations);
    }
    summarise(result);
    return result;
  }

 private:
  // ---- per-iteration state ----
  void reset_iteration(int it) {
    queue_.clear();
    now_ = 0;
    pull_.reset(K_, W_, W_, R_);
    push_.reset(W_, K_, W_, R_);
    remaining_.assign(static_cast<std::size_t>(W_) * n_, 0);
    bwd_remaining_.assign(static_cast<std::size_t>(W_) * n_, 0);
    grad_remaining_.assign(static_cast<std::size_t>(W_) * R_, 0);
    for (int w = 0; w < W_; ++w) {
      std::copy(fwd_inputs_.begin(), fwd_inputs_.end(), remaining_.begin() + static_cast<std::ptrdiff_t>(w) * n_);
      std::copy(bwd_deps_.begin(), bwd_deps_.end(), bwd_remaining_.begin() + static_cast<std::ptrdiff_t>(w) * n_);
      std::copy(grad_deps_.begin(), grad_deps_.end(), grad_remaining_.begin() + static_cast<std::ptrdiff_t>(w) * R_);
    }
    grads_in_.assign(R_, 0);
    compute_busy_.assign(W_, 0);
    ready_.assign(W_, ReadyQueue());
    update_busy_.assign(K_, 0);
    updates_.assign(K_, ReadyQueue());
    comm_.assign(W_, {});
    compute_.assign(W_, {});
    last_event_ = 0;
    jitter_rng_.emplace(derive_seed(cfg_.seed, static_cast<std::uint64_t>(it), 0, kJitterStream));
    // Priorities per worker.
    priority_.assign(W_, std::vector<std::int64_t>());
    for (int w = 0; w < W_; ++w) {
      if (cfg_.shuffle_each_iteration) {
        Rng rng(derive_seed(cfg_.seed, static_cast<std::uint64_t>(it), static_cast<std::uint64_t>(w), kShuffleStream));
        const std::vector<int> order = rng.permutation(R_);
        priority_[w].assign(R_, 0);
        for (int pos = 0; pos < R_; ++pos) priority_[w][order[pos]] = pos;
      } else {
        priority_[w] = schedule_.priority;
      }
    }
  }

  IterationResult run_iteration(int it, SimResult& result) {
    reset_iteration(it);
    iteration_ = it;
    timeline_ = cfg_.record_timeline ? &result.timeline : nullptr;
    for (int w = 0; w < W_; ++w) {
      for (int op = 0; op < n_; ++op) {
        if (fwd_inputs_[op] == 0) became_ready(w, op);
      }
    }
    advance();
    while (!queue_.empty()) {
      now_ = queue_.next_time();
      while (!queue_.empty() && queue_.next_time() == now_) handle(queue_.pop());
      last_event_ = now_;
      advance();
    }
    result.chunks += chunks_sent_;
    chunks_sent_ = 0;
    IterationResult ir;
    ir.time = last_event_;
    std::vector<double> times;
    for (int w = 0; w < W_; ++w) {
      WorkerIteration wi;
      wi.metrics = overlap_metrics(comm_[w], compute_[w]);
      for (const auto* list : {&comm_[w], &compute_[w]}) {
        for (const Interval& iv : *list) wi.time = std::max(wi.time, iv.end);
      }
      times.push_back(wi.time);
      ir.workers.push_back(wi);
    }
    ir.straggler = straggler_spread(times);
    return ir;
  }

  // Start whatever can start at now_: transfers in both directions, compute, updates.
  void advance() {
    dispatch(pull_);
    if (training_) dispatch(push_);
    for (int w = 0; w < W_; ++w) start_compute(w);
    for (int k = 0; k < K_; ++k) start_update(k);
  }

  // ---- graph progress on a worker ----
  // Node ids: forward ops are OpIds, backward ops are n + OpId.
  void became_ready(int w, int op) {
    if (g_.is_recv(op)) {
      const int r = g_.recv_index(op);
      pull_.queue(shard_[r], w).push(Pending{priority_[w][r], r});
    } else {
      ready_[w].push(Ready{now_, op});
    }
  }

  void node_done(int w, int op) {
    for (OpId c : g_.consumers(op)) {
      if (--remaining_[idx(w, static_cast<int>(c))] == 0) became_ready(w, static_cast<int>(c));
    }
    if (training_ && !g_.is_recv(op)) bwd_dep_done(w, op);
  }

  void bwd_dep_done(int w, int op) {
    if (--bwd_remaining_[idx(w, op)] == 0) ready_[w].push(Ready{now_, n_ + op});
  }

  void backward_done(int w, int op) {
    for (OpId in : g_.op(op).inputs) {
      if (!g_.is_recv(in)) {
        bwd_dep_done(w, static_cast<int>(in));
        continue;
      }
      const int r = g_.recv_index(in);
      if (--grad_remaining_[static_cast<std::size_t>(w) * R_ + r] == 0) {
        push_.queue(w, shard_[r]).push(Pending{priority_[w][r], r});
      }
    }
  }

  void start_compute(int w) {
    if (compute_busy_[w] || ready_[w].empty()) return;
    const Ready next = ready_[w].top();
    ready_[w].pop();
    const bool backward = next.node >= n_;
    const int op = backward ? next.node - n_ : next.node;
    const double t = g_.op(op).time.value_or(0) * (backward ? cfg_.backward_factor : 1.0);
    compute_busy_[w] = 1;
    compute_[w].push_back(Interval{now_, now_ + t});
    record(Track::worker_compute, w, now_, now_ + t, backward ? g_.op(op).name + " (backward)" : g_.op(op).name);
    queue_.push(now_ + t, Event{EventKind::compute_done, true, 0, 0, w, next.node});
  }

  void start_update(int k) {
    if (update_busy_[k] || updates_[k].empty()) return;
    const Ready next = updates_[k].top();
    updates_[k].pop();
    const double t = cfg_.update_time_per_byte * bytes_[next.node];
    update_busy_[k] = 1;
    record(Track::ps_update, k, now_, now_ + t, g_.op(g_.recvs()[next.node]).name + " (update)");
    queue_.push(now_ + t, Event{EventKind::update_done, true, k, 0, 0, next.node});
  }

  // ---- the network ----
  void dispatch(Direction& d) {
    for (;;) {
      int best_s = -1;
      int best_r = -1;
      Pending best{0, 0};
      for (int i = 1; i <= d.senders; ++i) {
        const int s = (d.last_sender + i + d.senders) % d.senders;
        if (d.send_busy[s] || d.inflight[s] >= cfg_.window) continue;
        int cand = -1;
        for (int j = 1; j <= d.receivers; ++j) {
          const int r = (d.last_receiver[s] + j + d.receivers) % d.receivers;
          if (d.recv_busy[r]) continue;
          PendingQueue& q = d.queue(s, r);
          if (q.empty()) continue;
          if (cand < 0 || q.top().priority < d.queue(s, cand).top().priority) cand = r;
        }
        if (cand < 0) continue;
        const Pending head = d.queue(s, cand).top();
        if (best_s < 0 || PendingAfter()(best, head)) {
          best_s = s;
          best_r = cand;
          best = head;
        }
      }
      if (best_s < 0) return;
      start_chunk(d, best_s, best_r);
    }
  }

  void start_chunk(Direction& d, int s, int r) {
    PendingQueue& q = d.queue(s, r);
    const int recv = q.top().recv;
    const int worker = d.pull ? r : s;
    const std::size_t item = static_cast<std::size_t>(worker) * R_ + recv;
    const int chunk = d.next_chunk[item]++;
    if (d.next_chunk[item] == chunks_of_[recv]) q.pop();
    double size = bytes_[recv];
    if (cfg_.chunk_bytes > 0) {
      const double chunk_size = static_cast<double>(cfg_.chunk_bytes);
      size = std::min(chunk_size, bytes_[recv] - chunk * chunk_size);
    }
    double duration = size * 8 / std::min(d.send_rate[s], d.recv_rate[r]);
    if (cfg_.jitter > 0) duration *= jitter_rng_->uniform(1 - cfg_.jitter, 1 + cfg_.jitter);
    const double end = now_ + duration;
    const double arrival = end + cfg_.latency_s;
    d.send_busy[s] = 1;
    d.recv_busy[r] = 1;
    ++d.inflight[s];
    ++chunks_sent_;
    d.last_sender = s;
    d.last_receiver[s] = r;
    comm_[worker].push_back(Interval{now_, arrival});
    if (timeline_ != nullptr) {
      std::string name = g_.op(g_.recvs()[recv]).name;
      if (chunks_of_[recv] > 1) {
        name += " [chunk " + std::to_string(chunk + 1) + "/" + std::to_string(chunks_of_[recv]) + "]";
      }
      const int ps = d.pull ? s : r;
      record(d.pull ? Track::ps_up : Track::worker_up, d.pull ? ps : worker, now_, end, name);
      record(d.pull ? Track::worker_down : Track::ps_down, d.pull ? worker : ps, now_, end, name);
    }
    queue_.push(end, Event{EventKind::link_free, d.pull, s, r, worker, recv});
    queue_.push(arrival, Event{EventKind::arrive, d.pull, s, r, worker, recv});
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case EventKind::link_free: {
        Direction& d = e.pull ? pull_ : push_;
        d.send_busy[e.sender] = 0;
        d.recv_busy[e.receiver] = 0;
        break;
      }
      case EventKind::arrive: {
        Direction& d = e.pull ? pull_ : push_;
        --d.inflight[e.sender];
        const std::size_t item = static_cast<std::size_t>(e.worker) * R_ + e.id;
        if (++d.arrived[item] < chunks_of_[e.id]) break;
        if (e.pull) {
          node_done(e.worker, static_cast<int>(g_.recvs()[e.id]));
        } else if (++grads_in_[e.id] == W_) {
          updates_[shard_[e.id]].push(Ready{now_, e.id});
        }
        break;
      }
      case EventKind::compute_done:
        compute_busy_[e.worker] = 0;
        if (e.id >= n_) {
          backward_done(e.worker, e.id - n_);
        } else {
          node_done(e.worker, e.id);
        }
        break;
      case EventKind::update_done:
        update_busy_[e.sender] = 0;
        break;
    }
  }

  void record(Track track, int index, double start, double end, std::string name) {
    if (timeline_ == nullptr) return;
    timeline_->push_back(TimelineEvent{track, index, iteration_, start, end, std::move(name)});
  }

  std::size_t idx(int w, int op) const { return static_cast<std::size_t>(w) * n_ + op; }

  void summarise(SimResult& result) const {
    SimSummary& s = result.summary;
    std::vector<double> times, spreads, ratios, es, nc;
    for (const IterationResult& ir : result.iterations) {
      times.push_back(ir.time);
      spreads.push_back(ir.straggler.spread);
      ratios.push_back(ir.straggler.max_over_mean);
      for (const WorkerIteration& wi : ir.workers) {
        es.push_back(wi.metrics.E);
        nc.push_back(wi.metrics.C > 0 ? wi.metrics.N / wi.metrics.C : std::numeric_limits<double>::quiet_NaN());
      }
    }
    s.mean_time = mean_of(times);
    s.median_time = median_of(times);
    s.p95_time = percentile_of(times, 95);
    s.time_variance = variance_of(times);
    s.mean_E = mean_of(es);
    s.mean_spread = mean_of(spreads);
    s.mean_max_over_mean = mean_of(ratios);
    s.measured_ratio = mean_of(nc);
    for (int w = 0; w < W_; ++w) {
      std::vector<double> N, C, U, L, m, E, S, T;
      for (const IterationResult& ir : result.iterations) {
        const OverlapMetrics& om = ir.workers[w].metrics;
        N.push_back(om.N);
        C.push_back(om.C);
        U.push_back(om.U);
        L.push_back(om.L);
        m.push_back(om.m);
        E.push_back(om.E);
        S.push_back(om.S);
        T.push_back(ir.workers[w].time);
      }
      s.workers.push_back(WorkerSummary{mean_of(N), mean_of(C), mean_of(U), mean_of(L), mean_of(m),
                                        mean_of(E), mean_of(S), mean_of(T)});
    }
  }

  struct Ready {
    double time;
    int node;
  };
  struct ReadyAfter {
    bool operator()(const Ready& a, const Ready& b) const {
      return a.time != b.time ? a.time > b.time : a.node > b.node;
    }
  };
  using ReadyQueue = std::priority_queue<Ready, std::vector<Ready>, ReadyAfter>;

  const Graph& g_;
  const Schedule& schedule_;
  const SimConfig& cfg_;
  const LinkRates rates_;
  int n_ = 0, R_ = 0, W_ = 0, K_ = 0;
  bool training_ = false;
  std::vector<double> bytes_;
  std::vector<int> shard_;
  std::vector<int> chunks_of_;
  std::vector<int> fwd_inputs_, bwd_deps_, grad_deps_;

  EventQueue<Event> queue_;
  double now_ = 0;
  double last_event_ = 0;
  int iteration_ = 0;
  std::vector<TimelineEvent>* timeline_ = nullptr;
  std::uint64_t chunks_sent_ = 0;
  Direction pull_, push_;
  std::vector<int> remaining_, bwd_remaining_, grad_remaining_, grads_in_;
  std::vector<char> compute_busy_, update_busy_;
  std::vector<ReadyQueue> ready_, updates_;
  std::vector<std::vector<Interval>> comm_, compute_;
  std::vector<std::vector<std::int64_t>> priority_;
  std::optional<Rng> jitter_rng_;
};

}  // namespace

std::string_view to_string(Track track) {
  switch (track) {
    case Track::worker_down: return "downlink";
    case Track::worker_up: return "uplink";
    case Track::worker_compute: return "compute";
    case Track::ps_up: return "uplink";
    case Track::ps_down: return "downlink";
    case Track::ps_update: return "update";
  }
  return "?";
}

Result<SimResult> simulate(const Graph& graph, const Schedule& schedule, const SimConfig& config,
                           const ProgressFn& progress) {
  TICTAC_RETURN_IF_ERROR(validate(config));
  if (!config.shuffle_each_iteration && schedule.priority.size() != graph.recvs().size()) {
    return invalid_argument("schedule '" + schedule.policy + "' has " + std::to_string(schedule.priority.size()) +
                            " priorities but the graph has " + std::to_string(graph.recvs().size()) +
                            " recvs; compute the schedule for this graph");
  }
  if (graph.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() / 2)) {
    return invalid_argument("graph has too many ops for the simulator (limit 1073741823)");
  }
  // Chunk transfers per iteration, so that a tiny --chunk on a big graph fails fast instead
  // of running for hours (or overflowing a chunk counter).
  const double chunk = static_cast<double>(config.chunk_bytes);
  double chunks = 0;
  for (double b : recv_sizes(graph, config)) chunks += config.chunk_bytes == 0 ? 1 : std::max(1.0, std::ceil(b / chunk));
  chunks *= config.workers * (config.mode == SimMode::training ? 2.0 : 1.0);
  if (chunks > kMaxChunksPerIteration) {
    return invalid_argument("this setting needs " + std::to_string(static_cast<long long>(chunks)) +
                            " chunk transfers per iteration (limit " +
                            std::to_string(static_cast<long long>(kMaxChunksPerIteration)) +
                            "); use a larger chunk size");
  }
  Simulation sim(graph, schedule, config);
  return sim.run(progress);
}

}  // namespace tictac::priority::sim
