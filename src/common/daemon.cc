#include "src/common/daemon.h"

#include "src/common/logging.h"
#include "src/common/process.h"
#include "src/common/rpc/network_limits.h"

namespace manta {

void AddDaemonFlags(FlagParser& parser, DaemonFlags* flags) {
  parser.Add("--log-dir", &flags->log_dir, "log directory (default: stderr)");
  parser.Add("--system-config", &flags->system_config, "JSON object of config overrides");
  parser.Add("--token-file", &flags->token_file, "file holding the cluster token (default: $MANTA_CLUSTER_TOKEN)");
  parser.Add("--tls-cert", &flags->tls.cert_file,
             "TLS certificate chain (PEM); turns TLS on with --tls-key, --tls-ca");
  parser.Add("--tls-key", &flags->tls.key_file, "TLS private key (PEM)");
  parser.Add("--tls-ca", &flags->tls.ca_file, "CA certificate every member's certificate is signed by (PEM)");
}

absl::StatusOr<DaemonSetup> SetUpDaemon(const char* program, const DaemonFlags& flags) {
  InitLogging(program, flags.log_dir);
  RaiseOpenFileLimit();
  auto credentials = rpc::InstallDaemonCredentials(flags.token_file, flags.tls);
  if (!credentials.ok()) return credentials.status();
  auto config = Config::Load(flags.system_config);
  if (!config.ok()) return config.status();
  rpc::SetNetworkLimits(rpc::NetworkLimitsFromConfig(*config));
  auto faults = rpc::FaultInjector::Parse(config->testing_rpc_failure);
  if (!faults.ok()) return faults.status();
  return DaemonSetup{*credentials, *config, std::make_shared<rpc::FaultInjector>(*faults)};
}

}  // namespace manta
