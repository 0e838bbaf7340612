#include "integration/group/priority_table.h"

#include <vector>

namespace tictac::group {
namespace {
thread_local std::vector<std::int64_t> g_thread_priorities;
}  // namespace

void PriorityTable::replace(std::unordered_map<std::int64_t, std::int64_t> table) {
  std::lock_guard lock(mu_);
  table_ = std::move(table);
}

void PriorityTable::update(const std::unordered_map<std::int64_t, std::int64_t>& entries) {
  std::lock_guard lock(mu_);
  for (const auto& [tag, prio] : entries) table_[tag] = prio;
}

void PriorityTable::clear() {
  std::lock_guard lock(mu_);
  table_.clear();
}

std::size_t PriorityTable::size() const {
  std::lock_guard lock(mu_);
  return table_.size();
}

std::int64_t PriorityTable::lookup(std::int64_t tag) const {
  if (!g_thread_priorities.empty()) return g_thread_priorities.back();
  std::lock_guard lock(mu_);
  const auto it = table_.find(tag);
  return it == table_.end() ? kDefaultPriority : it->second;
}

void PriorityTable::push_thread_priority(std::int64_t priority) {
  g_thread_priorities.push_back(priority);
}

bool PriorityTable::pop_thread_priority() {
  if (g_thread_priorities.empty()) return false;
  g_thread_priorities.pop_back();
  return true;
}

std::optional<std::int64_t> PriorityTable::thread_priority() {
  if (g_thread_priorities.empty()) return std::nullopt;
  return g_thread_priorities.back();
}

}  // namespace tictac::group
