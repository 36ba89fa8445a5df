// The task channel's handshake and frame sealing (src/task_channel/task_channel_security.h)
// without sockets: both ends agree on keys only with the same token and an untouched
// transcript; a sealed frame opens once, in order, under its own direction's key, and
// not at all after any change; encryption hides the body, a MAC does not.
#include "src/task_channel/task_channel_security.h"

#include <string>
#include <vector>

#include <openssl/evp.h>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel.h"
#include "src/task_channel/task_channel_internal.h"

namespace manta::core {
namespace {

constexpr ChannelProtection kSealed[] = {ChannelProtection::kMac, ChannelProtection::kEncrypt};

// A whole handshake between an owner and a worker; false when either end refused.
bool ShakeHands(const TaskChannelSecurity& owner_security, const TaskChannelSecurity& worker_security,
                ChannelKeys* owner_keys, ChannelKeys* worker_keys) {
  WorkerHandshake worker(worker_security);
  OwnerHandshake owner(owner_security);
  absl::StatusOr<std::string> proof = owner.Prove(worker.challenge());
  if (!proof.ok()) return false;
  absl::StatusOr<std::string> answer = worker.Answer(*proof, worker_keys);
  return answer.ok() && owner.Check(*answer, owner_keys).ok();
}

// The sealed frames in `bytes`, cut at their length headers.
std::vector<std::string> CutFrames(const std::string& bytes) {
  std::vector<std::string> frames;
  for (size_t at = 0; at < bytes.size();) {
    size_t length = 4 + task_channel_internal::LoadLe32(bytes.data() + at);
    frames.push_back(bytes.substr(at, length));
    at += length;
  }
  return frames;
}

bool OpenFrame(FrameOpener& opener, std::string frame, std::string* body = nullptr) {
  std::string_view opened;
  if (!opener.Open(frame.data(), frame.size(), &opened)) return false;
  if (body != nullptr) *body = std::string(opened);
  return true;
}

TEST(TaskChannelHandshakeTest, BothEndsAgreeOnTheWorkersProtectionAndOnFreshKeys) {
  const std::string token = NewClusterToken();
  for (ChannelProtection protection :
       {ChannelProtection::kNone, ChannelProtection::kMac, ChannelProtection::kEncrypt}) {
    ChannelKeys owner_keys, worker_keys, again;
    ASSERT_TRUE(ShakeHands({token, ChannelProtection::kNone}, {token, protection}, &owner_keys, &worker_keys));
    EXPECT_EQ(owner_keys.protection, protection);
    EXPECT_EQ(worker_keys.protection, protection);
    EXPECT_EQ(owner_keys.owner_to_worker, worker_keys.owner_to_worker);
    EXPECT_EQ(owner_keys.worker_to_owner, worker_keys.worker_to_owner);
    EXPECT_EQ(owner_keys.owner_to_worker.size(), 32u);
    EXPECT_NE(owner_keys.owner_to_worker, owner_keys.worker_to_owner);
    // Another connection, other keys.
    ASSERT_TRUE(ShakeHands({token, protection}, {token, protection}, &again, &worker_keys));
    EXPECT_NE(again.owner_to_worker, owner_keys.owner_to_worker);
  }
}

TEST(TaskChannelHandshakeTest, AnotherTokenFailsAtWhicheverEndChecksIt) {
  const std::string token = NewClusterToken();
  const TaskChannelSecurity ours{token, ChannelProtection::kMac};
  const TaskChannelSecurity theirs{NewClusterToken(), ChannelProtection::kMac};
  // An owner with another token: the worker refuses its proof.
  WorkerHandshake worker(ours);
  OwnerHandshake stranger(theirs);
  absl::StatusOr<std::string> proof = stranger.Prove(worker.challenge());
  ASSERT_TRUE(proof.ok());
  ChannelKeys keys;
  EXPECT_EQ(worker.Answer(*proof, &keys).status().code(), absl::StatusCode::kPermissionDenied);
  // A worker with another token: the owner refuses its answer.
  WorkerHandshake impostor(theirs);
  OwnerHandshake owner(ours);
  proof = owner.Prove(impostor.challenge());
  ASSERT_TRUE(proof.ok());
  // The impostor cannot check the owner's proof, but answers as if it could.
  OwnerHandshake accomplice(theirs);
  WorkerHandshake echo(theirs);
  absl::StatusOr<std::string> forged = echo.Answer(*accomplice.Prove(echo.challenge()), &keys);
  ASSERT_TRUE(forged.ok());
  EXPECT_EQ(owner.Check(*forged, &keys).code(), absl::StatusCode::kPermissionDenied);
}

TEST(TaskChannelHandshakeTest, AProofReplayedOnAnotherConnectionFails) {
  const TaskChannelSecurity security{NewClusterToken(), ChannelProtection::kMac};
  WorkerHandshake first(security), second(security);
  OwnerHandshake owner(security);
  absl::StatusOr<std::string> proof = owner.Prove(first.challenge());
  ASSERT_TRUE(proof.ok());
  ChannelKeys keys;
  EXPECT_FALSE(second.Answer(*proof, &keys).ok());
  EXPECT_TRUE(first.Answer(*proof, &keys).ok());
}

TEST(TaskChannelHandshakeTest, AProtectionChangedInTransitIsCaught) {
  const std::string token = NewClusterToken();
  WorkerHandshake worker({token, ChannelProtection::kEncrypt});
  std::string downgraded = worker.challenge();
  downgraded[0] = static_cast<char>(ChannelProtection::kNone);
  OwnerHandshake owner({token, ChannelProtection::kNone});
  absl::StatusOr<std::string> proof = owner.Prove(downgraded);
  ASSERT_TRUE(proof.ok());  // the owner cannot tell yet...
  ChannelKeys keys;
  EXPECT_EQ(worker.Answer(*proof, &keys).status().code(), absl::StatusCode::kPermissionDenied);  // ...the worker can
}

TEST(TaskChannelHandshakeTest, AnOwnerRefusesAWeakerWorkerWithAnErrorNamingBoth) {
  const std::string token = NewClusterToken();
  WorkerHandshake worker({token, ChannelProtection::kNone});
  OwnerHandshake owner({token, ChannelProtection::kMac});
  absl::StatusOr<std::string> proof = owner.Prove(worker.challenge());
  EXPECT_EQ(proof.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(proof.status().message().find("'none', weaker than the 'mac'"), std::string::npos) << proof.status();
  EXPECT_NE(proof.status().message().find("task_channel_protection"), std::string::npos);
}

TEST(TaskChannelHandshakeTest, MalformedFramesAreRefused) {
  const TaskChannelSecurity security{NewClusterToken(), ChannelProtection::kMac};
  OwnerHandshake owner(security);
  EXPECT_FALSE(owner.Prove("").ok());
  EXPECT_FALSE(owner.Prove(std::string(33, '\x07')).ok());  // no such protection
  EXPECT_FALSE(owner.Prove(std::string(40, '\x01')).ok());
  ChannelKeys keys;
  EXPECT_FALSE(owner.Check(std::string(64, 'x'), &keys).ok());  // before Prove
  WorkerHandshake worker(security);
  EXPECT_FALSE(worker.Answer("", &keys).ok());
  EXPECT_FALSE(worker.Answer(std::string(96, 'p'), &keys).ok());
}

TEST(TaskChannelProtectionTest, SettingsParseAndAutoFollowsTls) {
  EXPECT_EQ(*ParseChannelProtection("auto", /*tls=*/false), ChannelProtection::kMac);
  EXPECT_EQ(*ParseChannelProtection("auto", /*tls=*/true), ChannelProtection::kEncrypt);
  EXPECT_EQ(*ParseChannelProtection("encrypt", false), ChannelProtection::kEncrypt);
  EXPECT_EQ(*ParseChannelProtection("mac", true), ChannelProtection::kMac);
  EXPECT_EQ(*ParseChannelProtection("none", true), ChannelProtection::kNone);
  absl::StatusOr<ChannelProtection> bad = ParseChannelProtection("plain", false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'plain'"), std::string::npos) << bad.status();
}

class FrameSealingTest : public ::testing::TestWithParam<ChannelProtection> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ShakeHands({token_, GetParam()}, {token_, GetParam()}, &keys_, &keys_));
  }
  // Frames sealed by the owner, in order.
  std::vector<std::string> Seal(const std::vector<std::string>& bodies) {
    FrameSealer sealer(GetParam(), keys_.owner_to_worker);
    std::string bytes;
    for (const std::string& body : bodies) sealer.Append(7, body, &bytes);
    return CutFrames(bytes);
  }
  FrameOpener WorkerOpener() { return FrameOpener(GetParam(), keys_.owner_to_worker); }

