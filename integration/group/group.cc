#include "integration/group/group.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/check.h"
#include "common/log.h"
#include "integration/group/listen_address.h"
#include "integration/group/tags.h"

namespace tictac::group {
namespace {

std::byte g_empty_buffer[1];

std::byte* writable(const void* data) {
  return data == nullptr ? g_empty_buffer : static_cast<std::byte*>(const_cast<void*>(data));
}

// Element range [begin, begin + len) of segment k when `count` elements are split n ways.
struct Segment {
  std::size_t begin;
  std::size_t len;
};
Segment segment(std::size_t count, int n, int k) {
  const std::size_t base = count / static_cast<std::size_t>(n);
  const std::size_t rem = count % static_cast<std::size_t>(n);
  const auto uk = static_cast<std::size_t>(k);
  return {uk * base + std::min(uk, rem), base + (uk < rem ? 1 : 0)};
}

// A region over caller memory (never null, so registration cannot fail).
transport::MemoryRegion host_region(const void* data, std::size_t bytes) {
  Result<transport::MemoryRegion> region = transport::MemoryRegion::host(writable(data), bytes);
  TICTAC_CHECK(region.ok(), region.status().to_string());
  return std::move(*region);
}

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

// The transfers of one collective step, posted together and waited for together.
class Group::Step {
 public:
  Step(Group& group, std::string what) : group_(group), what_(std::move(what)) {
    state_ = std::make_shared<State>();
  }

  void send(int dst, std::uint64_t tag, const void* data, std::size_t bytes) {
    post(true, dst, tag, writable(data), bytes);
  }
  void recv(int src, std::uint64_t tag, void* data, std::size_t bytes) {
    post(false, src, tag, writable(data), bytes);
  }

  // Waits for every transfer; on a timeout cancels the rest and waits for them to let go of
  // their buffers before returning.
  Status wait() {
    std::unique_lock lock(state_->mu);
    const auto deadline = std::chrono::steady_clock::now() + group_.timeout();
    const bool done = state_->cv.wait_until(lock, deadline, [&] { return state_->outstanding == 0; });
    if (done) return state_->first;
    std::string waiting;
    for (int r : state_->pending) waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
    lock.unlock();
    for (transport::RequestId id : ids_) group_.context_->cancel(id);
    lock.lock();
    state_->cv.wait(lock, [&] { return state_->outstanding == 0; });
    return Status(StatusCode::timeout,
                  what_ + " on rank " + std::to_string(group_.rank()) + " timed out after " +
                      std::to_string(group_.timeout().count()) + " ms waiting for rank(s) " +
                      waiting + "; a rank that never joined the collective, or a dead peer");
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int outstanding = 0;
    std::vector<int> pending;  // ranks with an unfinished transfer (one entry each)
    Status first;
  };

  void post(bool is_send, int rank, std::uint64_t tag, std::byte* data, std::size_t bytes) {
    {
      std::lock_guard lock(state_->mu);
      ++state_->outstanding;
      state_->pending.push_back(rank);
    }
    auto state = state_;
    const std::string what = what_;
    const std::uint64_t expected = bytes;
    Done done = [state, what, rank, is_send, expected](const Status& s, std::uint64_t n, int) {
      std::lock_guard lock(state->mu);
      if (state->first.ok()) {
        if (!s.ok()) {
          state->first = Status(s.code(), what + ": " + (is_send ? "send to" : "receive from") +
                                              " rank " + std::to_string(rank) + " failed: " +
                                              s.message(), s.origin());
        } else if (!is_send && n != expected) {
          state->first = Status(StatusCode::protocol_error,
                                what + ": rank " + std::to_string(rank) + " sent " +
                                    std::to_string(n) + " bytes, expected " +
                                    std::to_string(expected) +
                                    "; the ranks called the collective with different sizes");
        }
      }
      const auto it = std::find(state->pending.begin(), state->pending.end(), rank);
      if (it != state->pending.end()) state->pending.erase(it);
      if (--state->outstanding == 0) state->cv.notify_all();
    };
    ids_.push_back(is_send ? group_.send(rank, tag, data, bytes, kCollectivePriority, std::move(done))
                           : group_.recv(rank, tag, data, bytes, std::move(done)));
  }

