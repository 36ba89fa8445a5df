#include "src/task_channel/task_channel_security.h"

#include <glog/logging.h>
#include <openssl/evp.h>
#include <openssl/modes.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "src/common/security.h"
#include "src/task_channel/task_channel_internal.h"

namespace manta::core {
namespace task_channel_internal {

namespace {
constexpr size_t kKeyBytes = 32;  // X25519 public keys
constexpr size_t kChallengeBytes = 1 + kNonceBytes;
constexpr size_t kProofBytes = kNonceBytes + kKeyBytes + kMacBytes;
constexpr size_t kServerProofBytes = kKeyBytes + kMacBytes;
// EVP takes int lengths: longer inputs go in pieces.
constexpr size_t kMaxPieceBytes = size_t{1} << 30;

const unsigned char* Bytes(const char* p) { return reinterpret_cast<const unsigned char*>(p); }
unsigned char* Bytes(char* p) { return reinterpret_cast<unsigned char*>(p); }

void StoreLe32(uint32_t value, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
}  // namespace

// AES-256-GCM under one key, one direction. With `authenticate_only` (kMac: the
// whole frame is associated data, nothing is encrypted) it computes the same tags
// through OpenSSL's GCM mode directly (GHASH with carry-less multiplication) over
// EVP's AES-256-ECB (AES-NI) as its block function, one block per frame: EVP's
// AES-GCM set the nonce and the tag through parameter lists on every call, which cost
// a synchronous task about a microsecond a frame, four frames a task.
class Aead {
 public:
  Aead(std::string_view key, bool seal, bool authenticate_only = false)
      : seal_(seal), ctx_(EVP_CIPHER_CTX_new()) {
    CHECK(ctx_ != nullptr) << "out of memory for a cipher context";
    CHECK_EQ(key.size(), kKeyBytes);
    if (!authenticate_only) {
      CHECK_EQ(EVP_CipherInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, Bytes(key.data()), nullptr, seal ? 1 : 0), 1);
      return;
    }
    CHECK_EQ(EVP_EncryptInit_ex(ctx_, EVP_aes_256_ecb(), nullptr, Bytes(key.data()), nullptr), 1);
    CHECK_EQ(EVP_CIPHER_CTX_set_padding(ctx_, 0), 1);
    gcm_ = CRYPTO_gcm128_new(ctx_, &EcbBlock);
    CHECK(gcm_ != nullptr) << "out of memory for a GCM context";
  }
  ~Aead() {
    if (gcm_ != nullptr) CRYPTO_gcm128_release(gcm_);
    EVP_CIPHER_CTX_free(ctx_);
  }
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  // Authenticates `aad`, seals or opens in[0..n) into out (which may be `in`), and
  // writes (sealing) or checks (opening) the tag. False when the tag is wrong.
  // REQUIRES: n == 0 when authenticating only.
  bool Run(uint64_t frame, std::string_view aad, const char* in, size_t n, char* out, char* tag) {
    unsigned char nonce[12] = {0};
    for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<unsigned char>((frame >> (8 * i)) & 0xff);
    if (gcm_ != nullptr) return RunGmac(nonce, aad, n, tag);
    CHECK_EQ(EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, nonce, seal_ ? 1 : 0), 1);
    int len = 0;
    if (!Update(nullptr, Bytes(aad.data()), aad.size())) return false;
    if (n > 0 && !Update(Bytes(out), Bytes(in), n)) return false;
    if (!seal_ && EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, kFrameTagBytes, tag) != 1) return false;
    if (EVP_CipherFinal_ex(ctx_, nullptr, &len) != 1) return false;
    if (seal_) CHECK_EQ(EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, kFrameTagBytes, tag), 1);
    return true;
  }

 private:
  bool Update(unsigned char* out, const unsigned char* in, size_t n) {
    while (n > 0) {
      size_t piece = std::min(n, kMaxPieceBytes);
      int len = 0;
      if (EVP_CipherUpdate(ctx_, out, &len, in, static_cast<int>(piece)) != 1) return false;
      if (out != nullptr) out += piece;
      in += piece;
      n -= piece;
    }
    return true;
  }

  // GCM's block function: one AES-256 block through the ECB context `key`.
  static void EcbBlock(const unsigned char in[16], unsigned char out[16], const void* key) {
    int len = 0;
    CHECK_EQ(EVP_EncryptUpdate(static_cast<EVP_CIPHER_CTX*>(const_cast<void*>(key)), out, &len, in, 16), 1);
  }

  bool RunGmac(const unsigned char nonce[12], std::string_view aad, size_t n, char* tag) {
    CHECK_EQ(n, 0u) << "authenticate-only frames carry no encrypted part";
    CRYPTO_gcm128_setiv(gcm_, nonce, 12);
    if (CRYPTO_gcm128_aad(gcm_, Bytes(aad.data()), aad.size()) != 0) return false;  // over GCM's 2^61 bytes
    if (seal_) {
      CRYPTO_gcm128_tag(gcm_, reinterpret_cast<unsigned char*>(tag), kFrameTagBytes);
      return true;
    }
    return CRYPTO_gcm128_finish(gcm_, reinterpret_cast<const unsigned char*>(tag), kFrameTagBytes) == 0;
  }

  const bool seal_;
  EVP_CIPHER_CTX* const ctx_;
  GCM128_CONTEXT* gcm_ = nullptr;  // authenticating only
};

