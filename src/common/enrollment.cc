#include "src/common/enrollment.h"

#include <glog/logging.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_split.h"
#include "src/common/blocking_socket.h"
#include "src/common/network.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta {
namespace {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
constexpr size_t kMaxKeyBytes = 1024;
constexpr size_t kMaxNamesBytes = 512;
constexpr uint32_t kMaxReplyBytes = 64 << 10;
constexpr char kOk = 0;
constexpr char kRefused = 1;

std::string Mac(const std::string& token, std::string_view role, std::string_view server_nonce,
                std::string_view hello_hash, std::string_view extra = {}) {
  std::string message = "manta enroll v1 ";
  message.append(role).append(server_nonce).append(hello_hash).append(extra);
  return HmacSha256(token, message);
}

// Appends `v` as `bytes` little-endian bytes.
void AppendLe(uint64_t v, size_t bytes, std::string* out) {
  char le[8];
  PutLe(v, bytes, le);
  out->append(le, bytes);
}

// Reads a little-endian length of `width` bytes (at most `max`) and that many bytes.
absl::Status ReadSized(int fd, size_t width, size_t max, int64_t deadline, std::string* out) {
  char size[4];
  if (auto s = ReadExactBefore(fd, size, width, deadline); !s.ok()) return s;
  const size_t n = LoadLe(size, width);
  if (n > max) return absl::InvalidArgumentError("a field of " + std::to_string(n) + " bytes (at most " +
                                                 std::to_string(max) + ")");
  out->resize(n);
  return ReadExactBefore(fd, out->data(), n, deadline);
}

std::string Sized(std::string_view field) {
  std::string out;
  AppendLe(field.size(), 4, &out);
  out.append(field);
  return out;
}

// The reply's body: status, then two sized fields.
std::string ReplyBody(char status, std::string_view a, std::string_view b) {
  return std::string(1, status) + Sized(a) + Sized(b);
}

// Splits a reply body; false when malformed.
bool ParseReplyBody(const std::string& body, char* status, std::string* a, std::string* b) {
  size_t at = 1;
  auto field = [&](std::string* out) {
    if (body.size() < at + 4) return false;
    size_t n = LoadLe(body.data() + at, 4);
    at += 4;
    if (body.size() - at < n) return false;
    out->assign(body, at, n);
    at += n;
    return true;
  };
  if (body.empty()) return false;
  *status = body[0];
  return field(a) && field(b) && at == body.size();
}

std::string IpOf(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  return colon == std::string::npos ? host_port : host_port.substr(0, colon);
}

// Appends the hello's fields after magic and nonce: the key and the names, sized.
void AppendHelloFields(const std::string& public_key, const std::string& names, std::string* hello) {
  AppendLe(public_key.size(), 2, hello);
  *hello += public_key;
  AppendLe(names.size(), 2, hello);
  *hello += names;
}

// The member's first message: magic, a fresh nonce, its public key, the names.
std::string Hello(const std::string& public_key, const std::vector<std::string>& ips) {
  std::string hello(kEnrollMagic, kEnrollMagicBytes);
  std::string nonce(kNonceBytes, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size());
  hello += nonce;
  std::string names;
  for (const std::string& ip : ips) names += (names.empty() ? "" : ",") + ip;
  AppendHelloFields(public_key, names, &hello);
  return hello;
}

// The GCS's reply, checked: its MAC binds it to this exchange, and the certificate
// must be for `public_key` and signed by the CA sent along.
absl::Status CheckReply(const std::string& token, std::string_view server_nonce, const std::string& hello_hash,
                        const std::string& body, std::string_view mac, const std::string& public_key,
                        MemberCertificate* out) {
  if (!ConstantTimeEquals(mac, Mac(token, "reply", server_nonce, hello_hash, body))) {
    return absl::UnauthenticatedError("its reply was altered on the way");
  }
  char status = 0;
  std::string a, b;
  if (!ParseReplyBody(body, &status, &a, &b)) return absl::DataLossError("its reply is malformed");
  if (status != kOk) return absl::FailedPreconditionError("it refused: " + a);
  out->ca_pem = std::move(a);
  out->cert_pem = std::move(b);
  auto certified = CertificatePublicKeyDer(out->cert_pem);
  if (!certified.ok() || *certified != public_key) return absl::DataLossError("it certified another key");
  return VerifyCertificate(out->cert_pem, out->ca_pem);
}

}  // namespace

absl::StatusOr<MemberCertificate> Enroll(const std::string& gcs_address, const std::string& token,
                                         const std::vector<std::string>& ips, int64_t timeout_ms) {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  auto keys = NewKeyPair();
  if (!keys.ok()) return keys.status();
  MemberCertificate out;
  out.key_pem = keys->private_key_pem;
  const std::string& public_key = keys->public_key_der;
  const std::string hello = Hello(public_key, ips);
  const std::string hello_hash = Sha256(hello);
  auto fd = ConnectWithin(gcs_address, timeout_ms);
  if (!fd.ok()) return fd.status();
  auto fail = [&](absl::Status s) {
    close(*fd);
    return absl::Status(s.code(), "cannot get a certificate from the GCS at " + gcs_address + ": " +
                                      std::string(s.message()));
  };
  char challenge[kNonceBytes + kMacBytes];
  absl::Status s = WriteAllBefore(*fd, hello.data(), hello.size(), deadline);
  if (s.ok()) s = ReadExactBefore(*fd, challenge, sizeof(challenge), deadline);
  if (!s.ok()) {
    return fail(absl::UnavailableError(std::string(s.message()) +
                                       " (a cluster whose TLS uses certificates you made needs MANTA_TLS_CERT, "
                                       "MANTA_TLS_KEY and MANTA_TLS_CA here; one with TLS off, MANTA_cluster_tls=off)"));
  }
  const std::string_view server_nonce(challenge, kNonceBytes);
  if (!ConstantTimeEquals(std::string_view(challenge + kNonceBytes, kMacBytes),
                          Mac(token, "server", server_nonce, hello_hash))) {
    return fail(absl::UnauthenticatedError("it does not prove the token this process holds (a wrong token here, "
                                           "another cluster's GCS there, or a party in the middle)"));
  }
  const std::string proof = Mac(token, "client", server_nonce, hello_hash);
  std::string body;
  char mac[kMacBytes];
  s = WriteAllBefore(*fd, proof.data(), proof.size(), deadline);
  if (s.ok()) s = ReadSized(*fd, 4, kMaxReplyBytes, deadline, &body);
  if (s.ok()) s = ReadExactBefore(*fd, mac, sizeof(mac), deadline);
  if (!s.ok()) return fail(absl::UnavailableError("the reply: " + std::string(s.message()) +
                                                  " (the GCS refused this token? see its log)"));
  s = CheckReply(token, server_nonce, hello_hash, body, std::string_view(mac, kMacBytes), public_key, &out);
  if (!s.ok()) return fail(s);
  close(*fd);
  return out;
}

