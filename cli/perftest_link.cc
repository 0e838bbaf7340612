#include "cli/perftest_link.h"

#include <cstring>
#include <utility>

namespace tictac::cli::perftest {

HostBuffer::HostBuffer(std::size_t n)
    : bytes(n), region(transport::MemoryRegion::host(bytes.data(), n).value()) {}

transport::Callback on_done(const std::shared_ptr<Monitor>& mon, std::string what,
                            std::function<void(std::uint64_t bytes)> on_ok) {
  return [mon, what = std::move(what), on_ok = std::move(on_ok)](const Status& s, std::uint64_t n,
                                                                 transport::PeerId) {
    if (!s.ok()) {
      mon->fail(s.with_context(what));
      return;
    }
    mon->update([&] { on_ok(n); });
  };
}

namespace {
struct ControlSend {
  explicit ControlSend(std::string t) : text(std::move(t)), buffer(text.size()) {
    std::memcpy(buffer.bytes.data(), text.data(), text.size());
  }
  std::string text;
  HostBuffer buffer;
};
}  // namespace

Status send_control(const Link& link, Tag tag, const Fields& fields) {
  auto mon = std::make_shared<Monitor>(link.idle_limit);
  auto msg = std::make_shared<ControlSend>(fields.encode());
  auto sent = std::make_shared<bool>(false);
  const std::string what = "sending perftest control message " + std::to_string(tag);
  link.ctx->send(link.peer, tag, msg->buffer.region, 0, msg->text.size(), /*priority=*/0,
                 on_done(mon, what, [msg, sent](std::uint64_t) { *sent = true; }));
  return mon->wait([&] { return *sent; }, what);
}

std::shared_ptr<PendingControl> PendingControl::post(const Link& link, const std::shared_ptr<Monitor>& mon, Tag tag,
                                                     std::string what, std::function<void()> then) {
  std::shared_ptr<PendingControl> p(new PendingControl());
  PendingControl* raw = p.get();
  link.ctx->recv(link.peer, tag, p->buffer_.region, 0, kMaxControlBytes,
                 on_done(mon, "waiting for " + what, [p, raw, then = std::move(then)](std::uint64_t n) {
                   raw->arrival_ns_ = now_ns();
                   raw->bytes_ = n;
                   raw->arrived_ = true;
                   if (then) then();
                 }));
  return p;
}

Result<Fields> PendingControl::fields() const {
  return Fields::decode(std::string_view(reinterpret_cast<const char*>(buffer_.bytes.data()), bytes_));
}

Result<Fields> recv_control(const Link& link, Tag tag, std::string_view what) {
  auto mon = std::make_shared<Monitor>(link.idle_limit);
  std::shared_ptr<PendingControl> p = PendingControl::post(link, mon, tag, std::string(what));
  TICTAC_RETURN_IF_ERROR(mon->wait([&] { return p->arrived(); }, what));
  return p->fields();
}

}  // namespace tictac::cli::perftest
