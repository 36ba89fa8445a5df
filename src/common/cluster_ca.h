// A cluster's own certificate authority, so that a cluster spanning hosts runs TLS
// without anyone making certificates (README, Security).
//
// `manta start --head` makes a CA (an ECDSA P-256 key and a self-signed certificate)
// in its session when TLS is on and no certificates were given, and issues the head
// node's certificate with it; the GCS keeps the CA and issues a short-lived
// certificate to each node, driver or CLI command that proves it holds the cluster
// token (enrollment.h). Each member makes its own key: private keys never travel.
// A member's certificate names its IP addresses (subjectAltName), so that gRPC's
// check of the server's name works as with certificates an administrator makes.
// All functions are thread-safe; a ClusterCa is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta {

// A new ECDSA P-256 private key (PEM, PKCS#8).
absl::StatusOr<std::string> NewPrivateKeyPem();
// A new key pair: the private key as PEM, the public key as DER SubjectPublicKeyInfo.
struct KeyPair {
  std::string private_key_pem;
  std::string public_key_der;
};
absl::StatusOr<KeyPair> NewKeyPair();
// The public half of a PEM private key, as DER SubjectPublicKeyInfo.
absl::StatusOr<std::string> PublicKeyDer(const std::string& private_key_pem);
// The public key (DER SubjectPublicKeyInfo) a PEM certificate certifies.
absl::StatusOr<std::string> CertificatePublicKeyDer(const std::string& cert_pem);
// When a PEM certificate expires, in seconds since the epoch.
absl::StatusOr<int64_t> CertificateNotAfter(const std::string& cert_pem);
// OK when `cert_pem` is signed by the CA certificate `ca_pem` and valid now.
absl::Status VerifyCertificate(const std::string& cert_pem, const std::string& ca_pem);

class ClusterCa {
 public:
  // A new CA valid for `lifetime_s` seconds (from five minutes ago: clocks differ).
  static absl::StatusOr<ClusterCa> Create(int64_t lifetime_s);
  // A CA from its certificate and key (PEM). InvalidArgument when they do not parse
  // or do not belong together.
  static absl::StatusOr<ClusterCa> Load(const std::string& cert_pem, const std::string& key_pem);

  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }

  // A certificate for the public key `public_key_der` (DER SubjectPublicKeyInfo),
  // naming `ips` (IPv4 addresses; at most kMaxNames) as its subjectAltName, valid for
  // client and server use for `lifetime_s` seconds. InvalidArgument names a bad key
  // or address.
  static constexpr size_t kMaxNames = 8;
  absl::StatusOr<std::string> Issue(std::string_view public_key_der, const std::vector<std::string>& ips,
                                    int64_t lifetime_s) const;

 private:
  struct Keys;
  ClusterCa(std::string cert_pem, std::string key_pem, std::shared_ptr<const Keys> keys)
      : cert_pem_(std::move(cert_pem)), key_pem_(std::move(key_pem)), keys_(std::move(keys)) {}

  std::string cert_pem_;
  std::string key_pem_;
  std::shared_ptr<const Keys> keys_;  // the parsed certificate and key
};

}  // namespace manta
