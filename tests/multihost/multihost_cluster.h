// MultiHostCluster: a Manta cluster across the hosts of a TestBed, started as a
// user would start one on several machines: `manta start --head` on host 0, then on
// every other host the head's token file copied there (through a pipe, never on a
// command line) and `manta start --address <head> --bind-address <host's address>
// --token-file <copy>`. Host i offers the custom resource "host<i>" (100 units), so
// work can be pinned to a host, and every host but the head "worker_host" (100), so
// work can be kept off the head. Drivers are the multi-host driver program
// (multihost_driver.cc), run on any host with RAY_ADDRESS set.
//
// Thread-compatible: one test thread drives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/multihost/testbed.h"

namespace manta::testing {

struct MultiHostOptions {
  int num_hosts = 4;
  int cpus_per_host = 2;
  int64_t object_store_bytes = int64_t{512} << 20;
  // --system-config of the head (cluster-wide), e.g. faster health checks.
  std::string system_config;
  // More `manta start` flags for every host (e.g. TLS files), and for the head only.
  std::vector<std::string> extra_start_args;
  std::vector<std::string> head_start_args;
  // Environment of every command (e.g. MANTA_TLS_* for drivers and the CLI).
  TestBed::Env env;
};

class MultiHostCluster {
 public:
  // Makes the test bed and starts the cluster; the error says which step failed.
  static absl::StatusOr<std::unique_ptr<MultiHostCluster>> Start(const MultiHostOptions& options);
  // Starts Manta on a bed made by the caller (some hosts may be left out by giving
  // num_hosts below the bed's).
  static absl::StatusOr<std::unique_ptr<MultiHostCluster>> StartOn(std::unique_ptr<TestBed> bed,
                                                                   const MultiHostOptions& options);

  TestBed& bed() { return *bed_; }
  const std::string& gcs_address() const { return gcs_address_; }
  const std::string& token() const { return token_; }
  // Where the token was copied on every host but the head.
  static constexpr char kTokenPath[] = "/tmp/cluster_token";

  // `manta <args>` on `host`.
  CommandResult Manta(int host, const std::vector<std::string>& args, int64_t timeout_ms = 30000);
  // `manta status --json` on `host`, parsed (an empty object when it fails).
  nlohmann::json Status(int host = 0);
  // The state ("ALIVE", "DEAD") of the node at `ip` per `manta status` on host 0; ""
  // if unknown. With `end_time_ms`, when it died.
  std::string NodeState(const std::string& ip, int64_t* end_time_ms = nullptr);
  // The multi-host driver on `host` with `args` (and `env` added to its environment).
  CommandResult Driver(int host, const std::vector<std::string>& args, int64_t timeout_ms = 120000,
                       const TestBed::Env& env = {});
  absl::StatusOr<TestBed::Process> SpawnDriver(int host, const std::vector<std::string>& args);
  // Joins `host` to the cluster (`manta start --address`); extra flags appended.
  absl::Status StartNode(int host, const std::vector<std::string>& extra_args = {});

 private:
  MultiHostCluster() = default;
  TestBed::Env DriverEnv() const;
  std::vector<std::string> StartArgs(int host) const;

  std::unique_ptr<TestBed> bed_;
  MultiHostOptions options_;
  std::string gcs_address_;
  std::string token_;
};

// The JSON a driver printed on its "RESULT <json>" line; null when there is none.
nlohmann::json DriverResult(const std::string& output);

// The Manta CLI and the driver program, as built.
std::string MantaCli();
std::string MultiHostDriver();

}  // namespace manta::testing