EnrollmentServer::EnrollmentServer(ClusterCa ca, std::string token, Options options)
    : ca_(std::move(ca)), token_(std::move(token)), options_(options) {}

EnrollmentServer::~EnrollmentServer() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, active] : active_) {
      if (std::find(finished_.begin(), finished_.end(), id) == finished_.end()) shutdown(active.fd, SHUT_RDWR);
      threads.push_back(std::move(active.thread));
    }
    active_.clear();
    finished_.clear();
  }
  for (std::thread& t : threads) t.join();
}

int64_t EnrollmentServer::num_issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return issued_;
}

void EnrollmentServer::Reap() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : finished_) {
      auto it = std::find_if(active_.begin(), active_.end(), [id](const auto& a) { return a.first == id; });
      if (it == active_.end()) continue;
      done.push_back(std::move(it->second.thread));
      active_.erase(it);
    }
    finished_.clear();
  }
  for (std::thread& t : done) t.join();
}

void EnrollmentServer::Serve(int fd) {
  Reap();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || active_.size() >= static_cast<size_t>(options_.max_concurrent)) {
    int64_t others = 0;
    if (refusals_.Allow(&others)) {
      LOG(WARNING) << "refused enrollment from " << SocketPeerName(fd) << ": " << active_.size()
                   << " under way already" << LogRateLimiter::LeftOut(others);
    }
    close(fd);
    return;
  }
  const int64_t id = next_id_++;
  std::thread thread([this, fd, id] {
    const std::string peer = SocketPeerName(fd);
    absl::Status s = ServeOne(fd, IpOf(peer));
    int64_t others = 0;
    if (!s.ok() && refusals_.Allow(&others)) {
      LOG(WARNING) << "refused enrollment from " << peer << ": " << s.message() << LogRateLimiter::LeftOut(others);
    }
    std::lock_guard<std::mutex> lock(mu_);
    close(fd);
    finished_.push_back(id);
  });
  active_.emplace_back(id, Active{fd, std::move(thread)});
}

absl::Status EnrollmentServer::ServeOne(int fd, const std::string& peer_ip) {
  const int64_t deadline = MonotonicMs() + options_.timeout_ms;
  std::string hello(kEnrollMagicBytes + kNonceBytes, '\0');
  absl::Status s = ReadExactBefore(fd, hello.data(), hello.size(), deadline);
  if (!s.ok()) return s;
  if (std::memcmp(hello.data(), kEnrollMagic, kEnrollMagicBytes) != 0) {
    return absl::InvalidArgumentError("not an enrollment");
  }
  std::string public_key, names;
  if (s = ReadSized(fd, 2, kMaxKeyBytes, deadline, &public_key); !s.ok()) return s;
  if (s = ReadSized(fd, 2, kMaxNamesBytes, deadline, &names); !s.ok()) return s;
  AppendHelloFields(public_key, names, &hello);
  const std::string hello_hash = Sha256(hello);
  std::string nonce(kNonceBytes, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size());
  const std::string challenge = nonce + Mac(token_, "server", nonce, hello_hash);
  char proof[kMacBytes];
  if (s = WriteAllBefore(fd, challenge.data(), challenge.size(), deadline); !s.ok()) return s;
  if (s = ReadExactBefore(fd, proof, sizeof(proof), deadline); !s.ok()) return s;
  if (!ConstantTimeEquals(std::string_view(proof, kMacBytes), Mac(token_, "client", nonce, hello_hash))) {
    return absl::UnauthenticatedError("it does not hold the cluster token");
  }
  std::vector<std::string> ips = {peer_ip};
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipEmpty())) {
    if (std::find(ips.begin(), ips.end(), name) == ips.end()) ips.emplace_back(name);
  }
  auto cert = ca_.Issue(public_key, ips, options_.certificate_lifetime_s);
  const std::string body =
      cert.ok() ? ReplyBody(kOk, ca_.cert_pem(), *cert) : ReplyBody(kRefused, std::string(cert.status().message()), "");
  const std::string reply = Sized(body) + Mac(token_, "reply", nonce, hello_hash, body);
  if (cert.ok()) {
    // Counted and logged before the member hears of it, which may come straight back.
    std::lock_guard<std::mutex> lock(mu_);
    ++issued_;
    LOG(INFO) << "issued a certificate for " << names << " (seen at " << peer_ip << "), valid "
              << options_.certificate_lifetime_s << " s";
  }
  if (s = WriteAllBefore(fd, reply.data(), reply.size(), deadline); !s.ok()) return s;
  return cert.status();
}

}  // namespace manta
