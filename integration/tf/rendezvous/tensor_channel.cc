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

// TICTAC_TF_TRACE=1: one stderr line per event of a fetch (diagnostics, docs/tf.md), stamped
// with CLOCK_MONOTONIC microseconds (one clock for every process on the host):
//   producer: req (request arrived), reply (tensor ready, header+payload submitted),
//             hsent (header left), sent (payload left: the order out_of_order counts);
//   consumer: fetch (request submitted), hdr (header arrived), got (payload landed).
bool trace_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TICTAC_TF_TRACE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

// The edge name of a rendezvous key ("src;incarnation;dst;edge;frame:iter"), for the trace.
std::string edge_of(const std::string& key) {
  std::size_t p = 0;
  for (int i = 0; i < 3 && p != std::string::npos; ++i) p = key.find(';', p == 0 ? 0 : p + 1);
  if (p == std::string::npos) return key;
  std::size_t e = key.find(';', p + 1);
  return key.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1);
}

void trace(const char* event, std::uint64_t id, std::int64_t step, std::int64_t priority,
           std::uint64_t bytes, const std::string& key) {
  if (!trace_enabled()) return;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  std::fprintf(stderr, "tictac-tf %s t=%lld id=%llu step=%lld priority=%lld bytes=%llu edge=%s\n",
               event, static_cast<long long>(us), static_cast<unsigned long long>(id),
               static_cast<long long>(step), static_cast<long long>(priority),
               static_cast<unsigned long long>(bytes), edge_of(key).c_str());
}

transport::Tag alt_payload_tag(std::uint64_t id) { return 4 * id + 1; }
transport::Tag header_tag(std::uint64_t id) { return 4 * id + 2; }
transport::Tag payload_tag(std::uint64_t id) { return 4 * id + 3; }
constexpr std::size_t kMaxPredictions = 1 << 16;  // keys whose last payload size is remembered

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
  put(out, std::uint8_t(h.alt));
  put(out, h.payload_bytes);
  for (std::int64_t d : h.dims) put(out, d);
  out.insert(out.end(), msg.begin(), msg.end());
  return out;
}

bool decode_header(const char* p, std::size_t n, TensorHeader* h) {
  const char* end = p + n;
  std::int32_t code = 0, dtype = 0;
  std::uint32_t msg_len = 0, ndims = 0;
  std::uint8_t dead = 0, alt = 0;
  if (!get(p, end, &code) || !get(p, end, &msg_len) || !get(p, end, &dtype) ||
      !get(p, end, &ndims) || !get(p, end, &dead) || !get(p, end, &h->encoding) ||
      !get(p, end, &alt) || !get(p, end, &h->payload_bytes) || ndims > kMaxDims)
    return false;
  h->dims.resize(ndims);
  for (auto& d : h->dims)
    if (!get(p, end, &d)) return false;
  if (end - p < static_cast<std::ptrdiff_t>(msg_len)) return false;
  h->code = code;
  h->dtype = dtype;
  h->is_dead = dead != 0;
  h->alt = alt != 0;
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
  std::int64_t step = 0, priority = 0;
  std::string key;
  // Loop thread only (the receive callbacks): the payload receive was pre-posted, and which of
  // the header and that payload have landed.
  std::optional<MemoryRegion> prepost_region;
  bool preposted = false, got_header = false, got_payload = false;
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
  // The header each key had last time (memcpy-able tensors only), to pre-post its payload.
  std::mutex predict_mu;
  std::unordered_map<std::string, TensorHeader> predicted;

  void post_request_recv(Slot* slot);
  void on_request(Slot* slot, std::size_t n, PeerId source);
  void send_reply(PeerId peer, const FetchRequest& req, const std::string& key,
                  TensorHeader header, const void* payload, Keepalive keep);
  void note_sent(PeerId peer, std::int64_t step, std::int64_t priority, std::uint64_t bytes);

  void finish(const std::shared_ptr<Fetch>& f, int code, const std::string& message);
  void fail_transport(const std::shared_ptr<Fetch>& f, const Status& s, const char* what);
  void on_header(const std::shared_ptr<Fetch>& f, std::size_t n);
  void on_payload(const std::shared_ptr<Fetch>& f, bool preposted);
  void post_payload_recv(const std::shared_ptr<Fetch>& f, transport::Tag tag, void* dst,
                         std::uint64_t bytes, bool preposted);
  void remember(const std::string& key, const TensorHeader& h);
  std::optional<TensorHeader> prediction(const std::string& key);
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
      !get(p, end, &req.expect) || !get(p, end, &key_len) ||
      end - p != static_cast<std::ptrdiff_t>(key_len))
    return;  // malformed: nothing to answer to (the peer authenticated, so this is a bug)
  req.key.assign(p, key_len);
  trace("req", req.id, req.step_id, req.priority, 0, req.key);
  std::weak_ptr<Impl> weak = weak_from_this();
  FetchRequest meta = req;
  meta.key.clear();
  std::string key = trace_enabled() ? req.key : std::string();
  serve(req, [weak, source, meta, key](TensorHeader h, const void* payload, Keepalive keep) {
    if (auto self = weak.lock())
      self->send_reply(source, meta, key, std::move(h), payload, std::move(keep));
  });
}

