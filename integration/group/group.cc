#include "integration/group/group.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/check.h"
#include "common/log.h"
#include "integration/group/backend_choice.h"
#include "integration/group/flow.h"
#include "integration/group/listen_address.h"
#include "integration/group/ring.h"
#include "integration/group/tags.h"

namespace tictac::group {
namespace {

std::byte g_empty_buffer[1];

std::byte* writable(const void* data) {
  return data == nullptr ? g_empty_buffer : static_cast<std::byte*>(const_cast<void*>(data));
}

// A region over caller memory (never null, so registration cannot fail).
transport::MemoryRegion host_region(const void* data, std::size_t bytes) {
  Result<transport::MemoryRegion> region = transport::MemoryRegion::host(writable(data), bytes);
  TICTAC_CHECK(region.ok(), region.status().to_string());
  return std::move(*region);
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// This thread's SeqScope: the group, the collective's ticket, the sequence numbers taken.
struct ActiveScope {
  const void* group = nullptr;
  std::uint64_t ticket = 0;
  int used = 0;
};
thread_local ActiveScope t_scope;

}  // namespace

Group::Group(GroupOptions options, std::unique_ptr<transport::Context> context)
    : options_(std::move(options)), context_(std::move(context)) {}

Group::~Group() { close(); }

Result<std::unique_ptr<Group>> Group::create(bootstrap::Store& store, GroupOptions options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return invalid_argument("rank " + std::to_string(options.rank) + " is outside a group of " +
                            std::to_string(options.size) + " ranks");
  }
  if (options.listen_address.empty()) {
    Result<std::string> chosen = choose_listen_address();
    if (!chosen.ok()) return chosen.status();
    options.listen_address = *chosen;
  }
  Result<BackendPlan> plan = plan_backends(options.backends);
  if (!plan.ok()) return plan.status();
  std::vector<std::string> listen;
  for (std::size_t i = 0; i < plan->names.size(); ++i) {
    std::string address = with_scheme(options.listen_address, plan->names[i]);
    const std::size_t colon = address.rfind(':');
    if (i > 0 && colon != std::string::npos && colon > address.find("://") + 2) {
      address = address.substr(0, colon) + ":0";  // the configured port belongs to the first
    }
    listen.push_back(std::move(address));
  }
  transport::ContextOptions copts;
  copts.name = mesh_peer_name(options.key_prefix, options.rank, options.size);
  copts.config = options.config;
  copts.backends = std::move(plan->backends);
  copts.cuda_api = options.cuda_api;
  Result<std::unique_ptr<transport::Context>> context = transport::Context::create(std::move(copts));
  if (!context.ok()) return context.status();
  std::unique_ptr<Group> group(new Group(options, std::move(*context)));
  MeshOptions mesh{options.rank, options.size, options.timeout, std::move(listen),
                   options.key_prefix};
  Result<std::unique_ptr<RankMesh>> connected = RankMesh::connect(store, *group->context_, mesh);
  if (!connected.ok()) return connected.status();
  group->mesh_ = std::move(*connected);
  TICTAC_LOG(info) << "group " << options.key_prefix << ": rank " << options.rank << " of "
                   << options.size << " connected (" << group->mesh_->addresses() << ")";
  return group;
}

std::string Group::describe_rank(int rank) const { return "rank " + std::to_string(rank); }

transport::RequestId Group::send(int dst, std::uint64_t tag, const void* data, std::size_t bytes,
                                 transport::Priority priority, Done done) {
  return send_region(dst, tag, std::make_shared<transport::MemoryRegion>(host_region(data, bytes)),
                     priority, std::move(done));
}

transport::RequestId Group::recv(int src, std::uint64_t tag, void* data, std::size_t bytes,
                                 Done done) {
  return recv_region(src, tag, std::make_shared<transport::MemoryRegion>(host_region(data, bytes)),
                     std::move(done));
}

Result<std::shared_ptr<transport::MemoryRegion>> Group::register_device(void* data,
                                                                        std::size_t bytes,
                                                                        int device, void* stream) {
  transport::BufferDesc desc;
  desc.data = data;
  desc.bytes = bytes;
  desc.type = transport::MemoryType::cuda;
  desc.cuda_device = device;
  desc.cuda_stream = stream;
  Result<transport::MemoryRegion> region = context_->register_buffer(desc);
  if (!region.ok()) return region.status();
  return std::make_shared<transport::MemoryRegion>(std::move(region).value());
}

transport::RequestId Group::send_region(int dst, std::uint64_t tag,
                                        std::shared_ptr<transport::MemoryRegion> region,
                                        transport::Priority priority, Done done) {
  const bool valid = dst >= 0 && dst < size() && dst != rank();
  const transport::PeerId peer = valid ? mesh_->peer(dst) : transport::kNoPeer;
  const std::uint64_t bytes = region->size();
  const transport::RequestId id = context_->send(
      peer, tag, *region, 0, bytes, priority,
      [this, dst, valid, region, done = std::move(done)](const Status& s, std::uint64_t n, transport::PeerId) {
        if (!valid) {
          done(invalid_argument("send to rank " + std::to_string(dst) + ": not a peer rank of a group of " +
                                std::to_string(size()) + " (this is rank " + std::to_string(rank()) + ")"),
               0, dst);
          return;
        }
        done(s.ok() ? s : Status(s.code(), describe_rank(dst) + ": " + s.message(), s.origin()), n, dst);
      });
  return id;
}

transport::RequestId Group::recv_region(int src, std::uint64_t tag,
                                        std::shared_ptr<transport::MemoryRegion> region, Done done) {
  const bool any = src == kAnyRank;
  const bool valid = any || (src >= 0 && src < size() && src != rank());
  const transport::PeerId peer =
      any ? transport::kAnyPeer : (valid ? mesh_->peer(src) : transport::kNoPeer);
  const std::uint64_t bytes = region->size();
  const transport::RequestId id = context_->recv(
      peer, tag, *region, 0, bytes,
      [this, src, valid, region, done = std::move(done)](const Status& s, std::uint64_t n, transport::PeerId from) {
        if (!valid) {
          done(invalid_argument("receive from rank " + std::to_string(src) + ": not a peer rank of a group of " +
                                std::to_string(size()) + " (this is rank " + std::to_string(rank()) + ")"),
               0, src);
          return;
        }
        const int source = mesh_->rank_of(from);
        const int named = source >= 0 ? source : src;
        done(s.ok() || named < 0 ? s : Status(s.code(), describe_rank(named) + ": " + s.message(), s.origin()),
             n, source >= 0 ? source : src);
      });
  return id;
}

void Group::begin_batch() { context_->begin_batch(); }

void Group::end_batch() { context_->end_batch(); }

void Group::cancel(transport::RequestId id) { context_->cancel(id); }

std::uint64_t Group::next_collective_seq() {
  if (t_scope.group != this) return collective_seq_++;
  TICTAC_CHECK(t_scope.used < kScopedSeqCalls,
               "a collective under one SeqScope took more than 256 sequence numbers");
  return scoped_seq(t_scope.ticket, t_scope.used++);
}

Group::SeqScope::SeqScope(Group& group, std::uint64_t ticket) {
  TICTAC_CHECK(t_scope.group == nullptr, "Group::SeqScope nested on one thread");
  t_scope = ActiveScope{&group, ticket, 0};
}

Group::SeqScope::~SeqScope() { t_scope = ActiveScope{}; }

Status Group::barrier(transport::Priority priority) {
  const std::uint64_t seq = next_collective_seq();
  int step = 0;
  for (int k = 1; k < size(); k *= 2, ++step) {
    Flow f(*this, "barrier #" + seq_text(seq), priority);
    f.send(0, mod(rank() + k, size()), collective_tag(seq, step), nullptr, 0);
    f.recv(0, mod(rank() - k, size()), collective_tag(seq, step), nullptr, 0);
    TICTAC_RETURN_IF_ERROR(f.wait_all());
  }
  return Status::Ok();
}

Status Group::broadcast(void* data, std::size_t bytes, int root, transport::Priority priority) {
  if (root < 0 || root >= size()) {
    return invalid_argument("broadcast root " + std::to_string(root) + " is outside a group of " +
                            std::to_string(size()));
  }
  const std::uint64_t seq = next_collective_seq();
  if (size() == 1) return Status::Ok();
  Flow f(*this, "broadcast #" + seq_text(seq) + " from rank " + std::to_string(root),
         priority);
  if (rank() == root) {
    for (int r = 0; r < size(); ++r) {
      if (r != root) f.send(0, r, collective_tag(seq, 0), data, bytes);
    }
  } else {
    f.recv(0, root, collective_tag(seq, 0), data, bytes);
  }
  return f.wait_all();
}

Status Group::allreduce(void* data, std::size_t count, std::size_t elem_size,
                        const ReduceFn& reduce, transport::Priority priority) {
  return ring_allreduce(*this, data, count, elem_size, reduce, priority, "allreduce");
}

Status Group::allgather(const void* in, std::size_t bytes, void* out,
                        transport::Priority priority) {
  const std::uint64_t seq = next_collective_seq();
  auto* dst = static_cast<std::byte*>(out);
  std::byte* mine = dst + static_cast<std::size_t>(rank()) * bytes;
  if (bytes > 0 && mine != in) std::memmove(mine, in, bytes);  // in place: already there
  if (size() == 1) return Status::Ok();
  Flow f(*this, "allgather #" + seq_text(seq), priority);
  for (int k = 1; k < size(); ++k) {
    const int to = mod(rank() + k, size());
    const int from = mod(rank() - k, size());
    f.recv(0, from, collective_tag(seq, 0), dst + static_cast<std::size_t>(from) * bytes, bytes);
    f.send(0, to, collective_tag(seq, 0), in, bytes);
  }
  return f.wait_all();
}

void Group::close() {
  if (closed_) return;
  closed_ = true;
  if (context_) {
    context_->close();
    context_->join();
  }
}

}  // namespace tictac::group
