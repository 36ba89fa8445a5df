// GcsHealthChecker: declares a raylet DEAD after consecutive missed health checks.
//
// Each Tick() sends one check to every watched node that is due and has no check in
// flight. A failed check counts a miss; a successful one resets the count. At
// `failure_threshold` misses the node is removed from the watch list and `on_dead`
// runs. How a node is checked is injected (a gRPC call in the GCS, a fake in tests).
// Loop thread only.
//
// With `period_ms` 0, every node past its initial grace period is due at every
// Tick(), which the owner calls once a period. With `period_ms` > 0 each node is due
// once a period at its own phase (its id's hash within the period, added to the
// initial grace period), and the owner calls Tick() more often (the phase's
// granularity): nodes that joined together are not all checked at one instant, so a
// thousand nodes cost a thousand calls spread over the period, not one burst.
//
// A GCS cut off from the network misses every other machine's checks at once. When
// every node on another host than the GCS is failing (and there are at least two
// such nodes), the GCS is more likely isolated than they all dead: none is declared
// dead until `isolation_grace_ms` after its first miss, which should be no less
// than the time raylets wait for an unreachable GCS before they leave on their own
// (gcs_rpc_server_reconnect_timeout_s). Nodes on the GCS's own host never count as
// remote, so a cluster on one machine is not affected. When the first of them
// answers again, the misses counted meanwhile are forgotten: every remote node gets
// a fresh count, time for its connection to come back.
#pragma once

#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "src/common/id.h"

namespace manta::gcs {

class GcsHealthChecker {
 public:
  using CheckFn = std::function<void(const NodeID&, std::function<void(absl::Status)>)>;
  using DeadFn = std::function<void(const NodeID&, const std::string& reason)>;

  GcsHealthChecker(CheckFn check, DeadFn on_dead, int64_t failure_threshold, int64_t initial_delay_ms,
                   std::function<int64_t()> now_ms, int64_t isolation_grace_ms = 0, int64_t period_ms = 0);

  // `remote`: the node runs on another host than the GCS.
  void AddNode(const NodeID& node_id, bool remote = false);
  void RemoveNode(const NodeID& node_id);
  void Tick();
  bool IsWatching(const NodeID& node_id) const { return nodes_.contains(node_id); }

 private:
  struct NodeState {
    int64_t misses = 0;
    int64_t first_miss_ms = 0;  // of the current run of misses
    int64_t next_check_ms = 0;  // due from then on
    bool remote = false;
    bool in_flight = false;
    // Incremented on every Add so a stale reply for an earlier registration is ignored.
    uint64_t generation = 0;
  };

  void OnCheckResult(const NodeID& id, uint64_t generation, const absl::Status& status);
  // Every remote node is failing, and there are at least two.
  bool Isolated() const;

  CheckFn check_;
  DeadFn on_dead_;
  int64_t failure_threshold_;
  int64_t initial_delay_ms_;
  int64_t isolation_grace_ms_;
  int64_t period_ms_;
  std::function<int64_t()> now_ms_;
  uint64_t next_generation_ = 1;
  // A declaration was held because the GCS looked isolated; the first remote node
  // to answer again ends that, and every remote node's count starts afresh.
  bool isolation_held_ = false;
  absl::flat_hash_map<NodeID, NodeState> nodes_;
};

}  // namespace manta::gcs
