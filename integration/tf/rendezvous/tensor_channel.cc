// TensorChannel over transport::Context (see tensor_channel.h for the protocol).
#include "integration/tf/rendezvous/tensor_channel.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "transport/context.h"

namespace tictac::tfrdv {
namespace {

using transport::Context;
using transport::MemoryRegion;
using transport::PeerId;
using transport::RequestId;

constexpr transport::Tag kRequestTag = 1;
constexpr std::size_t kRequestBytes = 16 * 1024;  // id, step, priority, key length, key
constexpr std::size_t kHeaderBytes = 8 * 1024;    // fixed part, dims, status message
constexpr std::size_t kMaxDims = 64;
constexpr int kRequestSlots = 8;

// TICTAC_TF_TRACE=1: one stderr line per tensor sent (diagnostics, docs/tf.md).
bool trace_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TICTAC_TF_TRACE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

transport::Tag header_tag(std::uint64_t id) { return 4 * id + 2; }
transport::Tag payload_tag(std::uint64_t id) { return 4 * id + 3; }

std::atomic<std::int64_t> g_sent_tensors{0}, g_sent_bytes{0}, g_out_of_order{0};
std::atomic<std::int64_t> g_recv_tensors{0}, g_recv_bytes{0};

int tf_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::ok:
      return kCodeOk;
    case StatusCode::cancelled:
      return kCodeCancelled;
    case StatusCode::invalid_argument:
      return kCodeInvalidArgument;
    case StatusCode::timeout:
      return kCodeDeadlineExceeded;
    case StatusCode::unavailable:
    case StatusCode::connection_lost:
    case StatusCode::protocol_error:
      return kCodeUnavailable;
    default:
      return kCodeInternal;
  }
}

bool peer_gone(const Status& s) {
  return s.code() == StatusCode::connection_lost || s.code() == StatusCode::protocol_error ||
         s.code() == StatusCode::timeout || s.code() == StatusCode::unavailable;
}

template <typename T>
void put(std::vector<char>& out, const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
bool get(const char*& p, const char* end, T* v) {
  if (end - p < static_cast<std::ptrdiff_t>(sizeof(T))) return false;
  std::memcpy(v, p, sizeof(T));
  p += sizeof(T);
  return true;
}

std::vector<char> encode_header(const TensorHeader& h) {
  std::vector<char> out;
  std::string msg = h.message.substr(0, 4096);
  put(out, std::int32_t(h.code));
  put(out, std::uint32_t(msg.size()));
  put(out, std::int32_t(h.dtype));
  put(out, std::uint32_t(h.dims.size()));
  put(out, std::uint8_t(h.is_dead));
  put(out, h.encoding);
  put(out, h.payload_bytes);
  for (std::int64_t d : h.dims) put(out, d);
  out.insert(out.end(), msg.begin(), msg.end());
  return out;
}

bool decode_header(const char* p, std::size_t n, TensorHeader* h) {
  const char* end = p + n;
  std::int32_t code = 0, dtype = 0;
  std::uint32_t msg_len = 0, ndims = 0;
  std::uint8_t dead = 0;
  if (!get(p, end, &code) || !get(p, end, &msg_len) || !get(p, end, &dtype) ||
      !get(p, end, &ndims) || !get(p, end, &dead) || !get(p, end, &h->encoding) ||
      !get(p, end, &h->payload_bytes) || ndims > kMaxDims)
    return false;
  h->dims.resize(ndims);
  for (auto& d : h->dims)
    if (!get(p, end, &d)) return false;
  if (end - p < static_cast<std::ptrdiff_t>(msg_len)) return false;
  h->code = code;
  h->dtype = dtype;
  h->is_dead = dead != 0;
  h->message.assign(p, msg_len);
  return true;
}

// One outstanding fetch on the consumer side.
struct Fetch {
  std::uint64_t id = 0;
  PeerId peer = transport::kNoPeer;
  std::string address, label;
  AllocFn alloc;
  DoneFn done;
  std::vector<char> request;
  std::vector<char> header_buf = std::vector<char>(kHeaderBytes);
  std::optional<MemoryRegion> request_region, header_region, payload_region;
  TensorHeader header;
  std::mutex mu;  // guards the fields below
  std::vector<RequestId> pending;
  std::string cancel_message;  // non-empty: cancelled
  std::atomic<bool> finished{false};
};

}  // namespace

ChannelStats process_stats() {
  return ChannelStats{g_sent_tensors.load(), g_sent_bytes.load(), g_out_of_order.load(),
                      g_recv_tensors.load(), g_recv_bytes.load()};
}

class TensorChannel::Impl : public std::enable_shared_from_this<TensorChannel::Impl> {
 public:
  std::unique_ptr<Context> ctx;
  std::string address;
  ServeFn serve;
  std::atomic<bool> closing{false};
  std::thread acceptor;
  std::atomic<std::uint64_t> next_id{1};

