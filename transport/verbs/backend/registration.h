// RegistrationCache: memory registrations of one protection domain, registered once and shared.
//
// acquire() returns a live registration that covers the requested range with at least the
// requested access when one exists (reference-counted through shared_ptr), and registers the
// range otherwise; the last reference deregisters it. Registration pins memory and is slow, so
// long-lived buffers (receive rings, staging rings, and in a zero-copy design the users'
// parameter buffers) are registered once and reused by every transfer that touches them.
//
// Errors: reg_mr failures are Status values naming the range and errno; ENOMEM is
// resource_exhausted with the usual cause, the locked-memory limit (`ulimit -l`).
// Threading: loop-thread only (no locks). Lifetime: the cache must outlive every registration it
// handed out (the Device owns the cache; endpoints hold the Device).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/status.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

class Registration {
 public:
  Registration(const IbvApi& api, ibv_mr* mr, int access) : api_(api), mr_(mr), access_(access) {}
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  std::uint32_t lkey() const { return mr_->lkey; }
  std::uint32_t rkey() const { return mr_->rkey; }
  std::uintptr_t begin() const { return reinterpret_cast<std::uintptr_t>(mr_->addr); }
  std::size_t length() const { return mr_->length; }
  int access() const { return access_; }
  bool covers(const void* addr, std::size_t len, int access) const;

 private:
  const IbvApi& api_;
  ibv_mr* mr_;
  int access_;
};

class RegistrationCache {
 public:
  RegistrationCache(const IbvApi& api, ibv_pd* pd) : api_(api), pd_(pd) {}
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // `what` names the buffer in errors ("receive ring for peer ...").
  Result<std::shared_ptr<const Registration>> acquire(void* addr, std::size_t len, int access,
                                                      const std::string& what);
  // Registrations alive now (handed out and not yet released).
  std::size_t live() const;

 private:
  const IbvApi& api_;
  ibv_pd* pd_;
  // Start address -> registrations starting there (weak: the holders own them).
  std::multimap<std::uintptr_t, std::weak_ptr<const Registration>> entries_;
};

}  // namespace tictac::verbs
