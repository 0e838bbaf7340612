// UcpContext: the process's UCP context for one UCX backend (internal): ucp_init with active
// messages and wake-up (event fd) support, configured from the UCX_* environment (UCX_TLS selects
// the transports: tcp, shm, ...).
//
// Thread safety: immutable after create(); any thread may read it. Ownership: shared by the
// backend and its worker; ucp_cleanup runs when the last owner goes.
// Errors: create() returns unavailable with UCX's reason when the configuration cannot be read or
// ucp_init fails (the backend then reports "ucx not viable: <reason>").
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tictac::transport::ucx {

class UcpContext {
 public:
  static Result<std::shared_ptr<UcpContext>> create();
  ~UcpContext();
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;

  ucp_context_h handle() const { return context_; }
  // Bit mask of UCS_BIT(ucs_memory_type_t) this UCX build can move.
  std::uint64_t memory_types() const { return memory_types_; }
  // "UCX 1.13.1 (memory: host), UCX_TLS=tcp, rendezvous get_zcopy".
  const std::string& description() const { return description_; }

 private:
  UcpContext(ucp_context_h context, std::uint64_t memory_types, std::string description)
      : context_(context), memory_types_(memory_types), description_(std::move(description)) {}
  ucp_context_h context_;
  std::uint64_t memory_types_;
  std::string description_;
};

}  // namespace tictac::transport::ucx