  std::mutex peers_mu;
  std::map<std::string, PeerId> peers;

  std::mutex fetch_mu;
  std::unordered_map<std::uint64_t, std::shared_ptr<Fetch>> fetches;

  struct Slot {
    std::vector<char> buf = std::vector<char>(kRequestBytes);
    std::optional<MemoryRegion> region;
  };
  std::vector<std::unique_ptr<Slot>> slots;
  // Loop thread only: the largest priority already sent per (peer, step), for out_of_order.
  std::map<std::pair<PeerId, std::int64_t>, std::int64_t> max_sent;

  void post_request_recv(Slot* slot);
  void on_request(Slot* slot, std::size_t n, PeerId source);
  void send_reply(PeerId peer, std::uint64_t id, std::int64_t step, std::int64_t priority,
                  const std::string& key, TensorHeader header, const void* payload, Keepalive keep);
  void note_sent(PeerId peer, std::int64_t step, std::int64_t priority, std::uint64_t bytes,
                 const std::string& key);

  void finish(const std::shared_ptr<Fetch>& f, int code, const std::string& message);
  void fail_transport(const std::shared_ptr<Fetch>& f, const Status& s, const char* what);
  void on_header(const std::shared_ptr<Fetch>& f, std::size_t n);
  Result<PeerId> peer_for(const std::string& address);
  void forget_peer(const std::string& address, PeerId peer);
};

void TensorChannel::Impl::post_request_recv(Slot* slot) {
  if (closing) return;
  std::weak_ptr<Impl> weak = weak_from_this();
  ctx->recv(transport::kAnyPeer, kRequestTag, *slot->region, 0, kRequestBytes,
            [weak, slot](const Status& s, std::uint64_t n, PeerId source) {
              auto self = weak.lock();
              if (!self || self->closing) return;
              if (s.ok()) self->on_request(slot, n, source);
              // A failed any-peer receive (one peer dropped) just re-arms.
              self->post_request_recv(slot);
            });
}

void TensorChannel::Impl::on_request(Slot* slot, std::size_t n, PeerId source) {
  const char* p = slot->buf.data();
  const char* end = p + n;
  FetchRequest req;
  std::uint32_t key_len = 0;
  if (!get(p, end, &req.id) || !get(p, end, &req.step_id) || !get(p, end, &req.priority) ||
      !get(p, end, &key_len) || end - p != static_cast<std::ptrdiff_t>(key_len))
    return;  // malformed: nothing to answer to (the peer authenticated, so this is a bug)
  req.key.assign(p, key_len);
  std::weak_ptr<Impl> weak = weak_from_this();
  const std::uint64_t id = req.id;
  const std::int64_t step = req.step_id, priority = req.priority;
  std::string key = trace_enabled() ? req.key : std::string();
  serve(req, [weak, source, id, step, priority, key](TensorHeader h, const void* payload,
                                                     Keepalive keep) {
    if (auto self = weak.lock())
      self->send_reply(source, id, step, priority, key, std::move(h), payload, std::move(keep));
  });
}

void TensorChannel::Impl::note_sent(PeerId peer, std::int64_t step, std::int64_t priority,
                                    std::uint64_t bytes, const std::string& key) {
  if (!key.empty())
    std::fprintf(stderr, "tictac-tf sent step=%lld peer=%llu priority=%lld bytes=%llu key=%s\n",
                 static_cast<long long>(step), static_cast<unsigned long long>(peer),
                 static_cast<long long>(priority), static_cast<unsigned long long>(bytes),
                 key.c_str());
  g_sent_tensors++;
  g_sent_bytes += static_cast<std::int64_t>(bytes);
  if (max_sent.size() > 4096) max_sent.clear();
  auto [it, fresh] = max_sent.try_emplace({peer, step}, priority);
  if (!fresh) {
    if (priority < it->second)
      g_out_of_order++;
    else
      it->second = priority;
  }
}

