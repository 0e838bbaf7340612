// Helpers shared by the TF op library's translation units (contract in op_support.h).
#include "integration/tf/op_support.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>

#include "transport/bootstrap/file_store.h"
#include "transport/bootstrap/tcp_store.h"
#include "transport/bootstrap/tcp_store_server.h"

namespace tictac::tf_ops {
namespace {

namespace bootstrap = tictac::bootstrap;

struct Session {
  std::string config;  // "rank/size/store/prefix" for the idempotence check
  std::unique_ptr<bootstrap::TcpStoreServer> store_server;
  std::unique_ptr<bootstrap::Store> store;
  std::unique_ptr<group::Group> group;
};

std::mutex g_mu;
// Leaked on purpose: never destroyed by static destructors (the Python layer closes it at exit
// through tictac_tf_shutdown()).
Session* g_session = nullptr;
std::uint64_t g_generation = 0;

Result<std::unique_ptr<bootstrap::Store>> open_store(Session& session, int rank,
                                                     const std::string& store_spec,
                                                     std::int64_t timeout_ms) {
  if (store_spec.rfind("file:", 0) == 0) {
    auto store = bootstrap::FileStore::open(store_spec.substr(5));
    if (!store.ok()) return store.status();
    return std::unique_ptr<bootstrap::Store>(std::move(*store));
  }
  if (store_spec.rfind("tcp:", 0) != 0) {
    return Status(StatusCode::invalid_argument,
                  "TictacInit: store '" + store_spec + "' must be file:DIR or tcp:HOST:PORT");
  }
  const std::string hp = store_spec.substr(4);
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos) {
    return Status(StatusCode::invalid_argument,
                  "TictacInit: store '" + store_spec + "' is not tcp:HOST:PORT");
  }
  const std::string host = hp.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(hp.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port <= 0 || port > 65535) {
    return Status(StatusCode::invalid_argument, "TictacInit: bad port in store '" + store_spec + "'");
  }
  if (rank == 0) {
    bootstrap::TcpStoreServerOptions so;
    so.host = host;
    so.port = static_cast<std::uint16_t>(port);
    auto server = bootstrap::TcpStoreServer::start(so);
    if (!server.ok()) return server.status();
    session.store_server = std::move(*server);
  }
  bootstrap::TcpStoreOptions co;
  co.connect_timeout = bootstrap::Millis{timeout_ms};
  auto store = bootstrap::TcpStore::connect(host, static_cast<std::uint16_t>(port), co);
  if (!store.ok()) return store.status();
  return std::unique_ptr<bootstrap::Store>(std::move(*store));
}

void unknown_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, st);
}

}  // namespace

Status open_session(int rank, int size, const std::string& store_spec, std::int64_t timeout_ms,
                    const std::string& prefix) {
  const std::string config = std::to_string(rank) + "/" + std::to_string(size) + "/" +
                             store_spec + "/" + prefix;
  std::lock_guard lock(g_mu);
  if (g_session != nullptr) {
    if (g_session->config == config) return Status::Ok();
    return Status(StatusCode::invalid_argument,
                  "TictacInit: already initialized as " + g_session->config + "; requested " +
                      config + " (call TictacShutdown first)");
  }
  auto session = std::make_unique<Session>();
  session->config = config;
  auto store = open_store(*session, rank, store_spec, timeout_ms);
  if (!store.ok()) return store.status();
  session->store = std::move(*store);
  group::GroupOptions go;
  go.rank = rank;
  go.size = size;
  go.timeout = std::chrono::milliseconds(timeout_ms);
  go.key_prefix = prefix;
  auto created = group::Group::create(*session->store, go);
  if (!created.ok()) return created.status();
  session->group = std::move(*created);
  g_session = session.release();
  ++g_generation;
  return Status::Ok();
}

void close_session() {
  Session* s = nullptr;
  {
    std::lock_guard lock(g_mu);
    s = g_session;
    g_session = nullptr;
  }
  if (s == nullptr) return;
  if (s->group) s->group->close();
  delete s;
}

group::Group* current_group() {
  std::lock_guard lock(g_mu);
  return g_session != nullptr ? g_session->group.get() : nullptr;
}

group::Group* require_group(TF_OpKernelContext* ctx, const char* op) {
  group::Group* g = current_group();
  if (g == nullptr) {
    fail(ctx, TF_FAILED_PRECONDITION,
         std::string(op) + ": no TicTac group in this process (call tictac.tf.init / TictacInit first)");
  }
  return g;
}

std::uint64_t session_generation() {
  std::lock_guard lock(g_mu);
  return g_generation;
}

void fail(TF_OpKernelContext* ctx, TF_Code code, const std::string& message) {
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, code, message.c_str());
  TF_OpKernelContext_Failure(ctx, st);
  TF_DeleteStatus(st);
}

TF_Code tf_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::timeout: return TF_DEADLINE_EXCEEDED;
    case StatusCode::invalid_argument: return TF_INVALID_ARGUMENT;
    case StatusCode::cancelled: return TF_CANCELLED;
    case StatusCode::connection_lost: return TF_UNAVAILABLE;
    case StatusCode::unavailable: return TF_UNAVAILABLE;
    default: return TF_INTERNAL;
  }
}

void construction_failure(TF_OpKernelConstruction* ctx, const std::string& message) {
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, TF_INVALID_ARGUMENT, message.c_str());
  TF_OpKernelConstruction_Failure(ctx, st);
  TF_DeleteStatus(st);
}

// ---- AttrReader -----------------------------------------------------------------------------

AttrReader::AttrReader(TF_OpKernelConstruction* ctx) : ctx_(ctx), st_(TF_NewStatus()) {}
AttrReader::~AttrReader() { TF_DeleteStatus(st_); }

