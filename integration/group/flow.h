// Flow: the transfers of one collective on one rank. Each transfer is posted with a caller's
// key; next() hands back keys one at a time as transfers finish, so a pipelined algorithm can
// act on every chunk as soon as it lands (reduce it, post the next step) instead of waiting for
// a whole step.
//
//   Flow f(group, "allreduce #3", priority);
//   f.send(key, dst, tag, buf, bytes);  f.recv(key2, src, tag, buf2, bytes2);
//   while (f.outstanding() > 0) { Result<std::uint64_t> k = f.next(); ... }
//
// Contract: one thread uses a Flow (the group's collective thread). Every send leaves with the
// Flow's priority. The deadline is the group timeout from construction. On the first failure
// or at the deadline, next()/wait_all() cancel every outstanding transfer, wait until the
// transport has let go of their buffers, and return an error naming the collective and the
// ranks involved (a received size that differs from the posted one is a protocol_error: the
// ranks called the collective with different sizes). The destructor does the same for anything
// still outstanding, so buffers are never touched after the Flow is gone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/types.h"

namespace tictac::group {

class Group;

class Flow {
 public:
  Flow(Group& group, std::string what, transport::Priority priority);
  ~Flow();
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  void send(std::uint64_t key, int dst, std::uint64_t tag, const void* data, std::size_t bytes);
  void recv(std::uint64_t key, int src, std::uint64_t tag, void* data, std::size_t bytes);
  // A send and a receive as one unit: next() hands `key` back once, when both finished, so the
  // waiting thread wakes once per pair instead of once per transfer (a ring step). Both reach
  // the transport's loop as one task (a batch). Counts as one in outstanding().
  void exchange(std::uint64_t key, int dst, std::uint64_t send_tag, const void* send_data,
                std::size_t send_bytes, int src, std::uint64_t recv_tag, void* recv_data,
                std::size_t recv_bytes);
  // A unit whose transfers are posted at different times: open_unit(key, n) counts one in
  // outstanding(), and next() hands `key` back once, when all `n` transfers posted with
  // send_in/recv_in finished (a ring posts the next step's receive a step early, so the peer's
  // send finds it posted; the send joins the unit later). Each of the n must be posted.
  using Unit = std::shared_ptr<int>;
  Unit open_unit(int transfers);
  void send_in(const Unit& unit, std::uint64_t key, int dst, std::uint64_t tag, const void* data,
               std::size_t bytes);
  void recv_in(const Unit& unit, std::uint64_t key, int src, std::uint64_t tag, void* data,
               std::size_t bytes);

  // The key of a finished transfer (in finishing order), or the collective's error.
  Result<std::uint64_t> next();
  // Waits for every outstanding transfer.
  Status wait_all();
  int outstanding() const { return outstanding_; }
  const std::string& what() const { return what_; }

 private:
  struct State;
  // `unit_left`: the unit's transfers not yet finished (shared by its transfers), or null for a
  // transfer that is a unit of its own.
  void post(bool is_send, std::uint64_t key, int rank, std::uint64_t tag, void* data,
            std::size_t bytes, std::shared_ptr<int> unit_left = nullptr);
  // Cancels what is outstanding and waits until none is left.
  void abort();

  Group& group_;
  std::string what_;
  transport::Priority priority_;
  std::chrono::steady_clock::time_point deadline_;
  std::shared_ptr<State> state_;
  std::vector<transport::RequestId> ids_;
  int outstanding_ = 0;  // units posted and not yet returned by next()
};

}  // namespace tictac::group
