#include "src/common/cluster_ca.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>

#include "src/common/security.h"

namespace manta {
// Named, not anonymous: ClusterCa::Keys holds these (GCC warns about a member of an
// anonymous type).
namespace cluster_ca_internal {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

}  // namespace cluster_ca_internal

using cluster_ca_internal::Bio;
using cluster_ca_internal::Cert;
using cluster_ca_internal::Free;
using cluster_ca_internal::Key;

namespace {

// What went wrong in OpenSSL (its error queue, cleared), after `what`.
absl::Status OpenSslFailure(const std::string& what) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  std::string text = what;
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    text += std::string(": ") + buf;
  }
  return absl::InvalidArgumentError(text);
}

Bio ReadBio(const std::string& data) { return Bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size()))); }

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

absl::StatusOr<Key> ParsePrivateKey(const std::string& pem) {
  Bio bio = ReadBio(pem);
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return OpenSslFailure("not a PEM private key");
  return key;
}

absl::StatusOr<Cert> ParseCertificate(const std::string& pem) {
  Bio bio = ReadBio(pem);
  Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return OpenSslFailure("not a PEM certificate");
  return cert;
}

absl::StatusOr<std::string> KeyToPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslFailure("cannot write a private key");
  }
  return BioContents(bio.get());
}

absl::StatusOr<std::string> CertToPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslFailure("cannot write a certificate");
  return BioContents(bio.get());
}

absl::StatusOr<std::string> PublicDer(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key, &der);
  if (n <= 0) return OpenSslFailure("cannot encode a public key");
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

// Adds the extension `nid` with the value `value` (openssl's config syntax).
bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate for `subject_key` named `common_name`, valid from five minutes ago
// for `lifetime_s`, with a random serial; extensions and signature are the caller's.
absl::StatusOr<Cert> NewCertificate(EVP_PKEY* subject_key, const std::string& common_name, int64_t lifetime_s) {
  Cert cert(X509_new());
  if (!cert) return OpenSslFailure("X509_new");
  uint8_t serial_bytes[16];
  FillSecureRandom(serial_bytes, sizeof(serial_bytes));
  serial_bytes[0] &= 0x7f;  // positive
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr), BN_free);
  X509_NAME* name = X509_get_subject_name(cert.get());
  bool ok = X509_set_version(cert.get(), 2) == 1 && serial != nullptr &&
            BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(lifetime_s)) != nullptr &&
            X509_set_pubkey(cert.get(), subject_key) == 1 &&
            X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                       reinterpret_cast<const unsigned char*>("Manta cluster"), -1, -1, 0) == 1 &&
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                       reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) == 1;
  if (!ok) return OpenSslFailure("cannot fill in a certificate");
  return cert;
}

}  // namespace

struct ClusterCa::Keys {
  Cert cert;
  Key key;
};

absl::StatusOr<std::string> NewPrivateKeyPem() {
  auto keys = NewKeyPair();
  if (!keys.ok()) return keys.status();
  return std::move(keys->private_key_pem);
}

absl::StatusOr<KeyPair> NewKeyPair() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslFailure("cannot make an EC key");
  auto pem = KeyToPem(key.get());
  if (!pem.ok()) return pem.status();
  auto der = PublicDer(key.get());
  if (!der.ok()) return der.status();
  return KeyPair{std::move(*pem), std::move(*der)};
}

absl::StatusOr<std::string> PublicKeyDer(const std::string& private_key_pem) {
  auto key = ParsePrivateKey(private_key_pem);
  if (!key.ok()) return key.status();
  return PublicDer(key->get());
}

absl::StatusOr<std::string> CertificatePublicKeyDer(const std::string& cert_pem) {
  auto cert = ParseCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  EVP_PKEY* key = X509_get0_pubkey(cert->get());
  if (key == nullptr) return OpenSslFailure("the certificate's public key does not parse");
  return PublicDer(key);
}

absl::StatusOr<int64_t> CertificateNotAfter(const std::string& cert_pem) {
  auto cert = ParseCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &tm) != 1) return OpenSslFailure("bad notAfter");
  return static_cast<int64_t>(timegm(&tm));
}