class EphemeralKey {
 public:
  EphemeralKey() : key_(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519")) {
    CHECK(key_ != nullptr) << "cannot make an X25519 key";
  }
  ~EphemeralKey() { EVP_PKEY_free(key_); }
  EphemeralKey(const EphemeralKey&) = delete;
  EphemeralKey& operator=(const EphemeralKey&) = delete;

  std::string Public() const {
    std::string out(kKeyBytes, '\0');
    size_t len = out.size();
    CHECK_EQ(EVP_PKEY_get_raw_public_key(key_, Bytes(out.data()), &len), 1);
    return out;
  }

  // The shared secret with `peer_public`; empty when that is not a usable key.
  std::string Agree(std::string_view peer_public) const {
    std::string secret;
    EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, Bytes(peer_public.data()),
                                                 peer_public.size());
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(key_, nullptr);
    size_t len = kKeyBytes;
    secret.resize(len);
    // OpenSSL refuses a peer key whose shared secret would be all zeros.
    if (peer == nullptr || ctx == nullptr || EVP_PKEY_derive_init(ctx) != 1 || EVP_PKEY_derive_set_peer(ctx, peer) != 1 ||
        EVP_PKEY_derive(ctx, Bytes(secret.data()), &len) != 1 || len != kKeyBytes) {
      secret.clear();
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(peer);
    return secret;
  }

 private:
  EVP_PKEY* const key_;
};

namespace {

std::string Mac(const std::string& token, std::string_view purpose, std::string_view role,
                std::string_view transcript) {
  std::string message = "manta ";
  message.append(purpose).append(" v2 ").append(role).append(transcript);
  return HmacSha256(token, message);
}

void DeriveKeys(const std::string& token, std::string_view purpose, ChannelProtection protection,
                std::string_view transcript, std::string_view shared_secret, ChannelKeys* keys) {
  std::string material = "manta ";
  material.append(purpose).append(" v2 keys");
  material.append(transcript).append(shared_secret);
  std::string prk = HmacSha256(token, material);
  keys->protection = protection;
  keys->owner_to_worker = HmacSha256(prk, "owner to worker");
  keys->worker_to_owner = HmacSha256(prk, "worker to owner");
}

}  // namespace
}  // namespace task_channel_internal

using task_channel_internal::Aead;
using task_channel_internal::EphemeralKey;

absl::StatusOr<ChannelProtection> ParseChannelProtection(std::string_view setting, bool tls) {
  if (setting == "auto" || setting.empty()) return tls ? ChannelProtection::kEncrypt : ChannelProtection::kMac;
  if (setting == "encrypt") return ChannelProtection::kEncrypt;
  if (setting == "mac") return ChannelProtection::kMac;
  if (setting == "none") return ChannelProtection::kNone;
  return absl::InvalidArgumentError("task_channel_protection is '" + std::string(setting) +
                                    "'; it must be auto, encrypt, mac or none");
}