  Group& group_;
  std::string what_;
  std::shared_ptr<State> state_;
  std::vector<transport::RequestId> ids_;
};

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
  transport::ContextOptions copts;
  copts.name = mesh_peer_name(options.key_prefix, options.rank, options.size);
  copts.config = options.config;
  Result<std::unique_ptr<transport::Context>> context = transport::Context::create(std::move(copts));
  if (!context.ok()) return context.status();
  std::unique_ptr<Group> group(new Group(options, std::move(*context)));
  MeshOptions mesh{options.rank, options.size, options.timeout, options.listen_address,
                   options.key_prefix};
  Result<std::unique_ptr<RankMesh>> connected = RankMesh::connect(store, *group->context_, mesh);
  if (!connected.ok()) return connected.status();
  group->mesh_ = std::move(*connected);
  TICTAC_LOG(info) << "group " << options.key_prefix << ": rank " << options.rank << " of "
                   << options.size << " connected (" << group->mesh_->address() << ")";
  return group;
}

std::string Group::describe_rank(int rank) const { return "rank " + std::to_string(rank); }

transport::RequestId Group::send(int dst, std::uint64_t tag, const void* data, std::size_t bytes,
                                 transport::Priority priority, Done done) {
  const bool valid = dst >= 0 && dst < size() && dst != rank();
  const transport::PeerId peer = valid ? mesh_->peer(dst) : transport::kNoPeer;
  const transport::MemoryRegion region = host_region(data, bytes);
  return context_->send(
      peer, tag, region, 0, bytes, priority,
      [this, dst, valid, done = std::move(done)](const Status& s, std::uint64_t n, transport::PeerId) {
        if (!valid) {
          done(invalid_argument("send to rank " + std::to_string(dst) + ": not a peer rank of a group of " +
                                std::to_string(size()) + " (this is rank " + std::to_string(rank()) + ")"),
               0, dst);
          return;
        }
        done(s.ok() ? s : Status(s.code(), describe_rank(dst) + ": " + s.message(), s.origin()), n, dst);
      });
}

transport::RequestId Group::recv(int src, std::uint64_t tag, void* data, std::size_t bytes,
                                 Done done) {
  const bool any = src == kAnyRank;
  const bool valid = any || (src >= 0 && src < size() && src != rank());
  const transport::PeerId peer =
      any ? transport::kAnyPeer : (valid ? mesh_->peer(src) : transport::kNoPeer);
  transport::MemoryRegion region = host_region(data, bytes);
  return context_->recv(
      peer, tag, region, 0, bytes,
      [this, src, valid, done = std::move(done)](const Status& s, std::uint64_t n, transport::PeerId from) {
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
}

void Group::cancel(transport::RequestId id) { context_->cancel(id); }

Status Group::barrier() {
  const std::uint64_t seq = collective_seq_++;
  int step = 0;
  for (int k = 1; k < size(); k *= 2, ++step) {
    Step s(*this, "barrier #" + std::to_string(seq));
    s.send(mod(rank() + k, size()), collective_tag(seq, step), nullptr, 0);
    s.recv(mod(rank() - k, size()), collective_tag(seq, step), nullptr, 0);
    TICTAC_RETURN_IF_ERROR(s.wait());
  }
  return Status::Ok();
}

Status Group::broadcast(void* data, std::size_t bytes, int root) {
  if (root < 0 || root >= size()) {
    return invalid_argument("broadcast root " + std::to_string(root) + " is outside a group of " +
                            std::to_string(size()));
  }
  const std::uint64_t seq = collective_seq_++;
  if (size() == 1) return Status::Ok();
  Step s(*this, "broadcast #" + std::to_string(seq) + " from rank " + std::to_string(root));
  if (rank() == root) {
    for (int r = 0; r < size(); ++r) {
      if (r != root) s.send(r, collective_tag(seq, 0), data, bytes);
    }
  } else {
    s.recv(root, collective_tag(seq, 0), data, bytes);
  }
  return s.wait();
}

Status Group::allreduce(void* data, std::size_t count, std::size_t elem_size,
                        const ReduceFn& reduce) {
  const std::uint64_t seq = collective_seq_++;
  const int n = size();
  if (n == 1 || count == 0) return Status::Ok();
  auto* bytes = static_cast<std::byte*>(data);
  const int right = mod(rank() + 1, n);
  const int left = mod(rank() - 1, n);
  std::vector<std::byte> incoming(segment(count, n, 0).len * elem_size);
  const std::string what = "allreduce #" + std::to_string(seq);
  int step = 0;
  // Reduce-scatter: after n-1 steps this rank holds the full reduction of segment rank+1.
  for (int s = 0; s < n - 1; ++s, ++step) {
    const Segment out = segment(count, n, mod(rank() - s, n));
    const Segment in = segment(count, n, mod(rank() - s - 1, n));
    Step st(*this, what);
    st.send(right, collective_tag(seq, step), bytes + out.begin * elem_size, out.len * elem_size);
    st.recv(left, collective_tag(seq, step), incoming.data(), in.len * elem_size);
    TICTAC_RETURN_IF_ERROR(st.wait());
    reduce(bytes + in.begin * elem_size, incoming.data(), in.len);
  }
  // Allgather: pass the reduced segments around the ring.
  for (int s = 0; s < n - 1; ++s, ++step) {
    const Segment out = segment(count, n, mod(rank() + 1 - s, n));
    const Segment in = segment(count, n, mod(rank() - s, n));
    Step st(*this, what);
    st.send(right, collective_tag(seq, step), bytes + out.begin * elem_size, out.len * elem_size);
    st.recv(left, collective_tag(seq, step), bytes + in.begin * elem_size, in.len * elem_size);
    TICTAC_RETURN_IF_ERROR(st.wait());
  }
  return Status::Ok();
}

Status Group::allgather(const void* in, std::size_t bytes, void* out) {
  const std::uint64_t seq = collective_seq_++;
  auto* dst = static_cast<std::byte*>(out);
  if (bytes > 0) std::memmove(dst + static_cast<std::size_t>(rank()) * bytes, in, bytes);
  if (size() == 1) return Status::Ok();
  Step s(*this, "allgather #" + std::to_string(seq));
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    s.send(r, collective_tag(seq, 0), in, bytes);
    s.recv(r, collective_tag(seq, 0), dst + static_cast<std::size_t>(r) * bytes, bytes);
  }
  return s.wait();
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