absl::Status VerifyCertificate(const std::string& cert_pem, const std::string& ca_pem) {
  auto cert = ParseCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  auto ca = ParseCertificate(ca_pem);
  if (!ca.ok()) return absl::InvalidArgumentError("the CA: " + std::string(ca.status().message()));
  std::unique_ptr<X509_STORE, Free> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, Free> ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca->get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert->get(), nullptr) != 1) {
    return OpenSslFailure("cannot set up verification");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::PermissionDeniedError(std::string("the certificate does not verify: ") +
                                       X509_verify_cert_error_string(error));
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterCa> ClusterCa::Create(int64_t lifetime_s) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslFailure("cannot make the CA's key");
  auto cert = NewCertificate(key.get(), "Manta cluster CA " + SecureRandomHex(4), lifetime_s);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1 ||
      !AddExtension(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(c, c, NID_subject_key_identifier, "hash") || X509_sign(c, key.get(), EVP_sha256()) <= 0) {
    return OpenSslFailure("cannot sign the CA certificate");
  }
  auto cert_pem = CertToPem(c);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = KeyToPem(key.get());
  if (!key_pem.ok()) return key_pem.status();
  auto keys = std::make_shared<Keys>(Keys{std::move(*cert), std::move(key)});
  return ClusterCa(std::move(*cert_pem), std::move(*key_pem), std::move(keys));
}

absl::StatusOr<ClusterCa> ClusterCa::Load(const std::string& cert_pem, const std::string& key_pem) {
  auto cert = ParseCertificate(cert_pem);
  if (!cert.ok()) return absl::InvalidArgumentError("the CA certificate: " + std::string(cert.status().message()));
  auto key = ParsePrivateKey(key_pem);
  if (!key.ok()) return absl::InvalidArgumentError("the CA key: " + std::string(key.status().message()));
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the CA key does not belong to the CA certificate");
  }
  auto keys = std::make_shared<Keys>(Keys{std::move(*cert), std::move(*key)});
  return ClusterCa(cert_pem, key_pem, std::move(keys));
}

absl::StatusOr<std::string> ClusterCa::Issue(std::string_view public_key_der, const std::vector<std::string>& ips,
                                             int64_t lifetime_s) const {
  if (ips.empty() || ips.size() > kMaxNames) {
    return absl::InvalidArgumentError("a certificate names 1 to " + std::to_string(kMaxNames) + " addresses, not " +
                                      std::to_string(ips.size()));
  }
  std::string san;
  for (const std::string& ip : ips) {
    in_addr parsed;
    if (inet_pton(AF_INET, ip.c_str(), &parsed) != 1) {
      return absl::InvalidArgumentError("'" + ip.substr(0, 64) + "' is not an IPv4 address");
    }
    san += (san.empty() ? "IP:" : ",IP:") + ip;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(public_key_der.data());
  Key subject(d2i_PUBKEY(nullptr, &p, static_cast<long>(public_key_der.size())));
  if (!subject || p != reinterpret_cast<const unsigned char*>(public_key_der.data() + public_key_der.size())) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the public key does not parse");
  }
  auto cert = NewCertificate(subject.get(), "Manta member " + ips.front(), lifetime_s);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  X509* issuer = keys_->cert.get();
  if (X509_set_issuer_name(c, X509_get_subject_name(issuer)) != 1 ||
      !AddExtension(c, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(c, issuer, NID_key_usage, "critical,digitalSignature,keyAgreement") ||
      !AddExtension(c, issuer, NID_ext_key_usage, "serverAuth,clientAuth") ||
      !AddExtension(c, issuer, NID_subject_alt_name, san) ||
      !AddExtension(c, issuer, NID_authority_key_identifier, "keyid") ||
      X509_sign(c, keys_->key.get(), EVP_sha256()) <= 0) {
    return OpenSslFailure("cannot sign the certificate");
  }
  return CertToPem(c);
}

}  // namespace manta
