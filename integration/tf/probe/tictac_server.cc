// TicTac TF probe (a): the "drop-in" path. A ServerFactory for protocol
// "grpc+tictac" whose server is a GrpcServer subclass with its own
// RendezvousMgr (BaseRendezvousMgr / BaseRemoteRendezvous subclasses), the
// shape tensorflow/networking used for grpc+verbs / grpc+gdr / grpc+mpi.
//
// The probe's rendezvous does not move bytes itself: RecvFromRemoteAsync counts
// the call (that is the hook a tictac transport would take over, in scheduler
// order) and forwards to a stock RpcRendezvousMgr rendezvous so the step still
// completes. tictac_probe_counters() lets Python see that the hooks ran.
#include <atomic>
#include <cstdio>
#include <memory>

#include "tensorflow/core/distributed_runtime/base_rendezvous_mgr.h"
#include "tensorflow/core/distributed_runtime/rpc/grpc_server_lib.h"
#include "tensorflow/core/distributed_runtime/rpc/rpc_rendezvous_mgr.h"
#include "tensorflow/core/distributed_runtime/server_lib.h"
#include "tensorflow/core/distributed_runtime/worker_env.h"
#include "tensorflow/core/protobuf/tensorflow_server.pb.h"

namespace tictac_probe {
using namespace tensorflow;

std::atomic<long> g_servers{0}, g_mgrs{0}, g_rendezvous{0}, g_remote_recvs{0};

// Exposes RpcRendezvousMgr::Create (protected) so we can wrap its rendezvous.
class InnerMgr : public RpcRendezvousMgr {
 public:
  using RpcRendezvousMgr::RpcRendezvousMgr;
  using RpcRendezvousMgr::Create;
};

class TictacRemoteRendezvous : public BaseRemoteRendezvous {
 public:
  TictacRemoteRendezvous(const WorkerEnv* env, int64_t step_id,
                         tsl::core::RefCountPtr<BaseRemoteRendezvous> inner)
      : BaseRemoteRendezvous(env, step_id), inner_(std::move(inner)) {
    g_rendezvous++;
  }
  absl::Status Initialize(WorkerSession* session) override {
    absl::Status s = inner_->Initialize(session);
    if (!s.ok()) return s;
    return BaseRemoteRendezvous::Initialize(session);
  }
  void StartAbort(const absl::Status& status) override {
    inner_->StartAbort(status);
    BaseRemoteRendezvous::StartAbort(status);
  }

 protected:
  // The hook: a tensor produced on another task is needed here. A tictac
  // transport would post this pull to its priority queue instead.
  void RecvFromRemoteAsync(const Rendezvous::ParsedKey& parsed, const Rendezvous::Args& args,
                           DoneCallback done) override {
    g_remote_recvs++;
    inner_->RecvAsync(parsed, args, std::move(done));
  }

 private:
  ~TictacRemoteRendezvous() override {}
  tsl::core::RefCountPtr<BaseRemoteRendezvous> inner_;
};

class TictacRendezvousMgr : public BaseRendezvousMgr {
 public:
  explicit TictacRendezvousMgr(const WorkerEnv* env) : BaseRendezvousMgr(env), inner_(env) {
    g_mgrs++;
  }

 protected:
  tsl::core::RefCountPtr<BaseRemoteRendezvous> Create(int64_t step_id,
                                                      const WorkerEnv* env) override {
    return tsl::core::RefCountPtr<BaseRemoteRendezvous>(
        new TictacRemoteRendezvous(env, step_id, inner_.Create(step_id, env)));
  }

 private:
  InnerMgr inner_;
};

class TictacServer : public GrpcServer {
 public:
  static absl::Status Create(const ServerDef& def, Env* env, DeviceMgr* local_device_mgr,
                             std::unique_ptr<ServerInterface>* out) {
    std::unique_ptr<TictacServer> s(new TictacServer(def, env));
    GrpcServerOptions opts;
    opts.local_device_mgr = local_device_mgr;
    // RendezvousMgrCreationFunction returns a raw owning pointer.
    opts.rendezvous_mgr_func = [](const WorkerEnv* env) -> RendezvousMgrInterface* {
      return new TictacRendezvousMgr(env);
    };
    absl::Status st = s->Init(opts);
    if (!st.ok()) return st;
    g_servers++;
    *out = std::move(s);
    return absl::OkStatus();
  }

 private:
  TictacServer(const ServerDef& def, Env* env) : GrpcServer(def, env) {}
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

}  // namespace tictac_probe

extern "C" {
// servers, rendezvous managers, per-step rendezvous, remote receives
__attribute__((visibility("default"))) void tictac_probe_counters(long out[4]) {
  out[0] = tictac_probe::g_servers;
  out[1] = tictac_probe::g_mgrs;
  out[2] = tictac_probe::g_rendezvous;
  out[3] = tictac_probe::g_remote_recvs;
}
}
