// BenchCluster: a real local cluster for benchmarks, started and stopped through the
// `manta` CLI in a private temp root (so it never touches the user's clusters).
#pragma once

#include <string>
#include <vector>

#include "protos/common.pb.h"

namespace manta::bench {

class BenchCluster {
 public:
  BenchCluster();
  ~BenchCluster();  // `manta stop --force` in the private root; removes the root

  // Starts a head (or, after that, a joining node) with extra `manta start` flags.
  // Aborts the benchmark with a message on failure.
  void StartHead(const std::vector<std::string>& args);
  void StartNode(const std::vector<std::string>& args);
  // Every alive node, in start order, from the GCS.
  std::vector<rpc::NodeInfo> Nodes() const;
  const std::string& gcs_address() const { return gcs_address_; }
  // The private temp root the cluster's sessions (and their pid records) live in.
  const std::string& root() const { return root_; }
  // Waits (up to a minute per node) until every raylet has pre-faulted what it means
  // to of its object store (ArenaPager), so figures do not depend on when they start.
  void WaitForPrefault() const;
  // Runs `manta <args>` against this cluster's root; returns what it printed.
  std::string RunManta(const std::vector<std::string>& args) const;

 private:
  std::string root_;
  std::string gcs_address_;
};

// Aborts the benchmark: throws std::runtime_error(message), which main() reports
// after the cluster's destructor has stopped every daemon.
[[noreturn]] void Die(const std::string& message);

}  // namespace manta::bench
