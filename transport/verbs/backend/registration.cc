#include "transport/verbs/backend/registration.h"

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace tictac::verbs {

Registration::~Registration() {
  if (const int rc = api_.dereg_mr(mr_); rc != 0) {
    // Only a bug (a region still used by a QP on some drivers) gets here; the memory stays pinned.
    TICTAC_LOG(warn) << "ibv_dereg_mr failed: " << std::strerror(rc);
  }
}

bool Registration::covers(const void* addr, std::size_t len, int access) const {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  return a >= begin() && len <= length() && a - begin() <= length() - len &&
         (access_ & access) == access;
}

Result<std::shared_ptr<const Registration>> RegistrationCache::acquire(void* addr, std::size_t len,
                                                                      int access,
                                                                      const std::string& what) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  // Candidates start at or before `addr`; drop expired entries on the way.
  for (auto it = entries_.begin(); it != entries_.end() && it->first <= a;) {
    std::shared_ptr<const Registration> r = it->second.lock();
    if (!r) {
      it = entries_.erase(it);
      continue;
    }
    if (r->covers(addr, len, access)) return r;
    ++it;
  }
  errno = 0;
  ibv_mr* mr = api_.reg_mr(pd_, addr, len, access);
  if (mr == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    std::string msg = "cannot register the " + what + " (" + std::to_string(len) +
                      " bytes) with the RDMA device: ibv_reg_mr: " + std::strerror(err);
    if (err == ENOMEM) {
      msg += "; registration pins memory and the locked-memory limit is probably too low: check "
             "`ulimit -l` (RLIMIT_MEMLOCK) and raise it (memlock unlimited in "
             "/etc/security/limits.conf, or --ulimit memlock=-1 for containers), or lower "
             "TICTAC_VERBS_RING_SLOTS / TICTAC_VERBS_SLOT_BYTES";
      return Status(StatusCode::resource_exhausted, msg, "ibv_reg_mr errno=" + std::to_string(err));
    }
    return Status(StatusCode::internal, msg, "ibv_reg_mr errno=" + std::to_string(err));
  }
  auto reg = std::make_shared<const Registration>(api_, mr, access);
  entries_.emplace(a, reg);
  return reg;
}

std::size_t RegistrationCache::live() const {
  std::size_t n = 0;
  for (const auto& [addr, weak] : entries_) n += weak.expired() ? 0 : 1;
  return n;
}

}  // namespace tictac::verbs
