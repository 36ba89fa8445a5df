// ClusterHarness: drives real Manta clusters through the `manta` CLI for integration
// tests. Each harness has its own MANTA_TEMP_DIR, so `manta stop` in one test never
// touches another's processes; the destructor stops (and, failing that, kills by
// pid) everything the harness's sessions recorded.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "protos/common.pb.h"
#include "test_util/test_util.h"

namespace manta::testing {

class ClusterHarness {
 public:
  ClusterHarness();
  ~ClusterHarness();

  // Runs `manta <args...>` with this harness's temp root and `extra_env`.
  CommandResult Manta(const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& extra_env = {},
                      int64_t timeout_ms = 60000);

  // `manta start --head --port 0 ...`; returns the GCS address (fails the test if not).
  // `extra_env` is added to the CLI's environment.
  std::string StartHead(const std::vector<std::string>& extra_args = {},
                        const std::vector<std::pair<std::string, std::string>>& extra_env = {});
  // `manta start --address <gcs> ...`.
  void StartNode(const std::vector<std::string>& extra_args = {});
  // `manta status --json`, parsed. Empty object on failure.
  nlohmann::json Status();
  // Number of nodes in `state` ("ALIVE"/"DEAD") per `manta status --json`.
  int CountNodes(const std::string& state);
  // CPUs available across the alive nodes per `manta status --json`; -1 if unknown.
  double AvailableCpus();
  // Alive nodes as the GCS lists them, in start order.
  std::vector<rpc::NodeInfo> AliveNodes() const;

  // Live pids recorded in this harness's sessions for a role ("raylet", "gcs", "redis").
  std::vector<pid_t> Pids(const std::string& role) const;
  // Every recorded pid that is still running.
  std::vector<pid_t> LivePids() const;

  const std::string& gcs_address() const { return gcs_address_; }
  // The head's cluster token. StartHead installs it as this process's credentials and
  // in MANTA_CLUSTER_TOKEN, so the test's own calls and ray::Init join (a driver this
  // test starts gets it only when given: StartProcess never passes it on).
  const std::string& token() const { return token_; }
  const std::string& temp_root() const { return root_.path(); }
  // The Redis address started by the head.
  std::string RedisAddress() const;
  // The head's session directory (holds the token and Redis password files).
  std::string HeadSessionDir() const;
  // What a GCS restarted by hand needs to serve this cluster: its Redis (address and
  // password file) and its token file.
  std::vector<std::string> GcsArgs() const;
  // Kills the cluster's GCS (SIGKILL) and starts a new one on the same port against
  // the same Redis (with `system_config`, if any), waiting until it serves. The new
  // GCS is killed with the harness. Returns its pid, or why it did not start.
  absl::StatusOr<pid_t> RestartGcs(const std::string& system_config = "");

 private:
  TempDir root_;
  std::string gcs_address_;
  // GCSs started by RestartGcs (no session records them).
  std::vector<pid_t> restarted_gcs_;
  std::string token_;
};

}  // namespace manta::testing