void TensorChannel::Impl::note_sent(PeerId peer, std::int64_t step, std::int64_t priority,
                                    std::uint64_t bytes) {
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

void TensorChannel::Impl::send_reply(PeerId peer, const FetchRequest& req,
                                     const std::string& key, TensorHeader header,
                                     const void* payload, Keepalive keep) {
  const std::uint64_t id = req.id;
  const std::int64_t step = req.step_id, priority = req.priority;
  if (header.code != kCodeOk) header.payload_bytes = 0;
  const std::uint64_t bytes = header.payload_bytes;
  // A payload of the pre-posted size claims that receive; otherwise an empty message releases it
  // and the payload takes the alternate tag.
  const bool fits = req.expect > 0 && bytes == static_cast<std::uint64_t>(req.expect);
  const bool release = req.expect >= 0 && !fits;
  header.alt = release && bytes > 0;
  trace("reply", id, step, priority, bytes, key);
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
  std::weak_ptr<Impl> weak = weak_from_this();
  auto sent = [weak, out, peer, id, step, priority, bytes, key](const Status& s, std::uint64_t,
                                                                PeerId) {
    if (s.ok()) trace("sent", id, step, priority, bytes, key);
    auto self = weak.lock();
    if (self && s.ok()) self->note_sent(peer, step, priority, bytes);
  };
  auto keep_out = [out](const Status&, std::uint64_t, PeerId) {};
  if (release) ctx->send(peer, payload_tag(id), *out->header_region, 0, 0, priority, keep_out);
  if (bytes == 0) {
    ctx->send(peer, header_tag(id), *out->header_region, 0, out->header.size(), priority, sent);
    return;
  }
  auto pr = MemoryRegion::host(const_cast<void*>(payload), bytes);
  if (!pr.ok()) return;
  out->payload_region.emplace(std::move(*pr));
  ctx->send(peer, header_tag(id), *out->header_region, 0, out->header.size(), priority,
            [out, id, step, priority, key](const Status&, std::uint64_t, PeerId) {
              trace("hsent", id, step, priority, 0, key);
            });
  ctx->send(peer, header.alt ? alt_payload_tag(id) : payload_tag(id), *out->payload_region, 0,
            bytes, priority, sent);
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
    trace("got", f->id, f->step, f->priority, f->header.payload_bytes, f->key);
    remember(f->key, f->header);
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

void TensorChannel::Impl::remember(const std::string& key, const TensorHeader& h) {
  if (h.code != kCodeOk || h.is_dead || h.encoding != 0 || h.payload_bytes == 0) return;
  std::lock_guard<std::mutex> lock(predict_mu);
  if (predicted.size() >= kMaxPredictions) predicted.clear();
  TensorHeader& p = predicted[key];
  p = h;
  p.alt = false;
}

std::optional<TensorHeader> TensorChannel::Impl::prediction(const std::string& key) {
  std::lock_guard<std::mutex> lock(predict_mu);
  auto it = predicted.find(key);
  if (it == predicted.end()) return std::nullopt;
  return it->second;
}

void TensorChannel::Impl::post_payload_recv(const std::shared_ptr<Fetch>& f, transport::Tag tag,
                                            void* dst, std::uint64_t bytes, bool preposted) {
  auto region = MemoryRegion::host(dst, bytes);
  if (!region.ok()) return finish(f, kCodeInternal, region.status().to_string());
  std::string cancelled;
  {
    std::lock_guard<std::mutex> lock(f->mu);
    cancelled = f->cancel_message;
    if (cancelled.empty()) {
      auto& slot = preposted ? f->prepost_region : f->payload_region;
      slot.emplace(std::move(*region));
      std::weak_ptr<Impl> weak = weak_from_this();
      f->pending.push_back(ctx->recv(
          f->peer, tag, *slot, 0, bytes,
          [weak, f, preposted](const Status& s, std::uint64_t n, PeerId) {
            auto self = weak.lock();
            if (!self) return;
            if (!s.ok()) return self->fail_transport(f, s, "receiving from");
            if (!preposted) return self->finish(f, kCodeOk, "");
            if (n == 0) return;  // released: the payload comes on the alternate tag, if any
            f->got_payload = true;
            if (f->got_header) self->finish(f, kCodeOk, "");
          }));
    }
  }
  if (!cancelled.empty()) finish(f, kCodeCancelled, cancelled);
}

void TensorChannel::Impl::on_header(const std::shared_ptr<Fetch>& f, std::size_t n) {
  if (!decode_header(f->header_buf.data(), n, &f->header))
    return finish(f, kCodeInternal, "TicTac rendezvous: malformed reply from " + f->label);
  trace("hdr", f->id, f->step, f->priority, f->header.payload_bytes, f->key);
  f->got_header = true;
  const TensorHeader& h = f->header;
  if (h.code != kCodeOk) return finish(f, h.code, h.message);
  if (f->preposted && !h.alt && h.payload_bytes > 0) {  // it claimed the pre-posted receive
    if (h.payload_bytes != f->prepost_region->size())
      return finish(f, kCodeInternal, "TicTac rendezvous: " + f->label + " sent " +
                                          std::to_string(h.payload_bytes) +
                                          " bytes into a receive of another size");
    if (f->got_payload) finish(f, kCodeOk, "");
    return;
  }
  std::string err;
  void* dst = f->alloc(h, &err);
  if (h.payload_bytes == 0) return finish(f, dst == nullptr && !err.empty() ? kCodeInternal : kCodeOk, err);
  if (dst == nullptr) return finish(f, kCodeInternal, err.empty() ? "allocation failed" : err);
  post_payload_recv(f, f->preposted ? alt_payload_tag(f->id) : payload_tag(f->id), dst,
                    h.payload_bytes, false);
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
  f->step = step_id;
  f->priority = priority;
  f->key = key;
  trace("fetch", f->id, step_id, priority, 0, key);
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
  // Seen before: the payload's receive is posted now, into a tensor of last time's size.
  void* predicted_dst = nullptr;
  std::int64_t expect = -1;
  if (std::optional<TensorHeader> guess = im.prediction(key)) {
    std::string ignored;  // no buffer: the fetch takes the path without a pre-posted receive
    predicted_dst = f->alloc(*guess, &ignored);
    if (predicted_dst != nullptr) expect = static_cast<std::int64_t>(guess->payload_bytes);
  }
  f->preposted = predicted_dst != nullptr;
  put(f->request, f->id);
  put(f->request, step_id);
  put(f->request, priority);
  put(f->request, expect);
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
  {
    std::lock_guard<std::mutex> lock(f->mu);
    f->pending.push_back(
        im.ctx->recv(f->peer, header_tag(f->id), *f->header_region, 0, kHeaderBytes,
                     [weak, f](const Status& s, std::uint64_t n, PeerId) {
                       auto self = weak.lock();
                       if (!self) return;
                       if (!s.ok()) return self->fail_transport(f, s, "waiting for");
                       self->on_header(f, n);
                     }));
  }
  // Both receives are posted (and advertised to the producer) before the request leaves.
  if (f->preposted)
    im.post_payload_recv(f, payload_tag(f->id), predicted_dst, static_cast<std::uint64_t>(expect),
                         true);
  std::lock_guard<std::mutex> lock(f->mu);
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