const char* ChannelProtectionName(ChannelProtection protection) {
  switch (protection) {
    case ChannelProtection::kNone:
      return "none";
    case ChannelProtection::kMac:
      return "mac";
    case ChannelProtection::kEncrypt:
      return "encrypt";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------
// Frames

FrameSealer::FrameSealer(ChannelProtection protection, std::string_view key)
    : protection_(protection),
      aead_(std::make_unique<Aead>(key, /*seal=*/true, protection == ChannelProtection::kMac)) {
  CHECK(protection != ChannelProtection::kNone);
}

FrameSealer::~FrameSealer() = default;

void FrameSealer::Append(uint8_t kind, std::string_view body, std::string* out) {
  using task_channel_internal::kHeaderBytes;
  const size_t start = out->size();
  out->resize(start + kSealedFrameOverheadBytes + body.size());
  char* frame = out->data() + start;
  if (protection_ == ChannelProtection::kEncrypt) {
    SealInto(kind, body.data(), body.size(), frame);
    return;
  }
  // Authenticated only: header and body in the clear, then the tag over both.
  task_channel_internal::StoreLe32(static_cast<uint32_t>(1 + body.size() + kFrameTagBytes), frame);
  frame[4] = static_cast<char>(kind);
  std::memcpy(frame + kHeaderBytes, body.data(), body.size());
  // A frame that failed to seal would go out with a tag of zeros: OpenSSL failing
  // here cannot protect anything, so stop.
  CHECK(aead_->Run(next_frame_++, std::string_view(frame, kHeaderBytes + body.size()), nullptr, 0, nullptr,
                   frame + kHeaderBytes + body.size()))
      << "sealing a task channel frame failed in OpenSSL";
}

void FrameSealer::SealFrames(std::string_view frames, std::string* out) {
  using task_channel_internal::kHeaderBytes;
  size_t at = 0;
  while (at + kHeaderBytes <= frames.size()) {
    const uint32_t length = task_channel_internal::LoadLe32(frames.data() + at);
    CHECK(length >= 1 && at + 4 + length <= frames.size()) << "SealFrames: not a sequence of whole frames";
    Append(static_cast<uint8_t>(frames[at + 4]), frames.substr(at + kHeaderBytes, length - 1), out);
    at += 4 + length;
  }
  CHECK_EQ(at, frames.size()) << "SealFrames: not a sequence of whole frames";
}

static_assert(kSealedFrameOverheadBytes == task_channel_internal::kHeaderBytes + kFrameTagBytes);

size_t FrameSealer::SealInto(uint8_t kind, const char* body, size_t n, char* out) {
  using task_channel_internal::kHeaderBytes;
  CHECK(protection_ == ChannelProtection::kEncrypt) << "SealInto encrypts";
  task_channel_internal::StoreLe32(static_cast<uint32_t>(1 + n + kFrameTagBytes), out);
  out[4] = static_cast<char>(kind);
  char* payload = out + kHeaderBytes;
  CHECK(aead_->Run(next_frame_++, std::string_view(out, kHeaderBytes), body, n, payload, payload + n))
      << "sealing a frame failed in OpenSSL";
  return kHeaderBytes + n + kFrameTagBytes;
}

FrameOpener::FrameOpener(ChannelProtection protection, std::string_view key)
    : protection_(protection),
      aead_(std::make_unique<Aead>(key, /*seal=*/false, protection == ChannelProtection::kMac)) {
  CHECK(protection != ChannelProtection::kNone);
}

FrameOpener::~FrameOpener() = default;

bool FrameOpener::Open(char* frame, size_t frame_bytes, std::string_view* body) {
  using task_channel_internal::kHeaderBytes;
  if (failed_ || frame_bytes < kSealedFrameOverheadBytes) return Opened(false);
  const size_t n = frame_bytes - kSealedFrameOverheadBytes;
  char* payload = frame + kHeaderBytes;
  *body = std::string_view(payload, n);
  // Encrypted: decrypted in place.
  if (protection_ == ChannelProtection::kEncrypt) return OpenInto(frame, frame_bytes, payload);
  return Opened(aead_->Run(next_frame_, std::string_view(frame, kHeaderBytes + n), nullptr, 0, nullptr, payload + n));
}

bool FrameOpener::OpenInto(const char* frame, size_t frame_bytes, char* body_out) {
  using task_channel_internal::kHeaderBytes;
  CHECK(protection_ == ChannelProtection::kEncrypt) << "OpenInto decrypts";
  if (failed_ || frame_bytes < kSealedFrameOverheadBytes) return Opened(false);
  const size_t n = frame_bytes - kSealedFrameOverheadBytes;
  const char* payload = frame + kHeaderBytes;
  // The tag is only read (GCM's EVP interface takes it without const).
  return Opened(aead_->Run(next_frame_, std::string_view(frame, kHeaderBytes), payload, n, body_out,
                           const_cast<char*>(payload + n)));
}

bool FrameOpener::Opened(bool ok) {
  if (!ok) {
    failed_ = true;
    return false;
  }
  ++next_frame_;
  return true;
}

// ---------------------------------------------------------------------------
// The handshake

WorkerHandshake::WorkerHandshake(const TaskChannelSecurity& security)
    : token_(security.token), protection_(security.protection), purpose_(security.purpose) {
  challenge_.push_back(static_cast<char>(protection_));
  challenge_.append(task_channel_internal::NewNonce());
}

WorkerHandshake::~WorkerHandshake() = default;

absl::StatusOr<std::string> WorkerHandshake::Answer(std::string_view proof, ChannelKeys* keys) {
  using namespace task_channel_internal;  // NOLINT: the sizes of the handshake
  if (proof.size() != kProofBytes) return absl::PermissionDeniedError("a malformed handshake proof");
  std::string transcript = challenge_;
  transcript.append(proof.substr(0, kProofBytes - kMacBytes));
  if (!ConstantTimeEquals(proof.substr(kProofBytes - kMacBytes), Mac(token_, purpose_, "owner", transcript))) {
    return absl::PermissionDeniedError("failed handshake (wrong cluster token)");
  }
  EphemeralKey key;
  std::string shared = key.Agree(proof.substr(kNonceBytes, kKeyBytes));
  if (shared.empty()) return absl::PermissionDeniedError("the owner's handshake key is not usable");
  std::string answer = key.Public();
  transcript.append(answer);
  answer.append(Mac(token_, purpose_, "worker", transcript));
  DeriveKeys(token_, purpose_, protection_, transcript, shared, keys);
  return answer;
}

OwnerHandshake::OwnerHandshake(const TaskChannelSecurity& security)
    : token_(security.token),
      minimum_(security.protection),
      purpose_(security.purpose),
      key_(std::make_unique<EphemeralKey>()) {}

OwnerHandshake::~OwnerHandshake() = default;

absl::StatusOr<std::string> OwnerHandshake::Prove(std::string_view challenge) {
  using namespace task_channel_internal;  // NOLINT: the sizes of the handshake
  const auto announced = challenge.empty() ? 0xff : static_cast<uint8_t>(challenge[0]);
  if (challenge.size() != kChallengeBytes || announced > static_cast<uint8_t>(ChannelProtection::kEncrypt)) {
    return absl::PermissionDeniedError("a malformed handshake challenge (is the peer a Manta worker of this version?)");
  }
  protection_ = static_cast<ChannelProtection>(announced);
  if (protection_ < minimum_) {
    return absl::FailedPreconditionError(
        std::string("the worker protects its task channel with '") + ChannelProtectionName(protection_) +
        "', weaker than the '" + ChannelProtectionName(minimum_) +
        "' this process requires (task_channel_protection must be the same in every process of a cluster)");
  }
  std::string proof = NewNonce() + key_->Public();
  transcript_ = std::string(challenge) + proof;
  proof.append(Mac(token_, purpose_, "owner", transcript_));
  return proof;
}

absl::Status OwnerHandshake::Check(std::string_view server_proof, ChannelKeys* keys) {
  using namespace task_channel_internal;  // NOLINT: the sizes of the handshake
  const absl::Status refused = absl::PermissionDeniedError("the handshake failed: the peer does not hold this cluster's token");
  if (transcript_.empty() || server_proof.size() != kServerProofBytes) return refused;
  std::string_view worker_public = server_proof.substr(0, kKeyBytes);
  std::string transcript = transcript_;
  transcript.append(worker_public);
  if (!ConstantTimeEquals(server_proof.substr(kKeyBytes), Mac(token_, purpose_, "worker", transcript))) return refused;
  std::string shared = key_->Agree(worker_public);
  if (shared.empty()) return absl::PermissionDeniedError("the worker's handshake key is not usable");
  DeriveKeys(token_, purpose_, protection_, transcript, shared, keys);
  return absl::OkStatus();
}

}  // namespace manta::core
