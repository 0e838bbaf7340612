#include "integration/group/ring.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/tunables.h"
#include "integration/group/flow.h"
#include "integration/group/tags.h"

namespace tictac::group {
namespace {

const SizeTunable kChunkBytesTunable{
    "TICTAC_RING_CHUNK_BYTES", kRingChunkBytes,
    "ring collectives (allreduce, reduce-scatter, allgather of the torch backend): bytes per "
    "pipelined chunk of each rank's block (at most 32 chunks a block)"};

const BoolTunable kEarlyRecv{
    "TICTAC_RING_EARLY_RECV", true,
    "ring collectives: post each step's receive a step early, so the left neighbour's send finds "
    "it advertised and goes without a READY round trip (0 = post it with the step's send)"};

const SizeTunable kEarlyScratchTunable{
    "TICTAC_RING_EARLY_SCRATCH_BYTES", kRingEarlyScratchBytes,
    "ring reduce-scatter: most scratch bytes per collective for receiving a step early (two "
    "slots a block in place, three out of place); a bigger block waits a READY per step"};

struct RingTunables {
  std::size_t chunk_bytes;
  bool early;
  std::size_t early_scratch;
};
Result<RingTunables> ring_tunables() {
  Result<std::uint64_t> chunk = kChunkBytesTunable.get();
  if (!chunk.ok()) return chunk.status();
  Result<bool> early = kEarlyRecv.get();
  if (!early.ok()) return early.status();
  Result<std::uint64_t> scratch = kEarlyScratchTunable.get();
  if (!scratch.ok()) return scratch.status();
  return RingTunables{std::max<std::size_t>(*chunk, 1), *early, *scratch};
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// Sub-range j of `len` elements split k ways.
struct Range {
  std::size_t begin;
  std::size_t len;
};
Range split(std::size_t len, int k, int j) {
  const std::size_t base = len / static_cast<std::size_t>(k);
  const std::size_t rem = len % static_cast<std::size_t>(k);
  const auto uj = static_cast<std::size_t>(j);
  return {uj * base + std::min(uj, rem), base + (uj < rem ? 1 : 0)};
}

// The ring of one collective. Steps [0, n-1) are reduce-scatter, [n-1, 2(n-1)) allgather; a run
// covers steps [first, last). Shifted so that rank r ends reduce-scatter holding block r:
//   reduce-scatter step s: send block r-s-1, receive block r-s-2 (into scratch, then reduce)
//   allgather step t:      send block r-t,   receive block r-t-1 (in place)
// Out of place (`in` set, reduce-scatter only): `in` is only read and `data` is the output
// (block r's length). Each step's partial sum stays in its scratch slot: a received piece is
// reduced with `in`'s piece into its slot and sent from there at the next step, and the last
// step receives straight into `data`. A slot is sent one step after it was filled, so there are
// two slots per chunk, or three when the next receive is posted a step early.
class Ring {
 public:
  Ring(Group& g, std::byte* data, const Blocks& blocks, std::size_t elem, const ReduceFn* reduce,
       transport::Priority priority, const std::string& what, int first, int last,
       std::size_t chunk_bytes, bool early, std::size_t early_scratch,
       const std::byte* in = nullptr, const BeforeSend* before_send = nullptr,
       const ReduceFn* last_reduce = nullptr)
      : group_(g),
        data_(data),
        in_(in),
        before_send_(before_send != nullptr && *before_send ? before_send : nullptr),
        blocks_(blocks),
        elem_(elem),
        reduce_(reduce),
        last_reduce_(last_reduce != nullptr && *last_reduce ? last_reduce : reduce),
        first_(first),
        last_(last),
        early_(early),
        n_(g.size()),
        r_(g.rank()),
        seq_(g.next_collective_seq()),
        flow_(g, what + " #" + seq_text(seq_), priority) {
    const std::size_t max_bytes = blocks.max_len() * elem;
    const int steps = 2 * (n_ - 1);
    const int tag_limit = std::max(1, (kMaxCollectiveSteps - 1) / std::max(1, steps));
    chunks_ = static_cast<int>(
        std::clamp<std::size_t>((max_bytes + chunk_bytes - 1) / chunk_bytes, 1,
                                static_cast<std::size_t>(std::min(kRingMaxChunks, tag_limit))));
    if (first_ < n_ - 1) {
      chunk_slot_ = (blocks.max_len() + static_cast<std::size_t>(chunks_) - 1) /
                    static_cast<std::size_t>(chunks_);
      // In place: two slots per chunk (the next step's receive is posted while this step's piece
      // waits to be reduced) unless that would exceed kRingEarlyScratchBytes. Out of place:
      // one more (see above).
      const std::size_t one = chunk_slot_ * static_cast<std::size_t>(chunks_) * elem;
      const int base = in_ != nullptr ? 2 : 1;
      slots_ =
          early_ && static_cast<std::size_t>(base + 1) * one <= early_scratch ? base + 1 : base;
      // From the group's pool: no fresh pages to fault in per call; not zeroed, since every byte
      // read was received first (a block's worth of memset per call).
      scratch_ = g.scratch().acquire(one * static_cast<std::size_t>(slots_));
    }
    step_.assign(static_cast<std::size_t>(chunks_), first_);
    units_.assign(static_cast<std::size_t>(chunks_) * 2, nullptr);
  }

  Status run() {
    if (n_ == 1 || first_ >= last_) return Status::Ok();
    group_.begin_batch();  // every chunk's first step reaches the loop as one task
    if (before_send_ != nullptr) {
      // Receives first, so peers that are ready send into them while this rank waits.
      for (int j = 0; j < chunks_; ++j) open_step(j, first_);
      group_.end_batch();
      Status ready = (*before_send_)();
      if (!ready.ok()) return ready;  // ~Flow cancels the receives
      group_.begin_batch();
    }
    for (int j = 0; j < chunks_; ++j) {
      if (before_send_ == nullptr) open_step(j, first_);
      post(j);
    }
    group_.end_batch();
    while (flow_.outstanding() > 0) {
      Result<std::uint64_t> key = flow_.next();
      if (!key.ok()) return key.status();
      const int j = static_cast<int>(*key);  // chunk j's send and receive of its step are done
      const int s = step_[static_cast<std::size_t>(j)];
      if (s < n_ - 1) {  // reduce-scatter: fold the received piece in
        const Range piece = chunk(recv_block(s), j);
        const ReduceFn& fold = s == n_ - 2 ? *last_reduce_ : *reduce_;  // block r is complete
        if (piece.len > 0 && in_ == nullptr) {
          fold(data_ + piece.begin * elem_, slot(j, s), piece.len);
        } else if (piece.len > 0) {
          fold(recv_dst(j, s), in_ + piece.begin * elem_, piece.len);
        }
      }
      if (++step_[static_cast<std::size_t>(j)] < last_) {
        group_.begin_batch();
        post(j);
        group_.end_batch();
      }
    }
    return Status::Ok();
  }

 private:
  int send_block(int s) const {
    return s < n_ - 1 ? mod(r_ - s - 1, n_) : mod(r_ - (s - (n_ - 1)), n_);
  }
  int recv_block(int s) const {
    return s < n_ - 1 ? mod(r_ - s - 2, n_) : mod(r_ - (s - (n_ - 1)) - 1, n_);
  }
  // Chunk j of block b, as absolute elements of the buffer.
  Range chunk(int b, int j) const {
    const Range in = split(blocks_.len[static_cast<std::size_t>(b)], chunks_, j);
    return {blocks_.begin[static_cast<std::size_t>(b)] + in.begin, in.len};
  }
  // Chunk j's scratch for the piece received at reduce-scatter step s.
  std::byte* slot(int j, int s) {
    const std::size_t k = static_cast<std::size_t>(s % slots_);
    return scratch_.data() +
           (k * static_cast<std::size_t>(chunks_) + static_cast<std::size_t>(j)) * chunk_slot_ *
               elem_;
  }
  Flow::Unit& unit(int j, int s) {
    return units_[static_cast<std::size_t>(j) * 2 + static_cast<std::size_t>(s % 2)];
  }
  // Whether step s's receive may be posted while step s - 1 is still open. Allgather steps land
  // in place, in a block that no open step reads: the first one (block r-1) was last sent at
  // reduce-scatter step 0, so with 2 ranks (where step 0 is step s - 1) it must wait.
  // Reduce-scatter steps need the second scratch slot.
  bool early(int s) const {
    if (!early_ || s >= last_) return false;
    if (s >= n_ - 1) return s > n_ - 1 || n_ > 2;
    return slots_ == (in_ != nullptr ? 3 : 2);
  }

  // Where chunk j's piece of step s lands: reduce-scatter scratch, except the out-of-place last
  // step (block r, into the output); allgather in place.
  std::byte* recv_dst(int j, int s) {
    const Range in = chunk(recv_block(s), j);
    if (s >= n_ - 1) return data_ + in.begin * elem_;
    if (in_ != nullptr && s == n_ - 2) {
      return data_ + (in.begin - blocks_.begin[static_cast<std::size_t>(r_)]) * elem_;
    }
    return slot(j, s);
  }
  // What chunk j sends at step s: its block of the buffer, or out of place the input's block at
  // step 0 and then the slot the previous step's partial sum is in.
  const std::byte* send_src(int j, int s) {
    if (in_ != nullptr && s > 0) return slot(j, s - 1);
    const Range out = chunk(send_block(s), j);
    return (in_ != nullptr ? in_ : data_) + out.begin * elem_;
  }

  // Opens chunk j's step s (a send and a receive) and posts its receive.
  void open_step(int j, int s) {
    unit(j, s) = flow_.open_unit(2);
    const Range in = chunk(recv_block(s), j);
    flow_.recv_in(unit(j, s), static_cast<std::uint64_t>(j), mod(r_ - 1, n_), tag(j, s),
                  recv_dst(j, s), in.len * elem_);
  }

  // Posts chunk j's send of its current step s (whose receive is posted), and the receive of
  // step s + 1 if it may go early: it is then posted a whole step before the left neighbour
  // sends into it, so that send claims the advertised buffer and its data leaves at once,
  // instead of waiting a READY round trip behind whatever else fills the links.
  void post(int j) {
    const int s = step_[static_cast<std::size_t>(j)];
    if (!unit(j, s)) open_step(j, s);
    const Range out = chunk(send_block(s), j);
    flow_.send_in(unit(j, s), static_cast<std::uint64_t>(j), mod(r_ + 1, n_), tag(j, s),
                  send_src(j, s), out.len * elem_);
    unit(j, s) = nullptr;
    if (early(s + 1)) open_step(j, s + 1);
  }
  std::uint64_t tag(int j, int s) const { return collective_tag(seq_, s * chunks_ + j); }

  Group& group_;
  std::byte* data_;
  const std::byte* in_;  // out of place: the input (data_ is then the output)
  const BeforeSend* before_send_;  // null: none
  const Blocks& blocks_;
  std::size_t elem_;
  const ReduceFn* reduce_;
  const ReduceFn* last_reduce_;  // the last reduce-scatter step's fold (reduce_ unless given)
  int first_, last_;
  bool early_;  // TICTAC_RING_EARLY_RECV
  int n_, r_;
  std::uint64_t seq_;
  // Declared before flow_ so that it outlives it: ~Flow waits for the transfers into it to end.
  ScratchPool::Lease scratch_;
  Flow flow_;
  int chunks_ = 1;
  int slots_ = 1;               // scratch slots per chunk (2: receives go a step early)
  std::size_t chunk_slot_ = 0;  // elements per scratch slot
  std::vector<int> step_;  // by chunk: the step it is in
  std::vector<Flow::Unit> units_;  // by chunk and step parity: opened, send not yet posted
};

}  // namespace

Blocks Blocks::even(std::size_t count, int n) {
  Blocks b;
  for (int k = 0; k < n; ++k) {
    const Range r = split(count, n, k);
    b.begin.push_back(r.begin);
    b.len.push_back(r.len);
  }
  return b;
}

Blocks Blocks::equal(std::size_t len, int n) {
  Blocks b;
  for (int k = 0; k < n; ++k) {
    b.begin.push_back(static_cast<std::size_t>(k) * len);
    b.len.push_back(len);
  }
  return b;
}

std::size_t Blocks::max_len() const {
  return len.empty() ? 0 : *std::max_element(len.begin(), len.end());
}

Status ring_reduce_scatter(Group& g, void* data, const Blocks& blocks, std::size_t elem_size,
                           const ReduceFn& reduce, transport::Priority priority,
                           const std::string& what) {
  Result<RingTunables> t = ring_tunables();
  if (!t.ok()) return t.status();
  Ring ring(g, static_cast<std::byte*>(data), blocks, elem_size, &reduce, priority, what, 0,
            g.size() - 1, t->chunk_bytes, t->early, t->early_scratch);
  return ring.run();
}

Status ring_reduce_scatter_into(Group& g, const void* in, void* out, const Blocks& blocks,
                                std::size_t elem_size, const ReduceFn& reduce,
                                transport::Priority priority, const std::string& what,
                                const BeforeSend& before_send, const ReduceFn* last_reduce) {
  Result<RingTunables> t = ring_tunables();
  if (!t.ok()) return t.status();
  auto* dst = static_cast<std::byte*>(out);
  if (g.size() == 1) {
    if (before_send) {
      Status ready = before_send();
      if (!ready.ok()) return ready;
    }
    const std::size_t bytes = blocks.len[0] * elem_size;
    if (bytes > 0)
      std::memmove(dst, static_cast<const std::byte*>(in) + blocks.begin[0] * elem_size, bytes);
    return Status::Ok();
  }
  Ring ring(g, dst, blocks, elem_size, &reduce, priority, what, 0, g.size() - 1, t->chunk_bytes,
            t->early, t->early_scratch, static_cast<const std::byte*>(in), &before_send,
            last_reduce);
  return ring.run();
}

Status ring_allgather(Group& g, void* data, const Blocks& blocks, std::size_t elem_size,
                      transport::Priority priority, const std::string& what,
                      const BeforeSend& before_send) {
  Result<RingTunables> t = ring_tunables();
  if (!t.ok()) return t.status();
  if (g.size() == 1) return before_send ? before_send() : Status::Ok();
  Ring ring(g, static_cast<std::byte*>(data), blocks, elem_size, nullptr, priority, what,
            g.size() - 1, 2 * (g.size() - 1), t->chunk_bytes, t->early, t->early_scratch, nullptr,
            &before_send);
  return ring.run();
}

Status ring_allreduce(Group& g, void* data, std::size_t count, std::size_t elem_size,
                      const ReduceFn& reduce, transport::Priority priority,
                      const std::string& what) {
  const Blocks blocks = Blocks::even(count, g.size());
  Result<RingTunables> t = ring_tunables();
  if (!t.ok()) return t.status();
  Ring ring(g, static_cast<std::byte*>(data), blocks, elem_size, &reduce, priority, what, 0,
            2 * (g.size() - 1), t->chunk_bytes, t->early, t->early_scratch);
  return ring.run();
}

}  // namespace tictac::group
