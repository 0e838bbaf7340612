// TICTAC_* tunables read by code that is not linked into the CLI (the Python packages, the
// TensorFlow plugins, the ring collectives of integration/group), registered here at static
// initialisation so that `tictac info --tunables` lists every one with its documented default.
// A tunable declared in a linked library (common/tunables.h) is registered by its own
// declaration; the registry keeps the first of two with the same name.
// Kept in step with its readers by tests/cli/tunables_test.sh (docs and sources against this list).
#include <string>

#include "common/tunables.h"
#include "integration/group/collective_scheduler.h"
#include "integration/group/ring.h"

namespace tictac::cli {
namespace {

[[maybe_unused]] const bool kRegistered = [] {
  const TunableInfo table[] = {
      // integration/group (ring.cc; linked into the torch extension, not the CLI)
      {"TICTAC_RING_CHUNK_BYTES", std::to_string(group::kRingChunkBytes),
       "ring collectives (allreduce, reduce-scatter, allgather of the torch backend): bytes per "
       "pipelined chunk of each rank's block (at most 32 chunks a block)"},
      {"TICTAC_RING_EARLY_RECV", "1",
       "ring collectives: post each step's receive a step early, so the left neighbour's send "
       "finds it advertised and goes without a READY round trip (0 = post it with the step's "
       "send)"},
      {"TICTAC_RING_EARLY_SCRATCH_BYTES", std::to_string(group::kRingEarlyScratchBytes),
       "ring reduce-scatter: most scratch bytes per collective for receiving a step early (two "
       "slots a block in place, three out of place); a bigger block waits a READY per step"},
      {"TICTAC_COLL_CONCURRENCY", std::to_string(group::CollectiveScheduler::kDefaultConcurrency),
       "torch backend (collective_scheduler.cc): collectives with a priority that may run at once "
       "per process group (a high-priority all-reduce overtakes a big low-priority one "
       "mid-ring); 1 = one at a time in call order"},
      {"TICTAC_LISTEN_ADDR", "\"\"",
       "process groups (listen_address.cc): address this rank listens on (host, host:port or "
       "tcp://host:port); empty = the interface that routes to MASTER_ADDR, else 127.0.0.1"},
      // python/tictac/torch/ddp (ordered.py, sharded.py; docs/ddp.md)
      {"TICTAC_DDP_SHARD_BYTES", std::to_string(16 << 20),
       "ordered_ddp on a tictac group: a parameter of at least this many bytes is updated in "
       "slices (reduce-scatter, each rank updates 1/world, all-gather of the values); 0 = "
       "all-reduce every parameter"},
      // python/tictac/torch/ps (config.py, planning.py, train.py; docs/ps-training.md)
      {"TICTAC_PS_UPDATE", "eager",
       "parameter server: eager (update each parameter once all its gradients "
       "arrived) | bulk (one optimizer step per iteration)"},
      {"TICTAC_PS_PIPELINE", "1",
       "parameter server, eager update: send each new value as soon as it is updated"},
      {"TICTAC_PS_PUSH_ORDER", "produced",
       "parameter server: gradient push priorities: produced | next"},
      {"TICTAC_PS_UPDATE_ORDER", "arrival", "parameter server, eager update: arrival | next"},
      {"TICTAC_PS_AUTO_ORDER", "1",
       "parameter server: fall back to declaration order when overlap is too small"},
      {"TICTAC_PS_MIN_OVERLAP", "0.05",
       "parameter server: the speedup bound below which auto_order falls back"},
      {"TICTAC_PS_LOG", "WARNING", "tictac.torch.train: Python logging level"},
      {"TICTAC_CLUSTER_RATE", "measured",
       "tac policy: link rate in bytes/s (unset: measured at start)"},
      // bench/cluster (the emulated cluster's links; bench/cluster/README.md)
      {"TICTAC_CLUSTER_BURST_US", "4000",
       "bench/cluster: tbf bucket depth in microseconds at the rate (at least 64 KiB)"},
      {"TICTAC_CLUSTER_TBF_LATENCY", "50ms", "bench/cluster: tbf queue latency"},
      // python/tictac/tf and the TF plugins (integration/tf; docs/tf.md)
      {"TICTAC_RANK", "(required)", "tictac.tf.init(): this process's rank"},
      {"TICTAC_WORLD_SIZE", "(required)", "tictac.tf.init(): number of processes"},
      {"TICTAC_STORE", "(required)", "tictac.tf.init(): the bootstrap store address"},
      {"TICTAC_NUM_SERVERS", "1", "tictac.tf.init(): parameter servers among the ranks"},
      {"TICTAC_TF_TIMEOUT", "60", "tictac.tf: seconds each transfer may take"},
      {"TICTAC_TF_PORT_OFFSET", "1000", "grpc+tictac: a task's TicTac port = its gRPC port + this"},
      {"TICTAC_TF_POLICY", "tic", "grpc+tictac: tic | tac | none (every key priority 0)"},
      {"TICTAC_TF_OP_TIMES", "(unset)",
       "grpc+tictac with TICTAC_TF_POLICY=tac: JSON file of profiled op seconds per node"},
      {"TICTAC_TF_TRACE", "0", "grpc+tictac: 1 = one stderr line per fetch event"},
      {"TICTAC_TF_TRANSFER_LOG", "0",
       "grpc+tictac: 1 = keep one record per received tensor (tictac.tf.take_transfers)"},
      {"TICTAC_TF_LIBRARY", "(build dir)", "tictac.tf: path of the ops library to load"},
      {"TICTAC_TF_SERVER_LIBRARY", "(build dir)",
       "tictac.tf.rendezvous: path of the grpc+tictac server library"},
      // Python loaders (python/tictac/*/_loader.py, export_graph.py)
      {"TICTAC_BUILD_DIR", "<repo>/build",
       "Python packages: the Meson build folder with the native libraries"},
      {"TICTAC_CLI", "(build dir, PATH)", "tictac.tf.export_graph: the tictac executable"},
  };
  for (const TunableInfo& t : table) register_tunable(t);
  return true;
}();

}  // namespace
}  // namespace tictac::cli
