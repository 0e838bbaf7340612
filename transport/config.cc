#include "transport/config.h"

#include <string>

#include "common/log.h"
#include "common/tunables.h"
#include "transport/wire.h"

namespace tictac::transport {
namespace {

const StringTunable kChunkBytes{"TICTAC_CHUNK_BYTES", "auto",
                                "bytes per transfer chunk; a higher-priority message preempts at chunk "
                                "boundaries (1..1G), or auto: measured rate x TICTAC_CHUNK_TARGET, "
                                "64K..8M, tuned online per backend device (starts at 64K)"};
const StringTunable kWindow{"TICTAC_WINDOW", "auto",
                            "data chunks in flight per backend device, shared by all its peers "
                            "(1..4096), or auto: enough to keep the link full at the measured rate "
                            "and backend delay, 2..64, or 1 where a chunk takes 400 us or more "
                            "(a slow link; starts at 2)"};
const DurationTunable kChunkTarget{"TICTAC_CHUNK_TARGET", std::chrono::microseconds(100),
                                   "with TICTAC_CHUNK_BYTES=auto: the time one chunk takes at the "
                                   "measured rate, i.e. the pre-emption latency a chunk adds "
                                   "(10us..1s)", "100us"};
const DurationTunable kChunkTargetSolo{"TICTAC_CHUNK_TARGET_SOLO", std::chrono::milliseconds(1),
                                       "with TICTAC_CHUNK_BYTES=auto: the chunk time used while all "
                                       "data sent for 50 ms had one priority level (nothing to "
                                       "pre-empt), e.g. a plain allreduce; fewer, longer chunks cost "
                                       "less CPU. At or below TICTAC_CHUNK_TARGET: off (10us..1s)",
                                       "1ms"};
const SizeTunable kChunkSoloMax{"TICTAC_CHUNK_SOLO_MAX", 0,
                                "with TICTAC_CHUNK_BYTES=auto: the largest solo chunk (see "
                                "TICTAC_CHUNK_TARGET_SOLO) whatever the measured rate, on every "
                                "backend (64K..1G); 0 = each backend's own: 1 MiB for tcp, 8 MiB "
                                "for ucx and verbs (whose larger chunks skip a copy)"};
const SizeTunable kEagerBytes{"TICTAC_EAGER_BYTES", 256 << 10,
                              "eager receive pool per peer; smaller messages skip the READY round trip "
                              "while credit lasts (0 disables eager sends)"};
const DurationTunable kTimeout{"TICTAC_TIMEOUT", std::chrono::seconds(30),
                               "connect and handshake timeout, and the silence after which a peer is "
                               "declared dead", "30s"};
const BoolTunable kPriority{"TICTAC_PRIORITY", true,
                            "enforce priorities (1) or send in plain FIFO order (0)"};

const IntTunable kAdverts{"TICTAC_ADVERTS", 1024,
                          "receives posted before their message is announced are advertised to the "
                          "sender, whose send then skips the READY round trip and enters its "
                          "priority lane at once: at most this many outstanding per connection "
                          "(0 = off, 0..65536)"};

const BoolTunable kInline{"TICTAC_INLINE", true,
                          "an eager or claimed message that fits one chunk travels as one frame, "
                          "its ANNOUNCE carrying the data (1), or as ANNOUNCE + DATA (0, for "
                          "comparisons)"};

const IntTunable kMaxUnexpected{"TICTAC_MAX_UNEXPECTED", 65536,
                                "announced messages a peer may have waiting for a receive (each costs "
                                "a descriptor; eager bytes are bounded by TICTAC_EAGER_BYTES); past "
                                "it the peer is refused (1..2^32)"};
const IntTunable kMaxHandshakes{"TICTAC_MAX_HANDSHAKES", 64,
                                "incoming connections allowed in the handshake at once; more are "
                                "closed at once (1..65536)"};
const DurationTunable kHandshakeTimeout{"TICTAC_HANDSHAKE_TIMEOUT", std::chrono::seconds(10),
                                        "a connection's handshake must finish within this (and "
                                        "within TICTAC_TIMEOUT)", "10s"};

const BoolTunable kAuthMac{"TICTAC_AUTH_MAC", false,
                           "1 = every frame after the handshake carries a 16-byte HMAC-SHA256 tag "
                           "(keyed per connection and direction from TICTAC_AUTH_TOKEN and the "
                           "handshake nonces) over a sequence number and its header; a tampered, "
                           "replayed or reordered frame fails the connection. Needs "
                           "TICTAC_AUTH_TOKEN; both sides must set the same value"};

}  // namespace

TransportConfig TransportConfig::defaults() {
  TransportConfig c;
  c.auto_chunk = true;
  c.auto_window = true;
  c.chunk_bytes = kAutoStartChunk;
  c.window_chunks = kAutoStartWindow;
  return c;
}

Result<TransportConfig> TransportConfig::from_env() {
  TransportConfig c;
  auto chunk_text = kChunkBytes.get();
  TICTAC_RETURN_IF_ERROR(chunk_text);
  c.auto_chunk = *chunk_text == "auto";
  // auto starts small (the first measurement comes after a few chunks; a fast link grows it).
  if (c.auto_chunk) c.chunk_bytes = kAutoStartChunk;
  Result<std::uint64_t> chunk = c.auto_chunk ? Result<std::uint64_t>(c.chunk_bytes) : parse_size(*chunk_text);
  if (!chunk.ok()) {
    return invalid_argument("TICTAC_CHUNK_BYTES='" + *chunk_text + "': " + chunk.status().message() +
                            "; write a size such as 64K or 1M, or auto");
  }
  auto window_text = kWindow.get();
  TICTAC_RETURN_IF_ERROR(window_text);
  c.auto_window = *window_text == "auto";
  if (c.auto_window) c.window_chunks = kAutoStartWindow;
  Result<std::int64_t> window = c.auto_window ? Result<std::int64_t>(c.window_chunks) : parse_int(*window_text);
  if (!window.ok()) {
    return invalid_argument("TICTAC_WINDOW='" + *window_text + "': " + window.status().message() +
                            "; write a number of chunks (1..4096) or auto");
  }
  auto target = kChunkTarget.get();
  TICTAC_RETURN_IF_ERROR(target);
  c.chunk_target = *target;
  auto solo_target = kChunkTargetSolo.get();
  TICTAC_RETURN_IF_ERROR(solo_target);
  c.solo_chunk_target = *solo_target;
  auto solo_max = kChunkSoloMax.get();
  TICTAC_RETURN_IF_ERROR(solo_max);
  c.solo_chunk_max = *solo_max;
  auto eager = kEagerBytes.get();
  TICTAC_RETURN_IF_ERROR(eager);
  auto timeout = kTimeout.get();
  TICTAC_RETURN_IF_ERROR(timeout);
  auto priority = kPriority.get();
  TICTAC_RETURN_IF_ERROR(priority);
  auto adverts = kAdverts.get();
  TICTAC_RETURN_IF_ERROR(adverts);
  if (*adverts < 0 || *adverts > static_cast<std::int64_t>(wire::kMaxAdvertsOutstanding)) {
    return invalid_argument("TICTAC_ADVERTS=" + std::to_string(*adverts) + " is out of range 0.." +
                            std::to_string(wire::kMaxAdvertsOutstanding));
  }
  c.max_adverts = static_cast<std::uint32_t>(*adverts);
  auto inline_small = kInline.get();
  TICTAC_RETURN_IF_ERROR(inline_small);
  c.inline_small = *inline_small;
  auto unexpected = kMaxUnexpected.get();
  TICTAC_RETURN_IF_ERROR(unexpected);
  if (*unexpected < 1 || *unexpected > (std::int64_t{1} << 32)) {
    return invalid_argument("TICTAC_MAX_UNEXPECTED=" + std::to_string(*unexpected) + " is out of range 1..2^32");
  }
  c.max_unexpected = static_cast<std::uint64_t>(*unexpected);
  auto handshakes = kMaxHandshakes.get();
  TICTAC_RETURN_IF_ERROR(handshakes);
  if (*handshakes < 1 || *handshakes > 65536) {
    return invalid_argument("TICTAC_MAX_HANDSHAKES=" + std::to_string(*handshakes) + " is out of range 1..65536");
  }
  c.max_handshakes = static_cast<std::uint32_t>(*handshakes);
  auto hs_timeout = kHandshakeTimeout.get();
  TICTAC_RETURN_IF_ERROR(hs_timeout);
  c.handshake_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*hs_timeout);
  auto frame_mac = kAuthMac.get();
  TICTAC_RETURN_IF_ERROR(frame_mac);
  c.frame_mac = *frame_mac;
  if (*window < 1 || *window > 4096) {
    return invalid_argument("TICTAC_WINDOW=" + std::to_string(*window) + " is out of range 1..4096");
  }
  c.chunk_bytes = *chunk;
  c.window_chunks = static_cast<std::uint32_t>(*window);
  c.eager_bytes = *eager;
  c.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
  c.enforce_priority = *priority;
  TICTAC_RETURN_IF_ERROR(c.validate());
  TICTAC_LOG(debug) << "transport config: TICTAC_CHUNK_BYTES="
                    << (c.auto_chunk ? "auto" : std::to_string(c.chunk_bytes)) << " TICTAC_WINDOW="
                    << (c.auto_window ? "auto" : std::to_string(c.window_chunks))
                    << " TICTAC_CHUNK_TARGET=" << c.chunk_target.count() << "ns"
                    << " TICTAC_CHUNK_TARGET_SOLO=" << c.solo_chunk_target.count() << "ns"
                    << " TICTAC_CHUNK_SOLO_MAX=" << c.solo_chunk_max
                    << " TICTAC_EAGER_BYTES=" << c.eager_bytes
                    << " TICTAC_TIMEOUT=" << c.timeout.count()
                    << "ms TICTAC_PRIORITY=" << (c.enforce_priority ? 1 : 0)
                    << " TICTAC_ADVERTS=" << c.max_adverts
                    << " TICTAC_INLINE=" << (c.inline_small ? 1 : 0)
                    << " TICTAC_AUTH_MAC=" << (c.frame_mac ? 1 : 0);
  return c;
}

