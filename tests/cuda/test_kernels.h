// Kernels for the real-GPU tests (test_kernels.cu, compiled by nvcc). Each returns the launch's
// cudaError_t as an int (0 = launched).
#pragma once

#include <cstddef>

extern "C" {
// dst[i] = src[i] for i < n 32-bit words, on `stream` (a cudaStream_t).
int tictac_test_copy_words(const void* src, void* dst, std::size_t n, void* stream);
// *out = *word, read by a device thread (e.g. a flag's error word through its device address).
int tictac_test_read_word(const void* word, void* out, void* stream);
}