void TensorChannel::Impl::send_reply(PeerId peer, std::uint64_t id, std::int64_t step,
                                     std::int64_t priority, const std::string& key,
                                     TensorHeader header, const void* payload, Keepalive keep) {
  if (header.code != kCodeOk) header.payload_bytes = 0;
  struct Out {
    std::vector<char> header;
    std::optional<MemoryRegion> header_region, payload_region;
    Keepalive keep;
  };
  auto out = std::make_shared<Out>();
  out->header = encode_header(header);
  out->keep = std::move(keep);
  auto hr = MemoryRegion::host(out->header.data(), out->header.size());
  if (!hr.ok()) return;
  out->header_region.emplace(std::move(*hr));
  const std::uint64_t bytes = header.payload_bytes;
  std::weak_ptr<Impl> weak = weak_from_this();
  auto sent = [weak, out, peer, step, priority, bytes, key](const Status& s, std::uint64_t,
                                                            PeerId) {
    auto self = weak.lock();
    if (self && s.ok()) self->note_sent(peer, step, priority, bytes, key);
  };
  if (bytes == 0) {
    ctx->send(peer, header_tag(id), *out->header_region, 0, out->header.size(), priority, sent);
    return;
  }
  auto pr = MemoryRegion::host(const_cast<void*>(payload), bytes);
  if (!pr.ok()) return;
  out->payload_region.emplace(std::move(*pr));
  ctx->send(peer, header_tag(id), *out->header_region, 0, out->header.size(), priority,
            [out](const Status&, std::uint64_t, PeerId) {});
  ctx->send(peer, payload_tag(id), *out->payload_region, 0, bytes, priority, sent);
}

Result<PeerId> TensorChannel::Impl::peer_for(const std::string& addr) {
  std::lock_guard<std::mutex> lock(peers_mu);
  auto it = peers.find(addr);
  if (it != peers.end()) return it->second;
  auto peer = ctx->connect(addr);
  if (!peer.ok()) return peer.status();
  peers[addr] = *peer;
  return *peer;
}

void TensorChannel::Impl::forget_peer(const std::string& addr, PeerId peer) {
  std::lock_guard<std::mutex> lock(peers_mu);
  auto it = peers.find(addr);
  if (it != peers.end() && it->second == peer) peers.erase(it);
}

void TensorChannel::Impl::finish(const std::shared_ptr<Fetch>& f, int code,
                                 const std::string& message) {
  if (f->finished.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(fetch_mu);
    fetches.erase(f->id);
  }
  if (code == kCodeOk) {
    g_recv_tensors++;
    g_recv_bytes += static_cast<std::int64_t>(f->header.payload_bytes);
  }
  f->done(code, message, f->header);
}

void TensorChannel::Impl::fail_transport(const std::shared_ptr<Fetch>& f, const Status& s,
                                         const char* what) {
  std::string cancel;
  {
    std::lock_guard<std::mutex> lock(f->mu);
    cancel = f->cancel_message;
  }
  if (!cancel.empty()) return finish(f, kCodeCancelled, cancel);
  if (peer_gone(s)) forget_peer(f->address, f->peer);
  finish(f, tf_code(s),
         "TicTac rendezvous: " + std::string(what) + " " + f->label + " (" + f->address +
             ") failed: " + s.to_string());
}

void TensorChannel::Impl::on_header(const std::shared_ptr<Fetch>& f, std::size_t n) {
  if (!decode_header(f->header_buf.data(), n, &f->header))
    return finish(f, kCodeInternal, "TicTac rendezvous: malformed reply from " + f->label);
  if (f->header.code != kCodeOk) return finish(f, f->header.code, f->header.message);
  if (f->header.payload_bytes == 0) {
    std::string err;
    if (f->alloc(f->header, &err) == nullptr && !err.empty()) return finish(f, kCodeInternal, err);
    return finish(f, kCodeOk, "");
  }
  std::string err;
  void* dst = f->alloc(f->header, &err);
  if (dst == nullptr) return finish(f, kCodeInternal, err.empty() ? "allocation failed" : err);
  auto region = MemoryRegion::host(dst, f->header.payload_bytes);
  if (!region.ok()) return finish(f, kCodeInternal, region.status().to_string());
  std::string cancelled;
  {
    std::lock_guard<std::mutex> lock(f->mu);
    cancelled = f->cancel_message;
    if (cancelled.empty()) {
      f->payload_region.emplace(std::move(*region));
      std::weak_ptr<Impl> weak = weak_from_this();
      f->pending.push_back(ctx->recv(f->peer, payload_tag(f->id), *f->payload_region, 0,
                                     f->header.payload_bytes,
                                     [weak, f](const Status& s, std::uint64_t, PeerId) {
                                       auto self = weak.lock();
                                       if (!self) return;
                                       if (!s.ok())
                                         return self->fail_transport(f, s, "receiving from");
                                       self->finish(f, kCodeOk, "");
                                     }));
    }
  }
  if (!cancelled.empty()) finish(f, kCodeCancelled, cancelled);
}

