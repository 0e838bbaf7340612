// The grpc+tictac ServerFactory: a GrpcServer whose rendezvous manager moves every cross-task
// tensor over TicTac (tictac_rendezvous.h), and whose worker computes TIC/TAC priorities for the
// remote receives of each graph registered with it. One of the two translation units that include
// TF internals. Loaded with tf.load_library (python: `import tictac.tf`); registering is a static
// initializer.
//
// Tunables: TICTAC_TF_PORT_OFFSET (default 1000): each task's TicTac port is its gRPC port plus
// this; TICTAC_TF_POLICY (tic | tac | none; default tic); TICTAC_TF_OP_TIMES (tac only,
// required: a JSON file of profiled op times, see graph_priorities.h). Every TICTAC_* transport
// tunable applies (TICTAC_AUTH_TOKEN, TICTAC_TIMEOUT, TICTAC_RATE_LIMIT, ...).
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "integration/tf/rendezvous/graph_priorities.h"
#include "integration/tf/rendezvous/server_state.h"
#include "integration/tf/rendezvous/transfer_log.h"
#include "integration/tf/rendezvous/tictac_rendezvous.h"
#include "tensorflow/core/distributed_runtime/rpc/grpc_server_lib.h"
#include "tensorflow/core/distributed_runtime/rpc/grpc_worker_service.h"
#include "tensorflow/core/distributed_runtime/server_lib.h"
#include "tensorflow/core/distributed_runtime/worker_env.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow/core/protobuf/tensorflow_server.pb.h"
#include "tensorflow/core/protobuf/worker.pb.h"

namespace tictac::tfrdv {
namespace {

using namespace tensorflow;  // NOLINT: this file is all TF glue

constexpr int kDefaultPortOffset = 1000;
std::atomic<std::int64_t> g_grpc_recv_tensor{0}, g_servers{0};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string strip_input(const std::string& in) {
  std::string s = in[0] == '^' ? in.substr(1) : in;
  auto colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(0, colon);
}

// NodeSpecs of a partitioned graph: remote _Recv/_HostRecv nodes are recvs; NextIteration back
// edges are dropped (TIC needs a DAG).
std::vector<NodeSpec> node_specs(const GraphDef& graph) {
  std::unordered_set<std::string> next_iteration;
  for (const NodeDef& n : graph.node())
    if (n.op() == "NextIteration" || n.op() == "RefNextIteration") next_iteration.insert(n.name());
  std::vector<NodeSpec> out;
  out.reserve(graph.node_size());
  for (const NodeDef& n : graph.node()) {
    NodeSpec spec;
    spec.name = n.name();
    if (n.op() == "_Recv" || n.op() == "_HostRecv") {
      std::string send, recv;
      bool client = false;
      if (TryGetNodeAttr(n, "send_device", &send) && TryGetNodeAttr(n, "recv_device", &recv) &&
          TryGetNodeAttr(n, "tensor_name", &spec.edge)) {
        TryGetNodeAttr(n, "client_terminated", &client);
        spec.is_remote_recv = !client && !DeviceNameUtils::IsSameAddressSpace(send, recv);
        // The size, for TAC, when the graph states a fully defined shape.
        DataType dtype;
        std::vector<PartialTensorShape> shapes;
        if (TryGetNodeAttr(n, "tensor_type", &dtype) &&
            GetNodeAttr(n, "_output_shapes", &shapes).ok() && shapes.size() == 1 && shapes[0].IsFullyDefined() && DataTypeSize(dtype) > 0)
          spec.bytes = static_cast<std::uint64_t>(shapes[0].num_elements()) * DataTypeSize(dtype);
      }
    }
    for (const std::string& in : n.input()) {
      std::string src = strip_input(in);
      if (!next_iteration.count(src)) spec.inputs.push_back(src);
    }
    out.push_back(std::move(spec));
  }
  return out;
}

class TictacWorker : public GrpcWorker {
 public:
  TictacWorker(WorkerEnv* env, const ConfigProto& config, std::shared_ptr<ServerState> state,
               std::string policy, std::shared_ptr<const TacTimings> tac)
      : GrpcWorker(env, config),
        state_(std::move(state)),
        policy_(std::move(policy)),
        tac_(std::move(tac)) {}

