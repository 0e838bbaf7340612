#include "tests/unit/verbs/backend_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tictac::verbs::testing {

using transport::wire::FrameType;
using transport::wire::Header;

fake::FabricOptions threaded_fabric(std::uint8_t link_layer) {
  fake::FabricOptions o;
  o.execution = fake::Execution::thread;
  o.devices = {fake::DeviceSpec{"fake0", {fake::PortSpec{link_layer}}}};
  return o;
}

// ---------------------------------------------------------------------------------------------
// RecordingSink

void RecordingSink::note_call() {
  if (!failures.empty()) ++calls_after_failure;
}

Result<transport::Destination> RecordingSink::on_header(const Header& header) {
  note_call();
  if (!refuse_headers.ok()) return refuse_headers;
  transport::Destination d;
  if (place_data != nullptr && header.type == FrameType::data) {
    d.data = place_data + header.offset;
    return d;
  }
  landing_.assign(header.length, std::byte{0});
  d.data = landing_.data();
  return d;
}

void RecordingSink::on_frame(const Header& header) {
  note_call();
  frames.push_back(Frame{header, std::move(landing_)});
  landing_.clear();
}

void RecordingSink::on_sent(std::uint64_t cookie) {
  note_call();
  sent.push_back(cookie);
}

void RecordingSink::on_writable() {
  note_call();
  ++writable;
}

void RecordingSink::on_failed(const Status& status) {
  note_call();
  failures.push_back(status);
}

Header data_header(std::uint32_t length, std::uint64_t msg_id) {
  Header h;
  h.type = FrameType::data;
  h.tag = 7;
  h.msg_id = msg_id;
  h.offset = 0;
  h.total = length;
  h.length = length;
  return h;
}

std::vector<std::byte> bytes_for(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// BackendPair

BackendPair::BackendPair(const IbvApi& api, const VerbsConfig& ca, const VerbsConfig& cb) {
  for (auto [side, cfg] : {std::pair{&a, &ca}, std::pair{&b, &cb}}) {
    auto engine = transport::ProgressEngine::create(transport::ProgressEngine::Mode::manual);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (!engine.ok()) return;
    side->engine = std::move(engine).value();
    side->backend = create(api, *cfg);
    const Status st = side->backend->attach(*side->engine);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return;
  }
  attached_ = true;
}

BackendPair::~BackendPair() { close_all(); }

bool BackendPair::run_until(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    for (Side* s : {&a, &b}) {
      if (s->engine) s->engine->progress(std::chrono::milliseconds(1));
    }
  }
  return true;
}

void BackendPair::run_a_little() {
  for (int i = 0; i < 20; ++i) {
    for (Side* s : {&a, &b}) {
      if (s->engine) s->engine->progress(std::chrono::milliseconds(1));
    }
  }
}

bool BackendPair::connect() {
  Result<std::string> addr = b.backend->listen("127.0.0.1:0", [this](std::unique_ptr<transport::Endpoint> ep) {
    b.endpoint = std::move(ep);
    b.endpoint->start(&b.sink);
  });
  EXPECT_TRUE(addr.ok()) << addr.status().to_string();
  if (!addr.ok()) return false;
  EXPECT_EQ(addr->rfind("verbs://127.0.0.1:", 0), 0u) << *addr;
  Status failed;
  a.backend->connect(addr->substr(8), transport::Clock::now() + std::chrono::seconds(10),
                     [this, &failed](Result<std::unique_ptr<transport::Endpoint>> ep) {
                       if (!ep.ok()) {
                         failed = ep.status();
                         return;
                       }
                       a.endpoint = std::move(ep).value();
                       a.endpoint->start(&a.sink);
                     });
  const bool ok = run_until([&] { return (a.endpoint && b.endpoint) || !failed.ok(); });
  EXPECT_TRUE(failed.ok()) << failed.to_string();
  return ok && failed.ok();
}

Status BackendPair::connect_a_to(const std::string& address) {
  Status result(StatusCode::internal, "connect did not finish");
  bool done = false;
  a.backend->connect(address, transport::Clock::now() + std::chrono::seconds(10),
                     [&](Result<std::unique_ptr<transport::Endpoint>> ep) {
                       done = true;
                       result = ep.status();
                       if (!ep.ok()) return;
                       a.endpoint = std::move(ep).value();
                       a.endpoint->start(&a.sink);
                     });
  EXPECT_TRUE(run_until([&] { return done; }));
  return result;
}

