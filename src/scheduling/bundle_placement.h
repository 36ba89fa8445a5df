// Bundle placement (ARCHITECTURE.md §7): on which nodes the bundles of a placement
// group go, by its strategy. A pure function of the group and the nodes' resources;
// the GCS placement group scheduler then reserves the result with two-phase commit.
//
//   PACK           as few nodes as possible: all bundles on one node when one can hold
//                  them, else nodes filled in turn (best effort);
//   SPREAD         as many nodes as possible: each bundle on a node holding no other
//                  bundle of the group while there is one, else any node (best effort);
//   STRICT_PACK    every bundle on one node, or no placement;
//   STRICT_SPREAD  every bundle on a node of its own, or no placement.
//
// Bundles already placed (rescheduling after a node died) keep their nodes and count
// for the strict strategies: the rest of a STRICT_PACK group joins their node, and
// the rest of a STRICT_SPREAD group avoids it.
//
// The outcome is kPlaced when the bundles fit in the nodes' available resources now;
// kNotNow when they would fit in the nodes' totals (so once other work gives
// resources back); kInfeasible when not even the totals of the nodes given can hold
// them by the strategy (it may become feasible when nodes join). The choice among
// equally good nodes is deterministic (least utilised first, then node id), so tests
// can name the outcome.
#pragma once

#include <string>
#include <vector>

#include "protos/common.pb.h"
#include "src/common/id.h"
#include "src/scheduling/resources.h"

namespace manta::scheduling {

// A node bundles may go to: alive, not draining. Resources are the node's own (no
// bundle resources), as its raylet last reported them.
struct BundleNode {
  NodeID node_id;
  ResourceMap total;
  ResourceMap available;
};

struct BundlePlacement {
  enum class Outcome { kPlaced, kNotNow, kInfeasible };
  Outcome outcome = Outcome::kInfeasible;
  // With kPlaced: the node of every bundle, in bundle order (placed bundles keep
  // theirs). Empty otherwise.
  std::vector<NodeID> nodes;
  // With kNotNow and kInfeasible: why, naming the bundle and its resources, e.g.
  // "bundle 2 {CPU: 8} fits on no node" or "STRICT_SPREAD needs 4 nodes, 3 can hold
  // its bundles". With kPlaced and better_once_freed: how it would be better.
  std::string reason;
  // With kPlaced by a best-effort strategy: the group would be placed better once the
  // resources in use are given back (PACK on fewer nodes, SPREAD on more), as the
  // same strategy over the nodes' totals places it. Availability may be stale (a
  // report not sent yet, a lease about to be returned): the caller may wait a little.
  bool better_once_freed = false;
};

// Places `bundles` (bundle i reserves bundles[i]) by `strategy` over `nodes`.
// `placed[i]`, when not nil, is the node already holding bundle i: it is kept and
// not placed again (its resources are already taken from that node's available).
// REQUIRES: placed.size() == bundles.size(); every bundle has at least one positive
// quantity (the GCS validates groups before placing them).
BundlePlacement PlaceBundles(const std::vector<ResourceMap>& bundles, const std::vector<NodeID>& placed,
                             rpc::PlacementStrategy strategy, const std::vector<BundleNode>& nodes);

}  // namespace manta::scheduling
