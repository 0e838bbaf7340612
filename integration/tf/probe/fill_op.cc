// TicTac TF probe (b): custom ops written against TF's stable C kernel API only
// (tensorflow/c/kernels.h + tensorflow/c/ops.h); no C++ TF headers, so no
// C++ ABI coupling to the wheel.
//
//   TictacFill(base: float, n: int)      -> out: float[n], out[i] = fill_value(base, i)
//   TictacFillAsync(base: float, n: int) -> same, via TF_NewAsyncKernelBuilder; the work
//                                           runs on another thread but done is run
//                                           BEFORE compute_async returns (see below).
//   TictacFillDeferred(base, n)          -> same, but done runs on the worker thread
//                                           AFTER compute_async returned: the real
//                                           async pattern. Crashes with TF 2.21: the
//                                           C API passes &done of a by-value
//                                           std::function parameter of
//                                           CAsyncOpKernel::ComputeAsync, so the
//                                           TF_AsyncOpKernelDoneCallback* dangles once
//                                           compute_async returns. The probe runs it
//                                           only in a child process.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

namespace {

// The "C++ function" the tensor is filled from. In the adapter this is where a
// pulled parameter buffer from the tictac transport would be copied out.
float fill_value(float base, int64_t i) { return base + 0.5f * static_cast<float>(i); }

struct FillKernel {
  int64_t n = 0;
};

void* fill_create(TF_OpKernelConstruction* ctx) {
  auto* k = new FillKernel;
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrInt64(ctx, "n", &k->n, st);
  if (TF_GetCode(st) != TF_OK) TF_OpKernelConstruction_Failure(ctx, st);
  TF_DeleteStatus(st);
  return k;
}

void fill_delete(void* k) { delete static_cast<FillKernel*>(k); }

// Shared body: read the scalar input, allocate output 0, fill it.
void fill_body(FillKernel* k, TF_OpKernelContext* ctx) {
  TF_Status* st = TF_NewStatus();
  TF_Tensor* in = nullptr;
  TF_GetInput(ctx, 0, &in, st);
  if (TF_GetCode(st) != TF_OK) { TF_OpKernelContext_Failure(ctx, st); TF_DeleteStatus(st); return; }
  const float base = *static_cast<float*>(TF_TensorData(in));
  TF_DeleteTensor(in);
  int64_t dims[1] = {k->n};
  TF_Tensor* out = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, 1, sizeof(float) * k->n, st);
  if (TF_GetCode(st) != TF_OK) { TF_OpKernelContext_Failure(ctx, st); TF_DeleteStatus(st); return; }
  float* p = static_cast<float*>(TF_TensorData(out));
  for (int64_t i = 0; i < k->n; ++i) p[i] = fill_value(base, i);
  TF_DeleteTensor(out);
  TF_DeleteStatus(st);
}

void fill_compute(void* k, TF_OpKernelContext* ctx) { fill_body(static_cast<FillKernel*>(k), ctx); }

// Async builder, done run before returning: work on another thread, join, done.
void fill_compute_async(void* k, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  std::thread t([k, ctx] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // "waiting for the pull"
    fill_body(static_cast<FillKernel*>(k), ctx);
  });
  t.join();
  TF_RunAsyncOpKernelDoneCallback(done);
}

// True async: return at once, finish on another thread, then call done.
void fill_compute_deferred(void* k, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  std::thread([k, ctx, done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    fill_body(static_cast<FillKernel*>(k), ctx);
    TF_RunAsyncOpKernelDoneCallback(done);  // done may already be gone: use-after-return
  }).detach();
}

void unknown_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, st);
}

enum Mode { kSync, kAsync, kDeferred };

void register_op(const char* name, Mode mode) {
  TF_Status* st = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  TF_OpDefinitionBuilderAddInput(b, "base: float");
  TF_OpDefinitionBuilderAddAttr(b, "n: int >= 0");
  TF_OpDefinitionBuilderAddOutput(b, "out: float");
  TF_OpDefinitionBuilderSetIsStateful(b, mode != kSync);  // no constant folding
  TF_OpDefinitionBuilderSetShapeInferenceFunction(b, &unknown_shape);
  TF_RegisterOpDefinition(b, st);
  if (TF_GetCode(st) != TF_OK) std::fprintf(stderr, "tictac probe: op %s: %s\n", name, TF_Message(st));

  TF_KernelBuilder* kb =
      mode == kSync    ? TF_NewKernelBuilder(name, "CPU", &fill_create, &fill_compute, &fill_delete)
      : mode == kAsync ? TF_NewAsyncKernelBuilder(name, "CPU", &fill_create, &fill_compute_async,
                                                  &fill_delete)
                       : TF_NewAsyncKernelBuilder(name, "CPU", &fill_create,
                                                  &fill_compute_deferred, &fill_delete);
  TF_RegisterKernelBuilder((std::string(name) + "Kernel").c_str(), kb, st);
  if (TF_GetCode(st) != TF_OK) std::fprintf(stderr, "tictac probe: kernel %s: %s\n", name, TF_Message(st));
  TF_DeleteStatus(st);
}

// Runs when tf.load_op_library dlopens us.
struct Registrar {
  Registrar() {
    register_op("TictacFill", kSync);
    register_op("TictacFillAsync", kAsync);
    register_op("TictacFillDeferred", kDeferred);
  }
} registrar;

}  // namespace
