#include "src/common/rpc/auth.h"
#include "src/common/metrics/metrics_proto.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "src/common/logging.h"
#include "src/common/rpc/tcp_acceptor.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::rpc {

namespace {

struct ProcessState {
  absl::Mutex mu;
  Credentials credentials ABSL_GUARDED_BY(mu);
};

ProcessState& State() {
  static ProcessState* const state = new ProcessState();
  return *state;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// At most one line a second for refused calls, however many arrive.
void LogRefused(const grpc::ServerContextBase& context, const char* rpc_name, const char* why) {
  static LogRateLimiter* const limiter = new LogRateLimiter();
  int64_t others = 0;
  if (!limiter->Allow(&others)) return;
  LOG(WARNING) << "refused " << rpc_name << " from " << DescribePeer(context.peer()) << ": " << why
               << LogRateLimiter::LeftOut(others);
}

}  // namespace

TlsFiles TlsFilesFromEnvironment() {
  return TlsFiles{Env("MANTA_TLS_CERT"), Env("MANTA_TLS_KEY"), Env("MANTA_TLS_CA")};
}

absl::Status LoadTls(const TlsFiles& files, Credentials* credentials) {
  if (!files.enabled()) return absl::OkStatus();
  struct Part {
    const char* flag;
    const std::string& path;
    std::string* out;
  };
  for (const Part& part : {Part{"--tls-cert (MANTA_TLS_CERT)", files.cert_file, &credentials->tls_cert},
                           Part{"--tls-key (MANTA_TLS_KEY)", files.key_file, &credentials->tls_key},
                           Part{"--tls-ca (MANTA_TLS_CA)", files.ca_file, &credentials->tls_ca}}) {
    if (part.path.empty()) {
      return absl::InvalidArgumentError(std::string("TLS needs a certificate, a key and a CA; ") + part.flag +
                                        " is missing");
    }
    auto pem = ReadFile(part.path);
    if (!pem.ok()) {
      return absl::InvalidArgumentError(std::string(part.flag) + ": cannot read " + part.path + ": " +
                                        std::string(pem.status().message()));
    }
    if (pem->find("-----BEGIN") == std::string::npos) {
      return absl::InvalidArgumentError(std::string(part.flag) + ": " + part.path + " is not a PEM file");
    }
    *part.out = std::move(*pem);
  }
  return absl::OkStatus();
}

void SetProcessCredentials(Credentials credentials) {
  ProcessState& state = State();
  absl::MutexLock lock(&state.mu);
  state.credentials = std::move(credentials);
}

absl::StatusOr<Credentials> InstallDaemonCredentials(const std::string& token_file, const TlsFiles& tls) {
  Credentials credentials;
  auto token = LoadDaemonToken(token_file);
  if (!token.ok()) return token.status();
  credentials.token = std::move(*token);
  if (auto s = LoadTls(tls, &credentials); !s.ok()) return s;
  SetProcessCredentials(credentials);
  return credentials;
}

Credentials ProcessCredentials() {
  ProcessState& state = State();
  absl::ReaderMutexLock lock(&state.mu);
  return state.credentials;
}

std::string TlsHint() {
  return ProcessCredentials().tls()
             ? " (TLS is on here: is it on in the cluster, with certificates signed by this CA?)"
             : " (TLS is off here: if the cluster uses TLS, set MANTA_TLS_CERT, MANTA_TLS_KEY and MANTA_TLS_CA)";
}

absl::Status AuthenticateCall(const grpc::ServerContextBase& context, const char* rpc_name) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kClusterTokenMetadataKey);
  bool match = false;
  {
    ProcessState& state = State();
    absl::ReaderMutexLock lock(&state.mu);
    match = it != metadata.end() && !state.credentials.token.empty() &&
            ConstantTimeEquals(std::string_view(it->second.data(), it->second.size()), state.credentials.token);
  }
  if (match) {
    // The connection has proven itself (tcp_acceptor.h).
    if (AnyUnprovenConnections()) MarkAuthenticated(context.peer());
    return absl::OkStatus();
  }
  const char* why = it == metadata.end() ? "no cluster token" : "wrong cluster token";
  LogRefused(context, rpc_name, why);
  metrics::CountAuthFailure("grpc");
  return absl::UnauthenticatedError(std::string(rpc_name) + " refused: " + why +
                                    " (this process is not a member of the cluster; see README, Security)");
}

}  // namespace manta::rpc
