#include "src/common/cluster_tls.h"

#include <filesystem>

#include "src/common/network.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta {

namespace fs = std::filesystem;

absl::StatusOr<ClusterTlsMode> ParseClusterTlsMode(const std::string& text) {
  if (text == "auto") return ClusterTlsMode::kAuto;
  if (text == "on") return ClusterTlsMode::kOn;
  if (text == "off") return ClusterTlsMode::kOff;
  return absl::InvalidArgumentError("cluster_tls is '" + text + "'; want 'auto', 'on' or 'off'");
}

bool TlsDueFor(ClusterTlsMode mode, const std::string& host) {
  return mode == ClusterTlsMode::kOn || (mode == ClusterTlsMode::kAuto && !IsLoopbackAddress(host));
}

SessionTlsFiles SessionTlsPaths(const std::string& session_dir) {
  const fs::path dir = fs::path(session_dir) / "tls";
  SessionTlsFiles files;
  files.member.cert_file = (dir / "node.crt").string();
  files.member.key_file = (dir / "node.key").string();
  files.member.ca_file = (dir / "ca.crt").string();
  files.ca_key = (dir / "ca.key").string();
  return files;
}

absl::Status WriteSessionTls(const std::string& session_dir, const MemberCertificate& cert) {
  if (auto s = EnsurePrivateDir((fs::path(session_dir) / "tls").string()); !s.ok()) return s;
  const SessionTlsFiles files = SessionTlsPaths(session_dir);
  if (auto s = WriteFileAtomic(files.member.key_file, cert.key_pem, 0600); !s.ok()) return s;
  if (auto s = WriteFileAtomic(files.member.cert_file, cert.cert_pem, 0644); !s.ok()) return s;
  return WriteFileAtomic(files.member.ca_file, cert.ca_pem, 0644);
}

absl::Status MakeHeadTls(const std::string& session_dir, const std::vector<std::string>& ips, int64_t lifetime_s) {
  constexpr int64_t kCaLifetimeS = int64_t{10} * 365 * 24 * 3600;
  auto ca = ClusterCa::Create(kCaLifetimeS);
  if (!ca.ok()) return ca.status();
  auto keys = NewKeyPair();
  if (!keys.ok()) return keys.status();
  auto cert = ca->Issue(keys->public_key_der, ips, lifetime_s);
  if (!cert.ok()) return cert.status();
  MemberCertificate head;
  head.key_pem = std::move(keys->private_key_pem);
  head.cert_pem = std::move(*cert);
  head.ca_pem = ca->cert_pem();
  if (auto s = WriteSessionTls(session_dir, head); !s.ok()) return s;
  return WriteFileAtomic(SessionTlsPaths(session_dir).ca_key, ca->key_pem(), 0600);
}

std::vector<std::string> MemberAddresses(const std::string& gcs_host, const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& ip) {
    if (ip.empty() || ip == "0.0.0.0" || out.size() >= ClusterCa::kMaxNames - 1) return;
    for (const std::string& have : out) {
      if (have == ip) return;
    }
    out.push_back(ip);
  };
  if (auto source = SourceAddressTo(gcs_host); source.ok()) add(*source);
  for (const std::string& ip : extra) add(ip);
  add("127.0.0.1");
  return out;
}

absl::Status AddSessionTls(const std::string& session_dir, rpc::Credentials* credentials) {
  if (rpc::TlsFiles files = rpc::TlsFilesFromEnvironment(); files.enabled()) return rpc::LoadTls(files, credentials);
  const SessionTlsFiles files = SessionTlsPaths(session_dir);
  std::error_code ec;
  if (!fs::exists(files.member.cert_file, ec)) return absl::OkStatus();  // the node runs without TLS
  return rpc::LoadTls(files.member, credentials);
}

absl::Status AddMemberTls(const std::string& gcs_address, const std::string& session_dir, ClusterTlsMode mode,
                          const std::vector<std::string>& addresses, int64_t timeout_ms,
                          rpc::Credentials* credentials) {
  if (!session_dir.empty()) return AddSessionTls(session_dir, credentials);
  if (rpc::TlsFiles files = rpc::TlsFilesFromEnvironment(); files.enabled()) return rpc::LoadTls(files, credentials);
  auto hp = ParseHostPort(gcs_address);
  if (!hp.ok()) return hp.status();
  const bool due = TlsDueFor(mode, hp->host);
  // On loopback nobody else sees the traffic: a GCS there that does not enroll (a
  // cluster without TLS) is spoken to in plaintext. One that binds every interface
  // runs TLS, and enrolls.
  if (!due && mode == ClusterTlsMode::kOff) return absl::OkStatus();
  auto address = ResolveIpv4(hp->host);
  if (!address.ok()) return address.status();
  auto cert = Enroll(*address + ":" + std::to_string(hp->port), credentials->token, addresses, timeout_ms);
  if (!due && absl::IsUnavailable(cert.status())) return absl::OkStatus();
  if (!cert.ok()) return cert.status();
  credentials->tls_ca = std::move(cert->ca_pem);
  credentials->tls_cert = std::move(cert->cert_pem);
  credentials->tls_key = std::move(cert->key_pem);
  return absl::OkStatus();
}

}  // namespace manta