void BackendPair::close_all() {
  for (Side* s : {&a, &b}) {
    if (s->endpoint) s->endpoint->close();
    s->endpoint.reset();
    if (s->backend) s->backend->shutdown();
    s->backend.reset();
    s->engine.reset();
  }
}

// ---------------------------------------------------------------------------------------------
// RoguePeer

namespace {
constexpr std::uint32_t kRogueSlots = 4;
constexpr std::uint32_t kRogueSlotBytes = 4096;

bool read_exact(int fd, std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
}  // namespace

std::string blocking_side_auth(int fd, auth::Role role, const std::optional<std::string>& token,
                               std::vector<std::byte>* leftover) {
  auth::HandshakeConfig config;
  config.role = role;
  config.token = token;
  config.protocol_version = kQpInfoVersion;
  config.peer = "backend";
  Result<auth::Handshake> hs = auth::Handshake::start(std::move(config));
  if (!hs.ok()) return hs.status().to_string();
  for (;;) {
    const auth::Bytes out = hs->take_output();
    if (!out.empty() && ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
      return "cannot send the auth handshake";
    }
    if (hs->done()) return "";
    if (hs->failed()) return hs->status().to_string();
    std::uint8_t buf[256];
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return "the backend closed the side channel during the auth handshake";
    Result<std::size_t> used = hs->feed(std::span(buf, static_cast<std::size_t>(r)));
    if (!used.ok()) {
      const auth::Bytes refusal = hs->take_output();
      if (!refusal.empty()) (void)::send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL);
      return used.status().to_string();
    }
    for (std::size_t i = *used; i < static_cast<std::size_t>(r); ++i) leftover->push_back(std::byte{buf[i]});
  }
}

