#include "transport/ucx/memory.h"

namespace tictac::transport::ucx {

Result<ucs_memory_type_t> memory_type_for(const BufferDesc& desc, std::uint64_t supported) {
  switch (desc.type) {
    case MemoryType::host:
      return UCS_MEMORY_TYPE_HOST;
    case MemoryType::cuda:
      if ((supported & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0) return UCS_MEMORY_TYPE_CUDA;
      return invalid_argument(
          "the UCX backend cannot move CUDA memory (device " + std::to_string(desc.cuda_device) +
          "): the loaded UCX supports only " + describe_memory_types(supported) +
          " memory (Debian's libucx is built without CUDA); register a host staging buffer instead, "
          "or use a CUDA-enabled UCX build");
  }
  return invalid_argument("unknown memory type " + std::to_string(static_cast<int>(desc.type)));
}

std::string describe_memory_types(std::uint64_t supported) {
  std::string out;
  for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t) {
    if ((supported & UCS_BIT(t)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += ucs_memory_type_names[t];
  }
  return out.empty() ? "no" : out;
}

}  // namespace tictac::transport::ucx
