#include "integration/group/rooted.h"

#include <cstring>
#include <string>

#include "integration/group/flow.h"
#include "integration/group/ring.h"
#include "integration/group/tags.h"

namespace tictac::group {
namespace {

Status check_root(const Group& g, int root, const char* op) {
  if (root < 0 || root >= g.size()) {
    return invalid_argument(std::string(op) + " root " + std::to_string(root) +
                            " is outside a group of " + std::to_string(g.size()));
  }
  return Status::Ok();
}

Status check_sizes(const Group& g, const std::vector<std::size_t>& v, const char* what) {
  if (v.size() != static_cast<std::size_t>(g.size())) {
    return invalid_argument(std::string(what) + " has " + std::to_string(v.size()) +
                            " entries; it needs one per rank (" + std::to_string(g.size()) + ")");
  }
  return Status::Ok();
}

void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace

Status reduce(Group& g, void* data, std::size_t count, std::size_t elem_size,
              const ReduceFn& reduce_fn, int root, transport::Priority priority) {
  TICTAC_RETURN_IF_ERROR(check_root(g, root, "reduce"));
  const Blocks blocks = Blocks::even(count, g.size());
  TICTAC_RETURN_IF_ERROR(
      ring_reduce_scatter(g, data, blocks, elem_size, reduce_fn, priority, "reduce"));
  const std::uint64_t seq = g.next_collective_seq();
  if (g.size() == 1) return Status::Ok();
  Flow f(g, "reduce #" + seq_text(seq) + " to rank " + std::to_string(root), priority);
  auto* bytes = static_cast<std::byte*>(data);
  const auto at = [&](int r) {
    return bytes + blocks.begin[static_cast<std::size_t>(r)] * elem_size;
  };
  const auto len = [&](int r) { return blocks.len[static_cast<std::size_t>(r)] * elem_size; };
  if (g.rank() == root) {
    for (int r = 0; r < g.size(); ++r) {
      if (r != root) f.recv(0, r, collective_tag(seq, 0), at(r), len(r));
    }
  } else {
    f.send(0, root, collective_tag(seq, 0), at(g.rank()), len(g.rank()));
  }
  return f.wait_all();
}

Status gather(Group& g, const void* in, std::size_t in_bytes, void* out,
              const std::vector<std::size_t>& bytes, int root, transport::Priority priority) {
  TICTAC_RETURN_IF_ERROR(check_root(g, root, "gather"));
  if (g.rank() == root) TICTAC_RETURN_IF_ERROR(check_sizes(g, bytes, "gather: the size list"));
  const std::uint64_t seq = g.next_collective_seq();
  Flow f(g, "gather #" + seq_text(seq) + " to rank " + std::to_string(root), priority);
  if (g.rank() != root) {
    f.send(0, root, collective_tag(seq, 0), in, in_bytes);
    return f.wait_all();
  }
  auto* dst = static_cast<std::byte*>(out);
  std::size_t offset = 0;
  for (int r = 0; r < g.size(); ++r) {
    const std::size_t n = bytes[static_cast<std::size_t>(r)];
    if (r == root) {
      if (n != in_bytes) {
        return invalid_argument("gather: the root's own slot has " + std::to_string(n) +
                                " bytes but its input has " + std::to_string(in_bytes));
      }
      copy(dst + offset, in, n);
    } else {
      f.recv(0, r, collective_tag(seq, 0), dst + offset, n);
    }
    offset += n;
  }
  return f.wait_all();
}

Status scatter(Group& g, const void* in, const std::vector<std::size_t>& bytes, void* out,
               std::size_t out_bytes, int root, transport::Priority priority) {
  TICTAC_RETURN_IF_ERROR(check_root(g, root, "scatter"));
  if (g.rank() == root) TICTAC_RETURN_IF_ERROR(check_sizes(g, bytes, "scatter: the size list"));
  const std::uint64_t seq = g.next_collective_seq();
  Flow f(g, "scatter #" + seq_text(seq) + " from rank " + std::to_string(root), priority);
  if (g.rank() != root) {
    f.recv(0, root, collective_tag(seq, 0), out, out_bytes);
    return f.wait_all();
  }
  const auto* src = static_cast<const std::byte*>(in);
  std::size_t offset = 0;
  for (int r = 0; r < g.size(); ++r) {
    const std::size_t n = bytes[static_cast<std::size_t>(r)];
    if (r == root) {
      if (n != out_bytes) {
        return invalid_argument("scatter: the root's own slot has " + std::to_string(n) +
                                " bytes but its output has " + std::to_string(out_bytes));
      }
      copy(out, src + offset, n);
    } else {
      f.send(0, r, collective_tag(seq, 0), src + offset, n);
    }
    offset += n;
  }
  return f.wait_all();
}

Status alltoallv(Group& g, const void* in, const std::vector<std::size_t>& send_offset,
                 const std::vector<std::size_t>& send_bytes, void* out,
                 const std::vector<std::size_t>& recv_offset,
                 const std::vector<std::size_t>& recv_bytes, transport::Priority priority) {
  TICTAC_RETURN_IF_ERROR(check_sizes(g, send_offset, "alltoall: send offsets"));
  TICTAC_RETURN_IF_ERROR(check_sizes(g, send_bytes, "alltoall: send sizes"));
  TICTAC_RETURN_IF_ERROR(check_sizes(g, recv_offset, "alltoall: receive offsets"));
  TICTAC_RETURN_IF_ERROR(check_sizes(g, recv_bytes, "alltoall: receive sizes"));
  const auto me = static_cast<std::size_t>(g.rank());
  if (send_bytes[me] != recv_bytes[me]) {
    return invalid_argument("alltoall: this rank sends itself " + std::to_string(send_bytes[me]) +
                            " bytes but expects " + std::to_string(recv_bytes[me]));
  }
  const std::uint64_t seq = g.next_collective_seq();
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  copy(dst + recv_offset[me], src + send_offset[me], send_bytes[me]);
  Flow f(g, "alltoall #" + seq_text(seq), priority);
  // Start with the right neighbour so that not every rank sends to rank 0 first.
  for (int k = 1; k < g.size(); ++k) {
    const auto to = static_cast<std::size_t>((g.rank() + k) % g.size());
    const auto from = static_cast<std::size_t>((g.rank() - k + g.size()) % g.size());
    f.recv(0, static_cast<int>(from), collective_tag(seq, 0), dst + recv_offset[from],
           recv_bytes[from]);
    f.send(0, static_cast<int>(to), collective_tag(seq, 0), src + send_offset[to], send_bytes[to]);
  }
  return f.wait_all();
}

}  // namespace tictac::group