int connect_blocking(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

RoguePeer::RoguePeer(const IbvApi& api, RogueOptions options) : api_(api), options_(options) {
  int num = 0;
  ibv_device** list = api_.get_device_list(&num);
  EXPECT_TRUE(list != nullptr && num > 0);
  if (list == nullptr || num == 0) return;
  ctx_ = api_.open_device(list[0]);
  api_.free_device_list(list);
  pd_ = api_.alloc_pd(ctx_);
  cq_ = api_.create_cq(ctx_, 256, nullptr, nullptr, 0);
  ring_.resize(kRogueSlots * (kSlotHeaderRoom + kRogueSlotBytes));
  out_.resize(kSlotHeaderRoom + kRogueSlotBytes);
  ring_mr_ = api_.reg_mr(pd_, ring_.data(), ring_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  out_mr_ = api_.reg_mr(pd_, out_.data(), out_.size(), IBV_ACCESS_LOCAL_WRITE);
  Result<QueuePair> d = QueuePair::create(api_, pd_, cq_, QpCaps{16, 16}, "rogue data QP");
  Result<QueuePair> c = QueuePair::create(api_, pd_, cq_, QpCaps{16, 16}, "rogue control QP");
  EXPECT_TRUE(d.ok() && c.ok());
  if (!d.ok() || !c.ok()) return;
  data_ = std::move(d).value();
  ctrl_ = std::move(c).value();
  EXPECT_TRUE(data_.to_init(1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE).ok());
  EXPECT_TRUE(ctrl_.to_init(1, IBV_ACCESS_LOCAL_WRITE).ok());
}

RoguePeer::~RoguePeer() {
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  data_ = QueuePair();
  ctrl_ = QueuePair();
  if (ring_mr_ != nullptr) {
    EXPECT_EQ(api_.dereg_mr(ring_mr_), 0);
  }
  if (out_mr_ != nullptr) {
    EXPECT_EQ(api_.dereg_mr(out_mr_), 0);
  }
  if (cq_ != nullptr) {
    EXPECT_EQ(api_.destroy_cq(cq_), 0);
  }
  if (pd_ != nullptr) {
    EXPECT_EQ(api_.dealloc_pd(pd_), 0);
  }
  if (ctx_ != nullptr) {
    EXPECT_EQ(api_.close_device(ctx_), 0);
  }
}

std::string RoguePeer::listen() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  EXPECT_EQ(::listen(listen_fd_, 1), 0);
  socklen_t len = sizeof sa;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  thread_ = std::thread([this] { serve(); });
  return "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
}

bool RoguePeer::join() {
  if (thread_.joinable()) thread_.join();
  return error_.empty();
}

// Runs on the helper thread: one exchange as the acceptor. The accepted socket stays open (in
// listen_fd_'s place) so that the backend does not see a disconnect.
void RoguePeer::serve() {
  const int fd = ::accept(listen_fd_, nullptr, nullptr);
  if (fd < 0) {
    error_ = "accept failed";
    return;
  }
  ::close(listen_fd_);
  listen_fd_ = fd;
  std::vector<std::byte> early;
  if (std::string why = blocking_side_auth(fd, auth::Role::acceptor, std::nullopt, &early); !why.empty()) {
    error_ = why;
    return;
  }
  std::array<std::byte, kQpInfoBytes> buf{};
  const std::size_t have = std::min(early.size(), buf.size());
  std::copy_n(early.begin(), have, buf.begin());
  if (!read_exact(fd, buf.data() + have, buf.size() - have)) {
    error_ = "no QpInfo from the backend";
    return;
  }
  Result<QpInfo> peer = decode_qp_info(buf);
  if (!peer.ok()) {
    error_ = peer.status().to_string();
    return;
  }
  peer_ = *peer;
  ibv_port_attr port{};
  api_.query_port(ctx_, 1, &port);
  QpInfo me;
  me.link_layer = port.link_layer;
  me.mtu = port.active_mtu;
  me.lid = port.lid;
  api_.query_gid(ctx_, 1, 0, &me.gid);
  me.data_qpn = data_.num();
  me.ctrl_qpn = ctrl_.num();
  me.ring_addr = reinterpret_cast<std::uintptr_t>(ring_.data());
  me.ring_rkey = options_.advertise_bad_rkey ? ring_mr_->rkey + 1000 : ring_mr_->rkey;
  me.ring_slots = kRogueSlots;
  me.slot_bytes = kRogueSlotBytes;
  me.ctrl_recvs = 16;
  for (QueuePair* q : {&data_, &ctrl_}) {
    if (q == &data_ && !options_.post_data_receives) continue;
    for (std::uint32_t i = 0; i < kRogueSlots; ++i) {
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      if (api_.post_recv(q->get(), &wr, &bad) != 0) error_ = "post_recv failed";
    }
  }
  const VerbsConfig cfg;
  Status st = data_.to_rtr(1, 0, me, peer_, peer_.data_qpn, cfg);
  if (st.ok()) st = ctrl_.to_rtr(1, 0, me, peer_, peer_.ctrl_qpn, cfg);
  if (st.ok()) st = data_.to_rts(me.psn, cfg);
  if (st.ok()) st = ctrl_.to_rts(me.psn, cfg);
  if (!st.ok()) {
    error_ = st.to_string();
    return;
  }
  auto out = encode(me);
  out[4] = std::byte{static_cast<std::uint8_t>(options_.qp_info_version)};
  out[5] = std::byte{static_cast<std::uint8_t>(options_.qp_info_version >> 8)};
  if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
    error_ = "cannot send QpInfo";
    return;
  }
  std::byte ready{};
  if (!read_exact(fd, &ready, 1) || ready != kReadyByte) error_ = "no ready byte";
}

ibv_wc_status RoguePeer::write_fragment(const std::vector<std::byte>& bytes, std::uint32_t slot, std::uint32_t imm) {
  std::memcpy(out_.data(), bytes.data(), std::min(bytes.size(), out_.size()));
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(out_.data());
  sge.length = static_cast<std::uint32_t>(std::min(bytes.size(), out_.size()));
  sge.lkey = out_mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = 99;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = peer_.ring_addr + std::uint64_t{slot} * (kSlotHeaderRoom + peer_.slot_bytes);
  wr.wr.rdma.rkey = peer_.ring_rkey;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(api_.post_send(data_.get(), &wr, &bad), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    if (api_.poll_cq(cq_, 1, &wc) == 1 && wc.wr_id == 99) return wc.status;
    std::this_thread::yield();
  }
  ADD_FAILURE() << "the rogue's write never completed";
  return IBV_WC_GENERAL_ERR;
}

}  // namespace tictac::verbs::testing
