// The real CUDA API table: the front door to the machine's CUDA.
//
// Contract: open_runtime_api() never fails and never aborts. It probes the driver and the
// devices once; when CUDA is usable it returns the real table (the CUDA runtime is linked
// statically, driver entry points such as cuStreamWaitValue32 are resolved at run time with
// cudaGetDriverEntryPointByVersion, and the binary never links -lcuda, so it starts on machines
// without a driver). Otherwise it returns make_unavailable_api() with the reason, e.g.
// "CUDA not viable: no driver: libcuda.so.1 not found (...) (cudaGetDeviceCount:
// cudaErrorInsufficientDriver=35)". The probe may block for the duration of driver start-up
// (call it at set-up time, not from the progress loop). The returned table is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "cuda/api.h"

namespace tictac::cuda {

std::unique_ptr<Api> open_runtime_api();

// "CUDA toolkit 13.0 (runtime linked statically)" or "built without the CUDA toolkit".
std::string build_description();

}  // namespace tictac::cuda
