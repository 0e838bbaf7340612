// grpc+tictac rendezvous (see tictac_rendezvous.h). One of the two translation units that include
// TF internals (the other is tictac_server.cc).
#include "integration/tf/rendezvous/tictac_rendezvous.h"

#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "integration/tf/rendezvous/server_state.h"
#include "integration/tf/rendezvous/transfer_log.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/common_runtime/device_mgr.h"
#include "tensorflow/core/distributed_runtime/base_rendezvous_mgr.h"
#include "tensorflow/core/distributed_runtime/worker_env.h"
#include "tensorflow/core/distributed_runtime/worker_session.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/types.h"

namespace tictac::tfrdv {
namespace {

using namespace tensorflow;  // NOLINT: this file is all TF glue

std::string task_of(const DeviceNameUtils::ParsedName& d) {
  return "/job:" + d.job + "/replica:" + std::to_string(d.replica) +
         "/task:" + std::to_string(d.task);
}

// Landing place of one fetch: the tensor being received, or the serialized proto.
struct Landing {
  Tensor tensor;
  std::string proto;
  Allocator* allocator = nullptr;
};

// The payload landed in a tensor allocated from the key's previous header (pre-posted receive,
// same byte size): gives it the dtype and shape the producer sent, when they differ.
absl::Status reinterpret(const TensorHeader& h, Tensor* t) {
  TensorShape shape;
  absl::Status st = TensorShape::BuildTensorShape(h.dims, &shape);
  if (!st.ok()) return st;
  const auto dtype = static_cast<DataType>(h.dtype);
  if (t->dtype() == dtype && t->shape() == shape) return absl::OkStatus();
  Tensor out;
  st = out.BitcastFrom(*t, dtype, shape);
  if (st.ok()) *t = std::move(out);
  return st;
}

class TictacRemoteRendezvous : public BaseRemoteRendezvous {
 public:
  TictacRemoteRendezvous(const WorkerEnv* env, int64_t step_id, std::shared_ptr<ServerState> state)
      : BaseRemoteRendezvous(env, step_id), state_(std::move(state)) {}

  void StartAbort(const absl::Status& status) override {
    BaseRemoteRendezvous::StartAbort(status);
    std::vector<std::uint64_t> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ids.assign(outstanding_.begin(), outstanding_.end());
      outstanding_.clear();
    }
    for (std::uint64_t id : ids) state_->channel->cancel(id, status.ToString());
  }

 protected:
  void RecvFromRemoteAsync(const Rendezvous::ParsedKey& parsed, const Rendezvous::Args& args,
                           DoneCallback done) override {
    const std::string task = task_of(parsed.src);
    const std::string address = state_->address_of(task);
    if (address.empty() || state_->channel == nullptr) {
      done(absl::UnavailableError("grpc+tictac: task " + task + " (producer of " +
                                  std::string(parsed.edge_name) +
                                  ") is not in this server's cluster spec"),
           Args(), args, Tensor(), false);
      return;
    }
    Device* dst = nullptr;
    absl::Status s = session()->device_mgr()->LookupDevice(parsed.dst_device, &dst);
    if (!s.ok()) {
      done(s, Args(), args, Tensor(), false);
      return;
    }
    auto landing = std::make_shared<Landing>();
    landing->allocator = dst->GetAllocator(args.alloc_attrs);
    AllocFn alloc = [landing](const TensorHeader& h, std::string* error) -> void* {
      if (h.is_dead) return nullptr;
      if (h.encoding == 1) {
        landing->proto.resize(h.payload_bytes);
        return landing->proto.data();
      }
      TensorShape shape;
      absl::Status st = TensorShape::BuildTensorShape(h.dims, &shape);
      if (!st.ok() || !DataTypeCanUseMemcpy(static_cast<DataType>(h.dtype))) {
        *error = "grpc+tictac: bad tensor header: " + (st.ok() ? "dtype" : st.ToString());
        return nullptr;
      }
      landing->tensor = Tensor(landing->allocator, static_cast<DataType>(h.dtype), shape);
      auto data = landing->tensor.tensor_data();
      if (data.size() != h.payload_bytes) {
        *error = "grpc+tictac: payload of " + std::to_string(h.payload_bytes) +
                 " bytes for a tensor of " + std::to_string(data.size());
        return nullptr;
      }
      return const_cast<char*>(data.data());
    };
    const Rendezvous::Args recv_args = args;
    const WorkerEnv* env = env_;
    // For the transfer log: the same points gRPC's RecvTensor step-stats entry spans (request
    // issued, tensor arrived), on the clock of TF's step stats.
    const std::int64_t requested_us = transfer_log_enabled() ? Env::Default()->NowMicros() : 0;
    const std::int64_t step_id = step_id_;
    std::string edge(parsed.edge_name);
    Ref();  // released when the fetch completes
    // The fetch id, known once fetch() returns; `done` may run before that (connect failure).
    auto box = std::make_shared<IdBox>();
    DoneFn finished = [this, box, landing, recv_args, done = std::move(done), env, requested_us,
                       step_id, edge = std::move(edge)](int code, const std::string& message,
                                                        const TensorHeader& h) mutable {
      if (requested_us != 0 && code == kCodeOk)
        record_transfer(step_id, edge, requested_us, Env::Default()->NowMicros(),
                        static_cast<std::int64_t>(h.payload_bytes));
      {
        std::lock_guard<std::mutex> lock(mu_);
        box->done = true;
        if (box->id != 0) outstanding_.erase(box->id);
      }
      env->compute_pool->Schedule(
          [this, landing, recv_args, done = std::move(done), code, message, h]() {
            absl::Status st = code == kCodeOk
                                  ? absl::OkStatus()
                                  : absl::Status(static_cast<absl::StatusCode>(code), message);
            if (st.ok() && !h.is_dead && h.encoding == 1) {
              TensorProto proto;
              if (!proto.ParseFromString(landing->proto) ||
                  !landing->tensor.FromProto(landing->allocator, proto))
                st = absl::InternalError("grpc+tictac: cannot decode a TensorProto reply");
            } else if (st.ok() && !h.is_dead) {
              st = reinterpret(h, &landing->tensor);
            }
            done(st, Args(), recv_args, st.ok() ? landing->tensor : Tensor(), st.ok() && h.is_dead);
            Unref();
          });
    };
    const std::uint64_t id = state_->channel->fetch(
        address, task, step_id_, std::string(parsed.FullKey()),
        state_->priority(std::string(parsed.edge_name)), std::move(alloc), std::move(finished));
    std::lock_guard<std::mutex> lock(mu_);
    box->id = id;
    if (!box->done) outstanding_.insert(id);
  }

