// The hybrid scheduling policy (ARCHITECTURE.md §7): on which node a lease request
// should run.
//
// A pure function of the request, this node's own (exact) resources and the cluster
// resource view (every other alive node, possibly a report period stale). Prefer the
// local node while it can run the request now and its utilisation is below the spread
// threshold; else pick at random among the top-k least-utilised nodes that can run it
// now; else queue where it could ever run (the local node first); else the request is
// infeasible. No state and no threads: callable from anywhere.
#pragma once

#include <cstddef>
#include <functional>

#include "src/common/id.h"
#include "src/scheduling/cluster_resource_view.h"
#include "src/scheduling/resources.h"

namespace manta::scheduling {

// This node as the policy sees it.
struct LocalNodeState {
  NodeID node_id;
  const ResourceMap* total = nullptr;
  const ResourceMap* available = nullptr;
  // The node accepted a drain: it takes no new work.
  bool draining = false;
};

struct SchedulingPolicyOptions {
  // Prefer the local node while its utilisation is below this (0..1).
  double spread_threshold = 0.5;
  // Pick among max(1, fraction × number of nodes) least-utilised nodes.
  double top_k_fraction = 0.2;
};

struct SchedulingDecision {
  enum class Kind {
    kLocal,       // run (or queue) here
    kRemote,      // spill back to `node_id`
    kInfeasible,  // no alive node's totals can satisfy the request
  };
  Kind kind = Kind::kInfeasible;
  // The chosen node (this node for kLocal); nil for kInfeasible.
  NodeID node_id;
  // The chosen node has the resources available now (per the view for other nodes).
  bool available_now = false;
};

// Returns a uniformly random index in [0, n). Called with n > 0 only.
using RandomIndexFn = std::function<size_t(size_t n)>;

// Decides where `request` runs. Nodes that are draining are never chosen; the
// view's entry for the local node is ignored in favour of `local`.
// REQUIRES: local.total and local.available are set.
SchedulingDecision ScheduleLease(const ResourceMap& request, const LocalNodeState& local,
                                 const ClusterResourceView& view, const SchedulingPolicyOptions& options,
                                 const RandomIndexFn& random_index);

// How busy a node is for `request`: the largest used/total ratio over the resource
// kinds the request asks for (those the node has), or the CPU ratio when the request
// names none of them. 0 when idle; above 1 when oversubscribed.
double NodeUtilisation(const ResourceMap& request, const ResourceMap& total, const ResourceMap& available);

}  // namespace manta::scheduling
