// Memory types for the UCX backend (internal): which buffers it can move, stated explicitly to
// UCX on every operation instead of letting UCX guess from the pointer.
//
// Debian's libucx (1.13) is built without CUDA: it would treat a device pointer as host memory
// and fault or corrupt data. So a CUDA buffer is refused with a message that says why and what to
// do, unless the loaded UCX reports the CUDA memory type. Pure functions; thread-safe.
#pragma once

#include <ucs/memory/memory_type.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "transport/memory_region.h"

namespace tictac::transport::ucx {

// The UCS memory type to pass to UCX for `desc`, given the memory types the loaded UCX supports
// (UCS_BIT mask from ucp_context_query). invalid_argument for a type it cannot move.
Result<ucs_memory_type_t> memory_type_for(const BufferDesc& desc, std::uint64_t supported);

// "host", "host, cuda", ...
std::string describe_memory_types(std::uint64_t supported);

}  // namespace tictac::transport::ucx