  const std::string token_ = NewClusterToken();
  ChannelKeys keys_;
};

INSTANTIATE_TEST_SUITE_P(Sealed, FrameSealingTest, ::testing::ValuesIn(kSealed),
                         [](const auto& info) { return std::string(ChannelProtectionName(info.param)); });

TEST_P(FrameSealingTest, FramesOpenInOrderWithTheirBodies) {
  const std::vector<std::string> bodies = {"first", "", std::string(1 << 20, 'x'), "last"};
  std::vector<std::string> frames = Seal(bodies);
  ASSERT_EQ(frames.size(), bodies.size());
  FrameOpener opener = WorkerOpener();
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].size(), 5 + bodies[i].size() + kFrameTagBytes);
    EXPECT_EQ(frames[i][4], 7);  // the kind stays readable
    std::string body;
    ASSERT_TRUE(OpenFrame(opener, frames[i], &body)) << i;
    EXPECT_EQ(body, bodies[i]);
  }
}

TEST_P(FrameSealingTest, OnlyEncryptionHidesTheBody) {
  const std::string body = "a task argument " + SecureRandomHex(8);
  std::vector<std::string> frames = Seal({body});
  const bool visible = frames[0].find(body) != std::string::npos;
  EXPECT_EQ(visible, GetParam() == ChannelProtection::kMac);
}

