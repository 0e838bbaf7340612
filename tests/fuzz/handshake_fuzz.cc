// libFuzzer target: arbitrary bytes into the handshake parsers and state machine.
//
// The first input byte picks this side's role, whether it has a token and how the remaining
// bytes are cut into feed() calls; the rest is what the "peer" sends. Properties checked (a
// violation aborts, which libFuzzer reports): nothing crashes or reads out of bounds (ASan),
// feed() never claims more bytes than it was given, a handshake never becomes both done and
// failed, an unauthenticated peer never makes a token-holding side `authenticated()` (it cannot
// forge the HMAC), and every output is a sequence of messages this code itself accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "transport/auth/handshake.h"
#include "transport/auth/messages.h"

namespace {

using namespace tictac::auth;

void check(bool ok) {
  if (!ok) std::abort();
}

// Every byte a Handshake emits must parse as a series of well-formed messages.
void check_output(const Bytes& out) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    auto rest = std::span<const std::uint8_t>(out).subspan(pos);
    tictac::Result<Header> h = parse_header(rest, kDefaultProtocolVersion);
    check(h.ok() && h->version == kDefaultProtocolVersion);
    check(rest.size() >= kHeaderBytes + h->body_len);
    auto body = rest.subspan(kHeaderBytes, h->body_len);
    switch (static_cast<MessageType>(h->type)) {
      case MessageType::hello: check(parse_hello(body).ok()); break;
      case MessageType::proof: check(parse_proof(body).ok()); break;
      case MessageType::result: check(parse_result(body).ok()); break;
    }
    pos += kHeaderBytes + h->body_len;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::span<const std::uint8_t> input(data + 1, size - 1);

  // The pure parsers on their own.
  if (input.size() >= kHeaderBytes) (void)parse_header(input, kDefaultProtocolVersion);
  (void)parse_hello(input);
  (void)parse_proof(input);
  (void)parse_result(input);

  HandshakeConfig config;
  config.role = (mode & 1) != 0 ? Role::acceptor : Role::initiator;
  if ((mode & 2) != 0) config.token = "fuzzing-token-0123456789";
  config.peer = "fuzz";
  tictac::Result<Handshake> started = Handshake::start(config);
  check(started.ok());
  Handshake& h = *started;
  const bool has_token = config.token.has_value();
  check_output(h.take_output());

  const std::size_t chunk = 1 + (mode >> 2);  // 1..64 bytes per feed()
  std::size_t pos = 0;
  while (pos < input.size()) {
    const std::size_t n = std::min(chunk, input.size() - pos);
    tictac::Result<std::size_t> used = h.feed(input.subspan(pos, n));
    check(!(h.done() && h.failed()));
    check_output(h.take_output());
    if (!used.ok()) {
      check(h.failed());
      break;
    }
    check(*used <= n);
    if (h.done()) break;
    check(*used == n);  // before the end, everything offered is consumed
    pos += n;
  }
  // Without knowing the token the peer cannot have proved itself.
  if (has_token) check(!h.authenticated());
  return 0;
}
