// Whether a cluster runs TLS, and where each process gets its certificate from, so
// that a cluster spanning hosts is encrypted without anyone making certificates.
//
//   - The head (`manta start --head`) runs TLS when cluster_tls is 'on', or 'auto'
//     and it binds an address other than loopback. Without --tls-* files it makes a
//     CA of its own (cluster_ca.h) and the head node's certificate, kept in the
//     session's tls/ directory; its GCS enrolls other members (enrollment.h).
//   - Every other member (a joining node, a driver, a CLI command) uses, in order:
//     MANTA_TLS_CERT/KEY/CA when set; the tls/ files of this machine's session of
//     that cluster; a certificate from the GCS when TLS is due for the address
//     ('on', or 'auto' and the GCS is not on loopback); with 'auto' and a GCS on
//     loopback, a certificate when that GCS enrolls (it binds every interface), else
//     no TLS.
//   - Workers get their raylet's files (MANTA_TLS_* from the worker pool).
// A member that must use TLS and cannot get a certificate fails with an error that
// says why: it never falls back to sending the token in the clear.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/common/enrollment.h"
#include "src/common/rpc/auth.h"

namespace manta {

enum class ClusterTlsMode { kAuto, kOn, kOff };
// 'auto', 'on' or 'off' (config_def.h's cluster_tls); InvalidArgument otherwise.
absl::StatusOr<ClusterTlsMode> ParseClusterTlsMode(const std::string& text);
// Whether TLS is due for a cluster reached at (or bound to) `host` under `mode`.
bool TlsDueFor(ClusterTlsMode mode, const std::string& host);

// A session's TLS files: tls/ca.crt, tls/node.crt, tls/node.key (0600), and on the
// head tls/ca.key (0600).
struct SessionTlsFiles {
  rpc::TlsFiles member;
  std::string ca_key;  // the head's only
};
SessionTlsFiles SessionTlsPaths(const std::string& session_dir);
// Writes `cert` as the session's member files.
absl::Status WriteSessionTls(const std::string& session_dir, const MemberCertificate& cert);
// For a head: a new CA valid ten years, and a certificate of it naming `ips` valid
// `lifetime_s`, written to the session (the CA's key too).
absl::Status MakeHeadTls(const std::string& session_dir, const std::vector<std::string>& ips, int64_t lifetime_s);

// The addresses a member reaching the GCS at `gcs_host` has its certificate name:
// the local address that routes there, `extra` (its advertised address, say), and
// 127.0.0.1.
std::vector<std::string> MemberAddresses(const std::string& gcs_host, const std::vector<std::string>& extra);

// Adds TLS material to `credentials` (whose token is set) for a member of the cluster
// at `gcs_address`, as the header says: `session_dir` is this machine's session of
// that cluster, "" when none (FindClusterToken finds it with the token); a
// certificate from the GCS names `addresses`.
absl::Status AddMemberTls(const std::string& gcs_address, const std::string& session_dir, ClusterTlsMode mode,
                          const std::vector<std::string>& addresses, int64_t timeout_ms,
                          rpc::Credentials* credentials);
// The same for a process of the node whose session is `session_dir`: MANTA_TLS_*
// when set, else the session's files when it has any.
absl::Status AddSessionTls(const std::string& session_dir, rpc::Credentials* credentials);

}  // namespace manta
