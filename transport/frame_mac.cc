#include "transport/frame_mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstring>
#include <string>

namespace tictac::transport {
namespace {

Status auth_failed(const std::string& why) {
  return Status(StatusCode::protocol_error, "frame authentication failed: " + why);
}

std::uint64_t load_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

FrameMac::FrameMac(const auth::SessionKey& key) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return;
  ctx_ = EVP_MAC_CTX_new(mac);
  EVP_MAC_free(mac);  // the context holds its own reference
  if (ctx_ == nullptr) return;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx_, key.data(), key.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx_);
    ctx_ = nullptr;
  }
}

FrameMac::~FrameMac() { EVP_MAC_CTX_free(ctx_); }  // frees (and clears) the keyed state

Result<FrameMac::Tag> FrameMac::compute(const wire::Header& header) const {
  std::array<std::uint8_t, 8 + wire::kHeaderBytes> input{};
  store_le(input.data(), seq_);
  const wire::HeaderBytes bytes = wire::encode(header);
  std::memcpy(input.data() + 8, bytes.data(), bytes.size());
  std::array<std::uint8_t, auth::kMacBytes> full{};
  std::size_t len = 0;
  // init without a key resets the context to its keyed state (no re-keying per frame).
  if (ctx_ == nullptr || EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1 ||
      EVP_MAC_update(ctx_, input.data(), input.size()) != 1 ||
      EVP_MAC_final(ctx_, full.data(), &len, full.size()) != 1 || len != full.size()) {
    return internal_error("HMAC-SHA256 failed computing a frame MAC (OpenSSL)");
  }
  Tag tag{};
  std::memcpy(tag.data(), full.data(), tag.size());
  return tag;
}

Result<FrameMac::Tag> FrameMac::seal(const wire::Header& header) {
  Result<Tag> tag = compute(header);
  if (tag.ok()) ++seq_;
  return tag;
}

Status FrameMac::verify(const wire::Header& header, const Tag& tag) {
  Result<Tag> expected = compute(header);
  if (!expected.ok()) return expected.status();
  if (CRYPTO_memcmp(expected->data(), tag.data(), tag.size()) != 0) {
    return auth_failed("the tag of " + std::string(wire::to_string(header.type)) +
                       " frame number " + std::to_string(seq_) +
                       " does not match (the frame was altered, replayed, reordered or dropped on "
                       "the way, or the peer's key differs)");
  }
  ++seq_;
  return Status::Ok();
}

wire::Header FrameMac::make_tag_frame(const Tag& tag) {
  wire::Header h;
  h.type = wire::FrameType::mac;
  h.tag = load_le(tag.data());
  h.msg_id = load_le(tag.data() + 8);
  return h;
}

Result<FrameMac::Tag> FrameMac::parse_tag_frame(const wire::Header& h) {
  if (h.type != wire::FrameType::mac) {
    return auth_failed("expected a MAC frame before the " + std::string(wire::to_string(h.type)) +
                       " frame (TICTAC_AUTH_MAC is on)");
  }
  if (h.flags != 0 || h.offset != 0 || h.total != 0 || h.priority != 0 || h.length != 0 ||
      h.aux != 0) {
    return auth_failed("MAC frame with fields other than its tag set");
  }
  Tag tag{};
  store_le(tag.data(), h.tag);
  store_le(tag.data() + 8, h.msg_id);
  return tag;
}

}  // namespace tictac::transport