  void RegisterGraphAsync(const RegisterGraphRequest* request, RegisterGraphResponse* response,
                          StatusCallback done) override {
    std::unordered_map<std::string, std::int64_t> table;
    std::string error;
    if (edge_priorities(node_specs(request->graph_def()), policy_, &table, &error, tac_.get()))
      state_->merge_priorities(table);
    else
      LOG(WARNING) << "grpc+tictac: no " << policy_ << " priorities for a graph registered on "
                   << state_->own_task << " (its keys go at the lowest priority): " << error;
    GrpcWorker::RegisterGraphAsync(request, response, std::move(done));
  }

  void GrpcRecvTensorAsync(CallOptions* opts, const RecvTensorRequest* request,
                           ::grpc::ByteBuffer* response, StatusCallback done) override {
    g_grpc_recv_tensor++;
    GrpcWorker::GrpcRecvTensorAsync(opts, request, response, std::move(done));
  }

 private:
  std::shared_ptr<ServerState> state_;
  std::string policy_;
  std::shared_ptr<const TacTimings> tac_;  // policy tac only
};

std::string task_name(const std::string& job, int index) {
  return "/job:" + job + "/replica:0/task:" + std::to_string(index);
}

absl::Status tictac_addresses(const ServerDef& def, int offset,
                              std::map<std::string, std::string>* out) {
  for (const JobDef& job : def.cluster().job()) {
    for (const auto& [index, hostport] : job.tasks()) {
      const std::string task = task_name(job.name(), index);
      auto colon = hostport.rfind(':');
      int port = colon == std::string::npos ? -1 : std::atoi(hostport.c_str() + colon + 1);
      if (port <= 0 || port + offset > 65535)
        return absl::InvalidArgumentError(
            "grpc+tictac: task " + task + " address '" + hostport +
            "': its TicTac port (gRPC port + " + std::to_string(offset) +
            ", TICTAC_TF_PORT_OFFSET) must be in 1..65535; give the task a "
            "fixed gRPC port or change TICTAC_TF_PORT_OFFSET");
      (*out)[task] = "tcp://" + hostport.substr(0, colon) + ":" + std::to_string(port + offset);
    }
  }
  return absl::OkStatus();
}

absl::Status read_config(int* offset, std::string* policy, std::shared_ptr<const TacTimings>* tac) {
  const std::string o = env_or("TICTAC_TF_PORT_OFFSET", std::to_string(kDefaultPortOffset));
  char* end = nullptr;
  long v = std::strtol(o.c_str(), &end, 10);
  if (end == o.c_str() || *end != '\0' || v < 1 || v > 65535)
    return absl::InvalidArgumentError("grpc+tictac: TICTAC_TF_PORT_OFFSET='" + o +
                                      "' is not an integer in 1..65535 (default 1000)");
  *offset = static_cast<int>(v);
  *policy = env_or("TICTAC_TF_POLICY", "tic");
  if (*policy != "tic" && *policy != "tac" && *policy != "none")
    return absl::InvalidArgumentError("grpc+tictac: TICTAC_TF_POLICY='" + *policy +
                                      "' (expected tic, tac or none)");
  if (*policy != "tac") return absl::OkStatus();
  const std::string path = env_or("TICTAC_TF_OP_TIMES", "");
  if (path.empty())
    return absl::InvalidArgumentError(
        "grpc+tictac: TICTAC_TF_POLICY=tac needs TICTAC_TF_OP_TIMES, a JSON file of profiled op "
        "times ({\"ops\": {\"node name\": seconds}, \"bandwidth_bps\": b}); or use tic");
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  if (!f)
    return absl::InvalidArgumentError("grpc+tictac: TICTAC_TF_OP_TIMES='" + path +
                                      "' cannot be read");
  auto timings = std::make_shared<TacTimings>();
  std::string error;
  if (!parse_tac_timings(text.str(), timings.get(), &error))
    return absl::InvalidArgumentError("grpc+tictac: TICTAC_TF_OP_TIMES='" + path + "': " + error);
  *tac = std::move(timings);
  return absl::OkStatus();
}

class TictacServer : public GrpcServer {
 public:
  static absl::Status Create(const ServerDef& def, Env* env, DeviceMgr* local_device_mgr,
                             std::unique_ptr<ServerInterface>* out) {
    int offset = 0;
    std::string policy;
    std::shared_ptr<const TacTimings> tac;
    absl::Status st = read_config(&offset, &policy, &tac);
    if (!st.ok()) return st;
    auto state = std::make_shared<ServerState>();
    std::map<std::string, std::string> addresses;
    st = tictac_addresses(def, offset, &addresses);
    if (!st.ok()) return st;
    state->own_task = task_name(def.job_name(), def.task_index());
    const std::string listen = addresses[state->own_task];
    if (listen.empty())
      return absl::InvalidArgumentError("grpc+tictac: this server's task " + state->own_task +
                                        " is not in its cluster spec");
    state->set_addresses(std::move(addresses));

    std::unique_ptr<TictacServer> server(new TictacServer(def, env, state, offset));
    GrpcServerOptions opts;
    opts.local_device_mgr = local_device_mgr;
    opts.rendezvous_mgr_func = [state](const WorkerEnv* env) {
      return new_rendezvous_mgr(env, state);
    };
    opts.worker_func = [state, policy, tac](WorkerEnv* env, const ConfigProto& config) {
      return std::unique_ptr<GrpcWorker>(new TictacWorker(env, config, state, policy, tac));
    };
    st = server->Init(opts);
    if (!st.ok()) return st;
    std::string error;
    state->channel =
        TensorChannel::create(listen, make_serve(server->worker_env(), state->own_task), &error);
    if (!state->channel)
      return absl::UnavailableError("grpc+tictac: task " + state->own_task +
                                    " cannot start its TicTac transport on " + listen + ": " +
                                    error + " (the port is the gRPC port + TICTAC_TF_PORT_OFFSET)");
    g_servers++;
    *out = std::move(server);
    return absl::OkStatus();
  }

