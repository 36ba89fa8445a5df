// What every daemon's main (manta_gcs, manta_raylet) does first: the flags they all
// take (log directory, config overrides, token file, TLS files), and setting up
// from them: logging, the open-file limit, the process's credentials, the config and
// its fault injector.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/common/config.h"
#include "src/common/flags.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/fault_injection.h"

namespace manta {

struct DaemonFlags {
  std::string log_dir;
  std::string system_config;  // JSON object of config overrides
  std::string token_file;
  rpc::TlsFiles tls;
};

// Adds --log-dir, --system-config, --token-file, --tls-cert, --tls-key, --tls-ca.
void AddDaemonFlags(FlagParser& parser, DaemonFlags* flags);

struct DaemonSetup {
  rpc::Credentials credentials;
  Config config;
  std::shared_ptr<rpc::FaultInjector> faults;  // never null
};

// Logging (to flags.log_dir, else stderr), the open-file limit, credentials
// (installed for the process), the config with the overrides. An error names the
// bad flag or file; the daemon should exit with code 2.
absl::StatusOr<DaemonSetup> SetUpDaemon(const char* program, const DaemonFlags& flags);

}  // namespace manta
