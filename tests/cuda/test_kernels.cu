// Consumer kernels for the real-GPU tests: they stand in for a layer's kernels that must start
// only after the layer's parameters arrived.
#include <cuda_runtime.h>

#include "tests/cuda/test_kernels.h"

namespace {

__global__ void copy_words(const unsigned* src, unsigned* dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

__global__ void read_word(const unsigned* word, unsigned* out) { *out = *word; }

}  // namespace

extern "C" int tictac_test_copy_words(const void* src, void* dst, size_t n, void* stream) {
  copy_words<<<64, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const unsigned*>(src),
                                                                static_cast<unsigned*>(dst), n);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int tictac_test_read_word(const void* word, void* out, void* stream) {
  read_word<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const unsigned*>(word),
                                                            static_cast<unsigned*>(out));
  return static_cast<int>(cudaGetLastError());
}
