// Enrollment: how a process that holds the cluster token, and nothing else, gets a
// certificate of the cluster's CA (cluster_ca.h) without sending the token.
//
// It runs on the GCS's port, before TLS: the GCS's TLS relay hands a connection whose
// first bytes are kEnrollMagic (a TLS connection starts with 0x16) to the
// EnrollmentServer. The exchange, every message of bounded size, all within one
// deadline:
//   member -> GCS   magic, nonce Nc (32), its new public key (DER), the IPv4
//                   addresses its certificate should name
//   GCS -> member   nonce Ns (32), HMAC(token, "server" | Ns | H)
//   member -> GCS   HMAC(token, "client" | Ns | H)
//   GCS -> member   a reply (the CA's certificate and the member's, or why not),
//                   HMAC(token, "reply" | Ns | H | reply)
// where H is the SHA-256 of the member's first message. Each side proves it holds the
// token over nonces of the other's choosing, so a captured exchange replays to
// nothing and shows only public keys and certificates; the reply's MAC binds the
// certificates to this exchange, and the certificate to the member's key, so a
// party in the middle can neither swap the CA nor have its own key certified. The
// token has 256 bits: no password-strength guessing applies.
//
// The GCS adds the address it sees the member at to the names asked for.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "src/common/cluster_ca.h"
#include "src/common/logging.h"

namespace manta {

inline constexpr char kEnrollMagic[] = "MNTENRL1";  // 8 bytes on the wire
inline constexpr size_t kEnrollMagicBytes = 8;

// What a member holds after enrolling (PEM).
struct MemberCertificate {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;  // made by the member; never sent
};

// Makes a key, proves the token to the GCS at `gcs_address` ("a.b.c.d:port") and
// returns a certificate naming `ips`, all within `timeout_ms`. Unauthenticated when
// the GCS does not prove the token; Unavailable when it cannot be reached or closes
// the connection (a cluster without a CA of its own); the error says which.
absl::StatusOr<MemberCertificate> Enroll(const std::string& gcs_address, const std::string& token,
                                         const std::vector<std::string>& ips, int64_t timeout_ms);

class EnrollmentServer {
 public:
  struct Options {
    int64_t certificate_lifetime_s = 7 * 24 * 3600;
    int64_t timeout_ms = 5000;  // the whole exchange
    int max_concurrent = 8;     // more connections at once are closed
  };
  EnrollmentServer(ClusterCa ca, std::string token, Options options);
  // Closes the connections being served and waits for their threads.
  ~EnrollmentServer();
  EnrollmentServer(const EnrollmentServer&) = delete;
  EnrollmentServer& operator=(const EnrollmentServer&) = delete;

  // Takes `fd`, a connected socket whose next bytes are the magic, and serves it on
  // a thread of its own (closed when more than max_concurrent are being served).
  void Serve(int fd);
  // Runs the exchange on `fd` (blocking; the caller keeps `fd`). `peer_ip` is named
  // in the certificate. Errors say why the member was refused.
  absl::Status ServeOne(int fd, const std::string& peer_ip);
  // Certificates issued so far.
  int64_t num_issued() const;

 private:
  void Reap();

  const ClusterCa ca_;
  const std::string token_;
  const Options options_;
  LogRateLimiter refusals_;
  mutable std::mutex mu_;
  bool stopping_ = false;
  int64_t issued_ = 0;
  int64_t next_id_ = 0;
  struct Active {
    int fd;
    std::thread thread;
  };
  std::vector<std::pair<int64_t, Active>> active_;
  std::vector<int64_t> finished_;
};

}  // namespace manta