Status TransportConfig::validate() const {
  if (chunk_bytes < 1 || chunk_bytes > wire::kMaxChunkBytes) {
    return invalid_argument("chunk size " + std::to_string(chunk_bytes) +
                            " is out of range 1.." + std::to_string(wire::kMaxChunkBytes) +
                            " (TICTAC_CHUNK_BYTES)");
  }
  if (window_chunks < 1) return invalid_argument("window must be at least one chunk (TICTAC_WINDOW)");
  if (chunk_target < std::chrono::microseconds(10) || chunk_target > std::chrono::seconds(1)) {
    return invalid_argument("chunk target of " + std::to_string(chunk_target.count()) +
                            " ns is out of range 10us..1s (TICTAC_CHUNK_TARGET)");
  }
  if (solo_chunk_target < std::chrono::microseconds(10) || solo_chunk_target > std::chrono::seconds(1)) {
    return invalid_argument("solo chunk target of " + std::to_string(solo_chunk_target.count()) +
                            " ns is out of range 10us..1s (TICTAC_CHUNK_TARGET_SOLO)");
  }
  if (solo_chunk_max != 0 &&
      (solo_chunk_max < (64u << 10) || solo_chunk_max > wire::kMaxChunkBytes)) {
    return invalid_argument(
        "largest solo chunk of " + std::to_string(solo_chunk_max) +
        " bytes is out of range 64K..1G (TICTAC_CHUNK_SOLO_MAX; 0 = by backend)");
  }
  if (eager_bytes > (std::uint64_t{1} << 40)) {
    return invalid_argument("eager pool of " + std::to_string(eager_bytes) +
                            " bytes per peer is unreasonably large (TICTAC_EAGER_BYTES)");
  }
  if (max_adverts > wire::kMaxAdvertsOutstanding) {
    return invalid_argument("at most " + std::to_string(wire::kMaxAdvertsOutstanding) +
                            " outstanding adverts per connection (TICTAC_ADVERTS)");
  }
  if (max_unexpected < 1) return invalid_argument("TICTAC_MAX_UNEXPECTED must be at least 1");
  if (max_handshakes < 1) return invalid_argument("TICTAC_MAX_HANDSHAKES must be at least 1");
  if (handshake_timeout.count() < 1) {
    return invalid_argument("handshake timeout must be at least 1ms (TICTAC_HANDSHAKE_TIMEOUT)");
  }
  if (timeout.count() < 1) return invalid_argument("timeout must be at least 1ms (TICTAC_TIMEOUT)");
  return Status::Ok();
}

}  // namespace tictac::transport