bool AttrReader::check() {
  if (ok_ && TF_GetCode(st_) != TF_OK) {
    ok_ = false;
    TF_OpKernelConstruction_Failure(ctx_, st_);
  }
  return ok_;
}

std::int64_t AttrReader::i64(const char* name) {
  std::int64_t v = 0;
  if (ok_) TF_OpKernelConstruction_GetAttrInt64(ctx_, name, &v, st_);
  check();
  return v;
}

std::vector<std::int64_t> AttrReader::i64s(const char* name) {
  std::int32_t n = 0, total = 0;
  if (ok_) TF_OpKernelConstruction_GetAttrSize(ctx_, name, &n, &total, st_);
  std::vector<std::int64_t> v(static_cast<std::size_t>(std::max(n, 0)));
  if (check() && n > 0) TF_OpKernelConstruction_GetAttrInt64List(ctx_, name, v.data(), n, st_);
  check();
  return v;
}

std::vector<TF_DataType> AttrReader::types(const char* name) {
  std::int32_t n = 0, total = 0;
  if (ok_) TF_OpKernelConstruction_GetAttrSize(ctx_, name, &n, &total, st_);
  std::vector<TF_DataType> v(static_cast<std::size_t>(std::max(n, 0)));
  if (check() && n > 0) TF_OpKernelConstruction_GetAttrTypeList(ctx_, name, v.data(), n, st_);
  check();
  return v;
}

TF_DataType AttrReader::type(const char* name) {
  TF_DataType t = TF_FLOAT;
  if (ok_) TF_OpKernelConstruction_GetAttrType(ctx_, name, &t, st_);
  check();
  return t;
}

std::string AttrReader::str(const char* name) {
  std::int32_t n = 0, total = 0;
  if (ok_) TF_OpKernelConstruction_GetAttrSize(ctx_, name, &n, &total, st_);
  std::string v(static_cast<std::size_t>(std::max(total, 0)) + 1, '\0');
  if (check()) TF_OpKernelConstruction_GetAttrString(ctx_, name, v.data(), v.size(), st_);
  check();
  v.resize(static_cast<std::size_t>(std::max(total, 0)));
  return v;
}

// ---- registration ---------------------------------------------------------------------------

void register_op(const char* name, const std::vector<const char*>& inputs,
                 const std::vector<const char*>& outputs, const std::vector<const char*>& attrs,
                 CreateFn create, ComputeFn compute, DeleteFn destroy, bool stateful,
                 ShapeFn shape) {
  TF_Status* st = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  for (const char* a : attrs) TF_OpDefinitionBuilderAddAttr(b, a);
  for (const char* i : inputs) TF_OpDefinitionBuilderAddInput(b, i);
  for (const char* o : outputs) TF_OpDefinitionBuilderAddOutput(b, o);
  // Only when true: TF 2.21 ignores the argument and marks the op stateful either way.
  if (stateful) TF_OpDefinitionBuilderSetIsStateful(b, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(b, shape != nullptr ? shape : &unknown_shape);
  TF_RegisterOpDefinition(b, st);
  if (TF_GetCode(st) != TF_OK) std::fprintf(stderr, "tictac tf: op %s: %s\n", name, TF_Message(st));
  TF_KernelBuilder* kb = TF_NewKernelBuilder(name, "CPU", create, compute, destroy);
  TF_RegisterKernelBuilder((std::string(name) + "Kernel").c_str(), kb, st);
  if (TF_GetCode(st) != TF_OK) std::fprintf(stderr, "tictac tf: kernel %s: %s\n", name, TF_Message(st));
  TF_DeleteStatus(st);
}

bool read_tensor_specs(TF_OpKernelConstruction* ctx, AttrReader& a, const std::string& op,
                       std::vector<TensorSpec>& out) {
  auto tags = a.i64s("tags");
  auto srcs = a.i64s("src_ranks");
  auto ranks = a.i64s("ranks");
  auto dims = a.i64s("dims");
  auto types = a.types("T");
  if (!a.ok()) return false;
  if (tags.size() != types.size() || srcs.size() != types.size() || ranks.size() != types.size()) {
    construction_failure(ctx, op + ": tags, src_ranks, ranks and T must have one entry per tensor");
    return false;
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < types.size(); ++i) {
    TensorSpec t;
    t.tag = tags[i];
    t.peer = srcs[i];
    t.dtype = types[i];
    if (ranks[i] < 0 || at + static_cast<std::size_t>(ranks[i]) > dims.size()) {
      construction_failure(ctx, op + ": dims is shorter than the sum of ranks");
      return false;
    }
    t.dims.assign(dims.begin() + static_cast<std::ptrdiff_t>(at),
                  dims.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(ranks[i])));
    at += static_cast<std::size_t>(ranks[i]);
    out.push_back(std::move(t));
  }
  if (at != dims.size()) {
    construction_failure(ctx, op + ": dims is longer than the sum of ranks");
    return false;
  }
  return true;
}

TF_Tensor* priorities_input(TF_OpKernelContext* ctx, int index, std::int64_t n, const std::string& op) {
  TF_Status* st = TF_NewStatus();
  TF_Tensor* prio = nullptr;
  TF_GetInput(ctx, index, &prio, st);
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    return nullptr;
  }
  TF_DeleteStatus(st);
  if (TF_TensorType(prio) != TF_INT64 || TF_TensorElementCount(prio) != n) {
    fail(ctx, TF_INVALID_ARGUMENT, op + ": priorities must be int64 with " + std::to_string(n) +
                                       " elements, got " + std::to_string(TF_TensorElementCount(prio)));
    TF_DeleteTensor(prio);
    return nullptr;
  }
  return prio;
}

}  // namespace tictac::tf_ops
