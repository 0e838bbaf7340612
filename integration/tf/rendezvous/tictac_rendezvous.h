// The grpc+tictac rendezvous: consumer side (a BaseRemoteRendezvous whose RecvFromRemoteAsync
// fetches over the task's TensorChannel) and producer side (the channel's serve function, which
// answers a fetch from this task's rendezvous manager when the tensor is ready).
// Host (CPU) tensors only: tensorflow-cpu has no other device.
#pragma once

#include <memory>
#include <string>

#include "integration/tf/rendezvous/tensor_channel.h"

namespace tensorflow {
class RendezvousMgrInterface;
class WorkerEnv;
}  // namespace tensorflow

namespace tictac::tfrdv {

class ServerState;

// The manager GrpcServerOptions::rendezvous_mgr_func returns (raw owning pointer, TF's contract).
tensorflow::RendezvousMgrInterface* new_rendezvous_mgr(const tensorflow::WorkerEnv* env,
                                                       std::shared_ptr<ServerState> state);

// Serves fetches of tensors produced on this task (`env` must outlive the channel).
ServeFn make_serve(const tensorflow::WorkerEnv* env, std::string task);

}  // namespace tictac::tfrdv