TEST_P(FrameSealingTest, EveryByteIsProtected) {
  std::vector<std::string> frames = Seal({"push body"});
  for (size_t at = 0; at < frames[0].size(); ++at) {
    std::string altered = frames[0];
    altered[at] ^= 0x01;
    FrameOpener opener = WorkerOpener();
    EXPECT_FALSE(OpenFrame(opener, altered)) << "byte " << at;
  }
}

TEST(FrameSealingIntoTest, SealIntoAndOpenIntoMakeAndReadTheFramesAppendAndOpenDo) {
  // The object data channel's one-pass forms: the same bytes on the wire.
  const std::string token = NewClusterToken();
  ChannelKeys keys;
  ASSERT_TRUE(ShakeHands({token, ChannelProtection::kEncrypt}, {token, ChannelProtection::kEncrypt}, &keys, &keys));
  FrameSealer appending(ChannelProtection::kEncrypt, keys.owner_to_worker);
  FrameSealer into(ChannelProtection::kEncrypt, keys.owner_to_worker);
  FrameOpener opener(ChannelProtection::kEncrypt, keys.owner_to_worker);
  for (const std::string& body : {std::string(1 << 18, 'o'), std::string("tail"), std::string()}) {
    std::string appended;
    appending.Append(4, body, &appended);
    std::string sealed(body.size() + kSealedFrameOverheadBytes, '\0');
    ASSERT_EQ(into.SealInto(4, body.data(), body.size(), sealed.data()), sealed.size());
    EXPECT_EQ(sealed, appended);
    std::string opened(body.size(), '\0');
    ASSERT_TRUE(opener.OpenInto(sealed.data(), sealed.size(), opened.data()));
    EXPECT_EQ(opened, body);
  }
  // An altered frame does not open, and nothing after it does.
  std::string body(1000, 'b');
  std::string sealed(body.size() + kSealedFrameOverheadBytes, '\0');
  into.SealInto(4, body.data(), body.size(), sealed.data());
  sealed[100] ^= 1;
  std::string opened(body.size(), '\0');
  EXPECT_FALSE(opener.OpenInto(sealed.data(), sealed.size(), opened.data()));
  sealed[100] ^= 1;
  EXPECT_FALSE(opener.OpenInto(sealed.data(), sealed.size(), opened.data()));
}

