// The API table of a build without the CUDA toolkit (meson found no toolkit, or -Dcuda=disabled):
// the layer still builds and links, and every request reports why CUDA is not viable.
#include "cuda/runtime_api.h"

namespace tictac::cuda {

std::unique_ptr<Api> open_runtime_api() {
  return make_unavailable_api(not_viable(
      "built without the CUDA toolkit (reconfigure with -Dcuda=enabled and nvcc on PATH or the "
      "toolkit in /usr/local/cuda)"));
}

std::string build_description() { return "built without the CUDA toolkit"; }

}  // namespace tictac::cuda
