// The credentials a process belongs to its cluster with: the cluster token that every
// gRPC call it makes carries and every gRPC server in it requires, and, when TLS is
// on, the certificate, key and CA that channels and servers use.
//
// A process belongs to one cluster at a time, so the credentials are process-wide:
// each daemon's main installs them before it makes any channel or server, and the
// core worker installs its own when it connects (ray::Init). Calls carry the token
// installed when they start (AttachClusterToken in grpc_client.h); channels keep the
// TLS settings they were made with. Servers check the token installed now; with no
// token installed every call is refused. Thread-safe.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace grpc {
class ServerContextBase;
}

namespace manta::rpc {

// The metadata key of the token on every call.
inline constexpr char kClusterTokenMetadataKey[] = "x-manta-cluster-token";

struct TlsFiles {
  std::string cert_file;  // this process's certificate chain (PEM)
  std::string key_file;   // its private key (PEM)
  std::string ca_file;    // the CA that signs every member's certificate (PEM)
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};
// TLS settings from MANTA_TLS_CERT, MANTA_TLS_KEY and MANTA_TLS_CA (paths).
TlsFiles TlsFilesFromEnvironment();

struct Credentials {
  std::string token;
  // TLS material (PEM contents); all empty when TLS is off.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  bool tls() const { return !tls_cert.empty(); }
};

// Credentials with a token and no TLS.
inline Credentials TokenCredentials(std::string token) {
  Credentials credentials;
  credentials.token = std::move(token);
  return credentials;
}

// Reads the three TLS files (all or none must be given). InvalidArgument names a
// missing or unreadable one.
absl::Status LoadTls(const TlsFiles& files, Credentials* credentials);

void SetProcessCredentials(Credentials credentials);
// For a daemon's main: loads the token (LoadDaemonToken in src/common/security.h: the
// file when given, else $MANTA_CLUSTER_TOKEN) and the TLS files, and installs them.
absl::StatusOr<Credentials> InstallDaemonCredentials(const std::string& token_file, const TlsFiles& tls);
Credentials ProcessCredentials();
// Appended to "cannot reach" (Unavailable) errors: how TLS may be the reason (on here and not
// there, or the other way round).
std::string TlsHint();

// OK when the call carries this process's cluster token (compared in constant time).
// Otherwise Unauthenticated, and a log line naming the peer and `rpc_name` (at most
// one a second, with a count of the ones left out). Call before any handler runs.
absl::Status AuthenticateCall(const grpc::ServerContextBase& context, const char* rpc_name);

}  // namespace manta::rpc