  absl::Status UpdateServerDef(const ServerDef& def) override {
    absl::Status st = GrpcServer::UpdateServerDef(def);
    if (!st.ok()) return st;
    std::map<std::string, std::string> addresses;
    st = tictac_addresses(def, offset_, &addresses);
    if (st.ok()) state_->set_addresses(std::move(addresses));
    return st;
  }

 private:
  TictacServer(const ServerDef& def, Env* env, std::shared_ptr<ServerState> state, int offset)
      : GrpcServer(def, env), state_(std::move(state)), offset_(offset) {}
  std::shared_ptr<ServerState> state_;
  int offset_;
};

class TictacServerFactory : public ServerFactory {
 public:
  bool AcceptsOptions(const ServerDef& def) override { return def.protocol() == "grpc+tictac"; }
  absl::Status NewServer(const ServerDef& def, const Options& options,
                         std::unique_ptr<ServerInterface>* out) override {
    return TictacServer::Create(def, Env::Default(), options.local_device_mgr, out);
  }
};

struct Registrar {
  Registrar() { ServerFactory::Register("TICTAC_SERVER", new TictacServerFactory()); }
} registrar;

}  // namespace
}  // namespace tictac::tfrdv

// For python (ctypes): sent tensors, sent bytes, out of order, received tensors, received bytes,
// gRPC RecvTensor calls served, grpc+tictac servers created; all for this process.
// The transfer log (transfer_log.h): on != 0 keeps records; dump writes and forgets them.
extern "C" __attribute__((visibility("default"))) void tictac_tf_transfer_log(int on) {
  tictac::tfrdv::set_transfer_log(on != 0);
}
extern "C" __attribute__((visibility("default"))) long long tictac_tf_transfer_log_dump(
    const char* path) {
  return tictac::tfrdv::dump_transfer_log(path);
}

extern "C" __attribute__((visibility("default"))) void tictac_tf_rendezvous_stats(
    long long out[7]) {
  auto s = tictac::tfrdv::process_stats();
  out[0] = s.sent_tensors;
  out[1] = s.sent_bytes;
  out[2] = s.out_of_order;
  out[3] = s.recv_tensors;
  out[4] = s.recv_bytes;
  out[5] = tictac::tfrdv::g_grpc_recv_tensor.load();
  out[6] = tictac::tfrdv::g_servers.load();
}
