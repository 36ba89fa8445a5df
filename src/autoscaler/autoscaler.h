// Autoscaler: decides which nodes to launch, drain and terminate (ARCHITECTURE.md
// §7, autoscaling), from snapshots of the cluster. The decisions only: the daemon
// (main.cc) takes the snapshots from the GCS and carries the actions out through a
// NodeProvider (node_provider.h) and the GCS's DrainNode.
//
// Each Update(snapshot, now):
//  1. Matches the instances it launched with the nodes that joined (a node's
//     instance_id; a node of a configured type it does not know — launched by a
//     provider that picks its own ids, or before a restart — is adopted, taking the
//     place of the oldest launch of its type). A launch not joined within
//     launch_timeout is terminated; an instance whose node died is terminated too.
//  2. Demand: every request waiting at a raylet (queued or infeasible, with the
//     owners' backlogs), and the bundles of pending placement groups (a STRICT_PACK
//     group as one request, a STRICT_SPREAD group's bundles on distinct nodes).
//  3. Fits the demand, largest first, into what the alive nodes have available and
//     what launching nodes will have; the rest into new nodes of the smallest type
//     that holds it, within each type's max_workers, the cluster's max_workers and
//     max(5, upscaling_speed * nodes of the type) launches at a time. Demand no type
//     can hold, or beyond the limits, is reported (State), never retried in a loop.
//     Types are also kept at their min_workers.
//  4. A node it launched that is idle — no leases, no waiting requests, no primary
//     objects (in memory or spilled), nothing reserved for bundles — for
//     idle_timeout, while its type stays at or above min_workers and no unmet demand
//     would fit it, is drained (it takes no new leases); once the raylet itself,
//     asked after the drain took hold, says it holds no lease and no primary object,
//     it is terminated.
//
// Thread: not thread-safe; the daemon calls it from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/autoscaler/autoscaler_config.h"
#include "src/scheduling/resources.h"

namespace manta::autoscaler {

// One alive node as the GCS reports it.
struct NodeSnapshot {
  std::string node_id;  // hex
  bool is_head = false;
  bool draining = false;
  std::string node_type;    // empty: not launched by the autoscaler
  std::string instance_id;  // the provider's id
  scheduling::ResourceMap total;
  scheduling::ResourceMap available;
  // Requests waiting at the node: shape and count (queued + infeasible).
  std::vector<std::pair<scheduling::ResourceMap, int64_t>> demands;
  int64_t num_leases = 0;
  // Primary copies held, in memory or spilled.
  int64_t primary_objects = 0;
  int64_t spilled_bytes = 0;
  // The counts above come straight from the raylet (asked for a draining node), not
  // from its last report to the GCS.
  bool fresh = false;
};

// A placement group not (fully) placed.
struct PendingGroup {
  std::string id;  // hex
  std::string strategy;  // PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
  std::vector<scheduling::ResourceMap> bundles;
};

struct ClusterSnapshot {
  std::vector<NodeSnapshot> nodes;
  std::vector<PendingGroup> pending_groups;
};

// What the autoscaler asks of the world; each call returns at once.
class ClusterActions {
 public:
  virtual ~ClusterActions() = default;
  // Starts one node of `type`, named `instance_id`; the daemon reports a failure to
  // ask for it back through Autoscaler::OnLaunchFailed.
  virtual void Launch(const NodeTypeConfig& type, const std::string& instance_id) = 0;
  virtual void Terminate(const std::string& node_type, const std::string& instance_id) = 0;
  virtual void Drain(const std::string& node_id) = 0;
};

class Autoscaler {
 public:
  enum class InstanceState { kLaunching, kRunning, kDraining, kTerminating };
  struct Instance {
    std::string id;
    std::string node_type;
    InstanceState state = InstanceState::kLaunching;
    std::string node_id;         // hex, once joined
    int64_t since_ms = 0;        // entered its state
    int64_t idle_since_ms = -1;  // running and idle since (-1: busy)
  };
  // One shape of demand that the nodes there are do not meet.
  struct UnmetDemand {
    scheduling::ResourceMap shape;
    int64_t count = 0;
    std::string status;  // "launching", "at max_workers", "no node type holds it"
  };

  Autoscaler(AutoscalerConfig config, ClusterActions& actions, std::function<std::string()> new_instance_id);

  void Update(const ClusterSnapshot& snapshot, int64_t now_ms);
  // The provider could not launch it: forgotten (a later Update asks again if the
  // demand is still there), and why is kept for State.
  void OnLaunchFailed(const std::string& instance_id, const std::string& why);
  // Launches, drains and terminations so far, and the last demand not met, for
  // `manta status` and the dashboard (published in the GCS KV).
  nlohmann::json State() const;
  const std::map<std::string, Instance>& instances() const { return instances_; }
  const std::vector<UnmetDemand>& unmet() const { return unmet_; }
  // Terminates every instance it knows (the daemon's shutdown).
  void TerminateAll();

 private:
  struct Bin;
  void Reconcile(const ClusterSnapshot& snapshot, int64_t now_ms);
  void ScaleUp(const ClusterSnapshot& snapshot, int64_t now_ms);
  void ScaleDown(const ClusterSnapshot& snapshot, int64_t now_ms);
  // The smallest type that holds `shape` and may have one more node launched now,
  // given the launches already planned; null if none (`any_holds`: some type holds it).
  const NodeTypeConfig* NewNodeType(const scheduling::ResourceMap& shape, const std::map<std::string, int>& to_launch,
                                    bool* any_holds) const;
  void LaunchOne(const NodeTypeConfig& type, int64_t now_ms);
  void TerminateOne(Instance& instance, int64_t now_ms, const std::string& why);
  int CountOfType(const std::string& type) const;  // instances not being terminated
  int CountLaunched() const;

  AutoscalerConfig config_;
  ClusterActions& actions_;
  std::function<std::string()> new_instance_id_;
  std::map<std::string, Instance> instances_;
  std::vector<UnmetDemand> unmet_;
  // The last few things done, newest last, with when (ms since the epoch).
  struct Event {
    int64_t time_ms;
    std::string message;
  };
  void Record(int64_t now_ms, std::string message);
  std::vector<Event> events_;
  int64_t last_update_ms_ = 0;
};

std::string InstanceStateName(Autoscaler::InstanceState state);

}  // namespace manta::autoscaler
