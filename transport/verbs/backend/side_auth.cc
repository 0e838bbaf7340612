#include "transport/verbs/backend/side_auth.h"

#include <openssl/crypto.h>

#include <cstdint>
#include <span>

#include "transport/verbs/backend/qp_info.h"

namespace tictac::verbs {

SideToken::~SideToken() {
  if (value && !value->empty()) OPENSSL_cleanse(value->data(), value->size());
}

Result<SideAuth> SideAuth::start(auth::Role role, const SideToken& token, std::string peer) {
  auth::HandshakeConfig config;
  config.role = role;
  config.token = token.value;
  // A peer with another QpInfo layout fails the version check here, before anything else.
  config.protocol_version = kQpInfoVersion;
  config.peer = std::move(peer);
  Result<auth::Handshake> hs = auth::Handshake::start(std::move(config));
  TICTAC_RETURN_IF_ERROR(hs);
  return SideAuth(std::move(hs).value());
}

Status SideAuth::send_output(SideStream& stream) {
  const auth::Bytes out = hs_.take_output();
  if (out.empty()) return stream.flush();
  return stream.write(std::as_bytes(std::span(out)));
}

Status SideAuth::failed(SideStream& stream, const Status& why) {
  (void)send_output(stream);  // the refusal with its reason, best effort
  return Status(why.code(), "verbs side channel: " + why.message(), why.origin());
}

Result<bool> SideAuth::step(SideStream& stream) {
  for (;;) {
    TICTAC_RETURN_IF_ERROR(send_output(stream));
    if (hs_.done()) return true;
    Result<std::size_t> got = stream.read_available(auth::kMaxMessageBytes);
    if (!got.ok() && stream.buffered().empty()) return failed(stream, got.status());
    if (stream.buffered().empty()) return false;
    const std::span<const std::byte> in = stream.buffered();
    Result<std::size_t> used =
        hs_.feed(std::span(reinterpret_cast<const std::uint8_t*>(in.data()), in.size()));
    if (!used.ok()) return failed(stream, used.status());
    stream.take(*used);
    if (!got.ok() && !hs_.done()) return failed(stream, got.status());
    if (got.ok() && *got == 0 && !hs_.done()) return false;
  }
}

}  // namespace tictac::verbs