 private:
  ~TictacRemoteRendezvous() override {}
  std::shared_ptr<ServerState> state_;
  std::mutex mu_;
  struct IdBox {
    std::uint64_t id = 0;
    bool done = false;
  };
  std::unordered_set<std::uint64_t> outstanding_;  // fetches not yet completed
};

class TictacRendezvousMgr : public BaseRendezvousMgr {
 public:
  TictacRendezvousMgr(const WorkerEnv* env, std::shared_ptr<ServerState> state)
      : BaseRendezvousMgr(env), state_(std::move(state)) {}

 protected:
  tsl::core::RefCountPtr<BaseRemoteRendezvous> Create(int64_t step_id,
                                                      const WorkerEnv* env) override {
    return tsl::core::RefCountPtr<BaseRemoteRendezvous>(
        new TictacRemoteRendezvous(env, step_id, state_));
  }

 private:
  std::shared_ptr<ServerState> state_;
};

void answer(const ReplyFn& reply, const std::string& task, const absl::Status& s, const Tensor& val,
            bool is_dead) {
  TensorHeader h;
  if (!s.ok()) {
    h.code = static_cast<int>(s.code());
    h.message = "grpc+tictac: producer " + task + ": " + std::string(s.message());
    reply(std::move(h), nullptr, nullptr);
    return;
  }
  h.is_dead = is_dead;
  if (is_dead) {
    reply(std::move(h), nullptr, nullptr);
    return;
  }
  h.dtype = static_cast<int>(val.dtype());
  for (int64_t d : val.shape().dim_sizes()) h.dims.push_back(d);
  if (DataTypeCanUseMemcpy(val.dtype())) {
    auto keep = std::make_shared<Tensor>(val);  // shares the buffer until it is sent
    auto data = keep->tensor_data();
    h.payload_bytes = data.size();
    reply(std::move(h), data.data(), keep);
    return;
  }
  TensorProto proto;
  val.AsProtoTensorContent(&proto);
  auto bytes = std::make_shared<std::string>();
  proto.SerializeToString(bytes.get());
  h.encoding = 1;
  h.payload_bytes = bytes->size();
  reply(std::move(h), bytes->data(), bytes);
}

}  // namespace

tensorflow::RendezvousMgrInterface* new_rendezvous_mgr(const tensorflow::WorkerEnv* env,
                                                       std::shared_ptr<ServerState> state) {
  return new TictacRendezvousMgr(env, std::move(state));
}

ServeFn make_serve(const tensorflow::WorkerEnv* env, std::string task) {
  return [env, task](const FetchRequest& req, ReplyFn reply) {
    env->compute_pool->Schedule([env, task, req, reply = std::move(reply)]() {
      Rendezvous::ParsedKey parsed;
      absl::Status s = Rendezvous::ParseKey(req.key, &parsed);
      if (!s.ok()) return answer(reply, task, s, Tensor(), false);
      env->rendezvous_mgr->RecvLocalAsync(
          req.step_id, parsed,
          [reply, task](const absl::Status& st, const Rendezvous::Args&, const Rendezvous::Args&,
                        const Tensor& val,
                        bool is_dead) { answer(reply, task, st, val, is_dead); });
    });
  };
}

}  // namespace tictac::tfrdv