TensorChannel::TensorChannel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<TensorChannel> TensorChannel::create(const std::string& listen_address,
                                                     ServeFn serve, std::string* error) {
  transport::ContextOptions opts;
  opts.name = "tictac-tf:" + listen_address;
  auto ctx = Context::create(std::move(opts));
  if (!ctx.ok()) {
    *error = ctx.status().to_string();
    return nullptr;
  }
  auto impl = std::make_shared<Impl>();
  impl->ctx = std::move(*ctx);
  auto bound = impl->ctx->listen(listen_address);
  if (!bound.ok()) {
    *error = "listening on " + listen_address + ": " + bound.status().to_string();
    return nullptr;
  }
  impl->address = *bound;
  impl->serve = std::move(serve);
  for (int i = 0; i < kRequestSlots; ++i) {
    auto slot = std::make_unique<Impl::Slot>();
    auto r = MemoryRegion::host(slot->buf.data(), slot->buf.size());
    if (!r.ok()) {
      *error = r.status().to_string();
      return nullptr;
    }
    slot->region.emplace(std::move(*r));
    impl->slots.push_back(std::move(slot));
  }
  for (auto& slot : impl->slots) impl->post_request_recv(slot.get());
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] {
    while (!raw->closing) (void)raw->ctx->accept(std::chrono::milliseconds(200));
  });
  return std::unique_ptr<TensorChannel>(new TensorChannel(std::move(impl)));
}

TensorChannel::~TensorChannel() {
  impl_->closing = true;
  if (impl_->acceptor.joinable()) impl_->acceptor.join();
  impl_->ctx->close();
  impl_->ctx->join();
  std::vector<std::shared_ptr<Fetch>> left;
  {
    std::lock_guard<std::mutex> lock(impl_->fetch_mu);
    for (auto& [id, f] : impl_->fetches) left.push_back(f);
  }
  for (auto& f : left) impl_->finish(f, kCodeCancelled, "TicTac rendezvous: server shut down");
}

const std::string& TensorChannel::address() const { return impl_->address; }

std::uint64_t TensorChannel::fetch(const std::string& address, const std::string& label,
                                   std::int64_t step_id, const std::string& key,
                                   std::int64_t priority, AllocFn alloc, DoneFn done) {
  Impl& im = *impl_;
  auto f = std::make_shared<Fetch>();
  f->id = im.next_id++;
  f->address = address;
  f->label = label;
  f->alloc = std::move(alloc);
  f->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(im.fetch_mu);
    im.fetches[f->id] = f;
  }
  if (key.size() + 64 > kRequestBytes) {
    im.finish(f, kCodeInvalidArgument,
              "TicTac rendezvous: key longer than 16 KiB: " + key.substr(0, 200));
    return f->id;
  }
  auto peer = im.peer_for(address);
  if (!peer.ok()) {
    im.fail_transport(f, peer.status(), "connecting to");
    return f->id;
  }
  f->peer = *peer;
  put(f->request, f->id);
  put(f->request, step_id);
  put(f->request, priority);
  put(f->request, std::uint32_t(key.size()));
  f->request.insert(f->request.end(), key.begin(), key.end());
  auto rr = MemoryRegion::host(f->request.data(), f->request.size());
  auto hr = MemoryRegion::host(f->header_buf.data(), f->header_buf.size());
  if (!rr.ok() || !hr.ok()) {
    im.finish(f, kCodeInternal, (rr.ok() ? hr.status() : rr.status()).to_string());
    return f->id;
  }
  f->request_region.emplace(std::move(*rr));
  f->header_region.emplace(std::move(*hr));
  std::weak_ptr<Impl> weak = impl_;
  std::lock_guard<std::mutex> lock(f->mu);
  f->pending.push_back(im.ctx->recv(f->peer, header_tag(f->id), *f->header_region, 0, kHeaderBytes,
                                    [weak, f](const Status& s, std::uint64_t n, PeerId) {
                                      auto self = weak.lock();
                                      if (!self) return;
                                      if (!s.ok()) return self->fail_transport(f, s, "waiting for");
                                      self->on_header(f, n);
                                    }));
  f->pending.push_back(im.ctx->send(f->peer, kRequestTag, *f->request_region, 0, f->request.size(),
                                    priority, [weak, f](const Status& s, std::uint64_t, PeerId) {
                                      auto self = weak.lock();
                                      if (self && !s.ok()) self->fail_transport(f, s, "asking");
                                    }));
  return f->id;
}

void TensorChannel::cancel(std::uint64_t fetch_id, const std::string& message) {
  std::shared_ptr<Fetch> f;
  {
    std::lock_guard<std::mutex> lock(impl_->fetch_mu);
    auto it = impl_->fetches.find(fetch_id);
    if (it == impl_->fetches.end()) return;
    f = it->second;
  }
  std::vector<RequestId> pending;
  {
    std::lock_guard<std::mutex> lock(f->mu);
    f->cancel_message = message.empty() ? "cancelled" : message;
    pending = f->pending;
  }
  for (RequestId r : pending) impl_->ctx->cancel(r);
  // A fetch whose requests were all complete already (between header and payload) finishes here.
  if (pending.empty()) impl_->finish(f, kCodeCancelled, message);
}

}  // namespace tictac::tfrdv
