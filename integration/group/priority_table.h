// PriorityTable: the scheduler's tag -> priority map for one rank group, plus a per-thread
// override set by a scoped guard (Python: `with tictac.torch.priority(p):`).
// Lookup order for a send: the calling thread's innermost override, else the table, else the
// default (0). Smaller = sent first, as in priority::Schedule.
// Thread safety: every method may be called from any thread; overrides are per thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace tictac::group {

class PriorityTable {
 public:
  static constexpr std::int64_t kDefaultPriority = 0;

  // Replaces the whole table (a new schedule for the next iteration).
  void replace(std::unordered_map<std::int64_t, std::int64_t> table);
  // Adds or changes entries, keeping the others.
  void update(const std::unordered_map<std::int64_t, std::int64_t>& entries);
  void clear();
  std::size_t size() const;
  // The priority a send with `tag` gets on the calling thread now.
  std::int64_t lookup(std::int64_t tag) const;

  // Per-thread override, innermost first; nests.
  static void push_thread_priority(std::int64_t priority);
  // Removes the innermost override; false when there was none.
  static bool pop_thread_priority();
  static std::optional<std::int64_t> thread_priority();

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::int64_t, std::int64_t> table_;  // guarded by mu_
};

}  // namespace tictac::group
