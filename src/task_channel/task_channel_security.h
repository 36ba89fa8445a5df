// How the task channel (task_channel.h) protects its frames: the handshake that
// proves both ends hold the cluster token and agrees on keys, and the sealing of
// every frame after it.
//
// The handshake (three frames, each at most 128 bytes):
//   worker -> owner  kChallenge:   protection (1 byte) | worker nonce (32)
//   owner  -> worker kProof:       owner nonce (32) | owner X25519 key (32) | HMAC(token, "owner" | transcript)
//   worker -> owner  kServerProof: worker X25519 key (32) | HMAC(token, "worker" | transcript)
// where the transcript is every byte of the three frames before the MAC at hand. The
// MACs cover the protection the worker announced and both ephemeral keys, so a peer
// without the token can neither pass, nor downgrade the protection, nor put its own
// keys in. The worker makes its key only once the owner proved itself: a stranger
// costs it an HMAC, not a key exchange. The keys of the two directions come from the
// token, the transcript and the X25519 shared secret (so recorded traffic stays
// sealed even if the token leaks later).
//
// After it, every frame is sealed with AES-256-GCM under its direction's key,
// the nonce being the frame's number in that direction (never sent): a frame altered,
// dropped, replayed or moved fails to open, and the connection is closed.
//   kEncrypt: the header (length, kind) is authenticated, the body encrypted;
//   kMac:     header and body are authenticated and travel in the clear;
//   kNone:    frames travel as they are (trusted networks only; an explicit opt-out).
// A sealed frame's body ends in a 16-byte tag, counted in its length.
//
// The worker chooses the protection; an owner refuses a worker whose protection is
// weaker than its own setting, with an error naming both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace manta::core {

namespace task_channel_internal {
class Aead;          // an AES-256-GCM context under one key
class EphemeralKey;  // an X25519 key pair for one handshake
}  // namespace task_channel_internal

enum class ChannelProtection : uint8_t { kNone = 0, kMac = 1, kEncrypt = 2 };

// The setting task_channel_protection (config_def.h): "auto" (kEncrypt when this
// process uses TLS, else kMac), "encrypt", "mac" or "none". InvalidArgument names a
// value that is none of these.
absl::StatusOr<ChannelProtection> ParseChannelProtection(std::string_view setting, bool tls);
const char* ChannelProtectionName(ChannelProtection protection);

// What one end of a task channel needs to shake hands: the cluster token, and the
// protection it uses (worker) or requires at least (owner).
struct TaskChannelSecurity {
  std::string token;
  ChannelProtection protection = ChannelProtection::kMac;
  // What the handshake is for, in every MAC and key it makes: a handshake of one
  // channel (the object data channel uses "object channel") proves nothing to another.
  std::string purpose = "task channel";
};

inline constexpr size_t kFrameTagBytes = 16;
// A sealed frame's bytes beyond its body: the header (length, kind) and the tag.
inline constexpr size_t kSealedFrameOverheadBytes = 5 + kFrameTagBytes;

// Seals the frames of one direction, in the order they are sent. Not thread-safe.
class FrameSealer {
 public:
  // `key`: 32 bytes. REQUIRES: protection != kNone.
  FrameSealer(ChannelProtection protection, std::string_view key);
  ~FrameSealer();
  FrameSealer(const FrameSealer&) = delete;
  FrameSealer& operator=(const FrameSealer&) = delete;

  // Appends one sealed frame of `kind` with `body`.
  void Append(uint8_t kind, std::string_view body, std::string* out);
  // Appends the sealed form of `frames`, plain frames one after the other (as
  // AppendFrame builds them).
  void SealFrames(std::string_view frames, std::string* out);
  // Seals one frame of `kind` whose body is body[0..n) into `out`, which holds
  // kSealedFrameOverheadBytes + n bytes: the body is encrypted on its way, in one
  // pass. Returns the frame's size. REQUIRES: kEncrypt.
  size_t SealInto(uint8_t kind, const char* body, size_t n, char* out);

 private:
  const ChannelProtection protection_;
  std::unique_ptr<task_channel_internal::Aead> aead_;
  uint64_t next_frame_ = 0;
};

// Opens the frames of one direction, in the order they arrive. Not thread-safe.
class FrameOpener {
 public:
  FrameOpener(ChannelProtection protection, std::string_view key);
  ~FrameOpener();
  FrameOpener(const FrameOpener&) = delete;
  FrameOpener& operator=(const FrameOpener&) = delete;

  // `frame` is a whole sealed frame, header included, which may be decrypted in
  // place. On success *body is its plain body (inside `frame`). False when it does
  // not open (altered, replayed, reordered, or under another key); then nothing
  // later opens either.
  bool Open(char* frame, size_t frame_bytes, std::string_view* body);
  // The same, the body decrypted into `body_out` (frame_bytes -
  // kSealedFrameOverheadBytes bytes) in one pass; `frame` is left as it was. On
  // failure `body_out` holds bytes not to be used. REQUIRES: kEncrypt.
  bool OpenInto(const char* frame, size_t frame_bytes, char* body_out);

 private:
  // Counts a frame that opened; a failure sticks.
  bool Opened(bool ok);
  const ChannelProtection protection_;
  std::unique_ptr<task_channel_internal::Aead> aead_;
  uint64_t next_frame_ = 0;
  bool failed_ = false;
};

// The keys a handshake agreed on: one per direction.
struct ChannelKeys {
  ChannelProtection protection = ChannelProtection::kNone;
  std::string owner_to_worker;
  std::string worker_to_owner;
};

// The worker's side of one handshake.
class WorkerHandshake {
 public:
  explicit WorkerHandshake(const TaskChannelSecurity& security);
  ~WorkerHandshake();
  // The body of the kChallenge frame.
  const std::string& challenge() const { return challenge_; }
  // Checks the owner's kProof body; returns the body of the kServerProof frame and
  // fills *keys. PermissionDenied when the proof is wrong or malformed.
  absl::StatusOr<std::string> Answer(std::string_view proof, ChannelKeys* keys);

 private:
  const std::string token_;
  const ChannelProtection protection_;
  const std::string purpose_;
  std::string challenge_;
};

// The owner's side of one handshake.
class OwnerHandshake {
 public:
  explicit OwnerHandshake(const TaskChannelSecurity& security);
  ~OwnerHandshake();
  // The body of the kProof frame that answers the worker's kChallenge body.
  // PermissionDenied for a malformed challenge or a protection weaker than this
  // owner's.
  absl::StatusOr<std::string> Prove(std::string_view challenge);
  // Checks the worker's kServerProof body and fills *keys.
  absl::Status Check(std::string_view server_proof, ChannelKeys* keys);

 private:
  const std::string token_;
  const ChannelProtection minimum_;
  const std::string purpose_;
  std::unique_ptr<task_channel_internal::EphemeralKey> key_;
  // Set by Prove: the transcript so far, and the protection the worker chose.
  std::string transcript_;
  ChannelProtection protection_ = ChannelProtection::kNone;
};

}  // namespace manta::core