TEST_P(FrameSealingTest, ReplayedReorderedOrForeignFramesDoNotOpenAndFailureSticks) {
  std::vector<std::string> frames = Seal({"one", "two", "three"});
  {
    FrameOpener opener = WorkerOpener();
    ASSERT_TRUE(OpenFrame(opener, frames[0]));
    EXPECT_FALSE(OpenFrame(opener, frames[0]));  // replayed
    EXPECT_FALSE(OpenFrame(opener, frames[1]));  // the right next frame, after a failure
  }
  {
    FrameOpener opener = WorkerOpener();
    EXPECT_FALSE(OpenFrame(opener, frames[1]));  // reordered
  }
  {
    FrameOpener owner_side(GetParam(), keys_.worker_to_owner);  // the other direction's key
    EXPECT_FALSE(OpenFrame(owner_side, frames[0]));
  }
  {
    FrameOpener opener = WorkerOpener();
    EXPECT_FALSE(OpenFrame(opener, frames[0].substr(0, 5 + kFrameTagBytes - 1)));  // shorter than a tag
  }
}

TEST_P(FrameSealingTest, SealingPlainFramesEqualsAppendingEach) {
  std::string plain;
  std::vector<std::string> bodies = {"a", std::string(70000, 'b'), ""};
  for (const std::string& body : bodies) AppendRawFrame(FrameKind::kReply, body, &plain);
  std::string sealed, appended;
  FrameSealer one(GetParam(), keys_.worker_to_owner), each(GetParam(), keys_.worker_to_owner);
  one.SealFrames(plain, &sealed);
  for (const std::string& body : bodies) each.Append(static_cast<uint8_t>(FrameKind::kReply), body, &appended);
  EXPECT_EQ(sealed, appended);
}

// A frame's tag is AES-256-GCM's, as any implementation computes it: here OpenSSL's
// EVP AES-GCM, with the header (and, authenticating only, the body) as associated
// data and the frame's number in the last 8 bytes of the nonce. So a peer using
// another GCM implementation opens these frames.
TEST_P(FrameSealingTest, TagsAreStandardAesGcm) {
  const std::string key = keys_.owner_to_worker;
  const std::vector<std::string> bodies = {"first", std::string(70000, 'y')};
  std::vector<std::string> frames = Seal(bodies);
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::string& frame = frames[i];
    const size_t body_bytes = frame.size() - 5 - kFrameTagBytes;
    const bool encrypt = GetParam() == ChannelProtection::kEncrypt;
    unsigned char nonce[12] = {0};
    for (int b = 0; b < 8; ++b) nonce[4 + b] = static_cast<unsigned char>((i >> (8 * b)) & 0xff);
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    ASSERT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                                 reinterpret_cast<const unsigned char*>(key.data()), nonce), 1);
    int len = 0;
    const auto* bytes = reinterpret_cast<const unsigned char*>(frame.data());
    ASSERT_EQ(EVP_EncryptUpdate(ctx, nullptr, &len, bytes, encrypt ? 5 : static_cast<int>(5 + body_bytes)), 1);
    std::string ciphertext(body_bytes, '\0');
    if (encrypt) {
      ASSERT_EQ(EVP_EncryptUpdate(ctx, reinterpret_cast<unsigned char*>(ciphertext.data()), &len,
                                  reinterpret_cast<const unsigned char*>(bodies[i].data()),
                                  static_cast<int>(bodies[i].size())),
                1);
      EXPECT_EQ(ciphertext, frame.substr(5, body_bytes)) << "frame " << i;
    }
    ASSERT_EQ(EVP_EncryptFinal_ex(ctx, nullptr, &len), 1);
    unsigned char tag[kFrameTagBytes];
    ASSERT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kFrameTagBytes, tag), 1);
    EVP_CIPHER_CTX_free(ctx);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(tag), kFrameTagBytes), frame.substr(5 + body_bytes))
        << "frame " << i;
  }
}

}  // namespace
}  // namespace manta::core
