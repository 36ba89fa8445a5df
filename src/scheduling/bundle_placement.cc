#include "src/scheduling/bundle_placement.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "src/scheduling/scheduling_policy.h"

namespace manta::scheduling {

namespace {

enum class Capacity { kAvailable, kTotal };

constexpr size_t kUnmatched = std::numeric_limits<size_t>::max();

std::string Braced(const ResourceMap& resources) { return "{" + FormatResources(resources) + "}"; }

// "bundle 3" or "bundles 0-2, 5": runs of consecutive indices collapse, so that a
// large group still gives a short reason. REQUIRES: `indices` ascending, not empty.
std::string NameBundles(const std::vector<size_t>& indices) {
  std::string out = indices.size() == 1 ? "bundle " : "bundles ";
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(indices[i]);
    if (j > i) out += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  return out;
}

// "1 node", "3 nodes".
std::string CountNodes(size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

size_t CountDistinct(std::vector<NodeID> nodes) {
  std::sort(nodes.begin(), nodes.end());
  return static_cast<size_t>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

// Kuhn's augmenting path from bundle `k`: takes the first free node of `edges[k]`
// (its preference order), else one whose bundle can move on to another node it fits.
// `owner[n]` is the bundle on node n. Free nodes are looked at first so that a bundle
// displaces an earlier one only when it has to.
bool Augment(size_t k, const std::vector<std::vector<size_t>>& edges, std::vector<bool>& seen,
             std::vector<size_t>& owner) {
  for (size_t n : edges[k]) {
    if (owner[n] != kUnmatched) continue;
    owner[n] = k;
    return true;
  }
  for (size_t n : edges[k]) {
    if (seen[n]) continue;
    seen[n] = true;
    if (Augment(owner[n], edges, seen, owner)) {
      owner[n] = k;
      return true;
    }
  }
  return false;
}

// One attempt at placing a group over one capacity of the nodes (what is available
// now, or their totals). Works on its own copy of the nodes' resources, taking each
// bundle's resources as it places it.
class PlacementPass {
 public:
  PlacementPass(const std::vector<ResourceMap>& bundles, const std::vector<NodeID>& placed,
                const std::vector<BundleNode>& nodes, Capacity capacity);

  // Places the bundles not yet placed by `strategy`. True when all are: chosen() is
  // then the node of every bundle. Otherwise reason() says why not.
  bool Run(rpc::PlacementStrategy strategy);
  const std::vector<NodeID>& chosen() const { return chosen_; }
  const std::string& reason() const { return reason_; }

 private:
  struct Node {
    NodeID id;
    const ResourceMap* total = nullptr;
    // What this pass may still give to bundles.
    ResourceMap free;
    // Bundles of the group on the node: already placed, or placed by this pass.
    size_t group_bundles = 0;
  };

  bool Pack();
  bool Spread();
  bool StrictPack();
  bool StrictSpread();

  // False, with the reason, when a bundle to place fits on none of `candidates` even
  // alone; `which` ends the reason, saying which nodes those are.
  bool EachBundleFits(const std::vector<size_t>& candidates, const std::string& which = "");
  // As many of the bundles `order` as possible, each on a node of its own among
  // `candidates`: a maximum bipartite matching, so that no greedy choice takes the
  // only node a later bundle fits on. Bundles earlier in `order` get their pick of the
  // nodes, least utilised first. Returns each bundle's node (kUnmatched: none).
  std::vector<size_t> MatchDistinct(const std::vector<size_t>& order, const std::vector<size_t>& candidates) const;
  // `candidates` least utilised first for `request` (rounded to the resource step, so
  // equal ratios computed from different totals tie), then by node id.
  std::vector<size_t> ByUtilisation(std::vector<size_t> candidates, const ResourceMap& request) const;
  int64_t Utilisation(size_t node, const ResourceMap& request) const;
  // The bundles to place, largest first (ties in bundle order).
  std::vector<size_t> LargestFirst() const;
  std::vector<size_t> AllNodes() const;
  std::optional<size_t> FindNode(const NodeID& id) const;
  ResourceMap SumToPlace() const;
  bool Fits(size_t bundle, size_t node) const { return ResourcesFit(bundles_[bundle], nodes_[node].free); }
  void Assign(size_t bundle, size_t node);
  std::string Describe(size_t bundle) const { return NameBundles({bundle}) + " " + Braced(bundles_[bundle]); }
  std::string Resources() const { return capacity_ == Capacity::kAvailable ? "available" : "total"; }
  bool Fail(std::string reason) {
    reason_ = std::move(reason);
    return false;
  }

  const std::vector<ResourceMap>& bundles_;
  const Capacity capacity_;
  std::vector<Node> nodes_;       // sorted by id
  std::vector<size_t> to_place_;  // the bundles not placed yet, ascending
  std::vector<size_t> placed_;    // the bundles already placed, ascending
  // Each bundle's size for ordering: its largest share of the cluster's total of a
  // resource it asks for (infinite for a resource no node has).
  std::vector<double> size_;
  std::vector<NodeID> chosen_;
  std::string reason_;
};

PlacementPass::PlacementPass(const std::vector<ResourceMap>& bundles, const std::vector<NodeID>& placed,
                             const std::vector<BundleNode>& nodes, Capacity capacity)
    : bundles_(bundles), capacity_(capacity), chosen_(placed) {
  ResourceMap cluster_total;
  for (const BundleNode& node : nodes) {
    nodes_.push_back(Node{node.node_id, &node.total,
                          capacity == Capacity::kAvailable ? node.available : node.total, 0});
    AddResources(cluster_total, node.total);
  }
  std::sort(nodes_.begin(), nodes_.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (placed[i].IsNil()) {
      to_place_.push_back(i);
    } else {
      placed_.push_back(i);
      if (std::optional<size_t> n = FindNode(placed[i])) {
        ++nodes_[*n].group_bundles;
        // A placed bundle's resources are already out of its node's available, and
        // they stay out of its total: the bundle does not give them back.
        if (capacity == Capacity::kTotal) SubtractResources(nodes_[*n].free, bundles[i]);
      }
    }
    double size = 0;
    for (const auto& [name, amount] : bundles[i]) {
      int64_t want = ToSteps(amount);
      if (want <= 0) continue;
      auto it = cluster_total.find(name);
      int64_t have = it == cluster_total.end() ? 0 : ToSteps(it->second);
      size = std::max(size, have <= 0 ? std::numeric_limits<double>::infinity()
                                      : static_cast<double>(want) / static_cast<double>(have));
    }
    size_.push_back(size);
  }
}

bool PlacementPass::Run(rpc::PlacementStrategy strategy) {
  if (to_place_.empty()) return true;
  switch (strategy) {
    case rpc::PACK:
      return Pack();
    case rpc::SPREAD:
      return Spread();
    case rpc::STRICT_PACK:
      return StrictPack();
    case rpc::STRICT_SPREAD:
      return StrictSpread();
    default:
      return Fail("unknown placement strategy " + std::to_string(static_cast<int>(strategy)));
  }
}

bool PlacementPass::Pack() {
  if (!EachBundleFits(AllNodes())) return false;
  const ResourceMap rest = SumToPlace();
  // Nodes already holding bundles of the group first (the most first): the group
  // stays on as few nodes as it can.
  std::vector<size_t> order = ByUtilisation(AllNodes(), rest);
  std::stable_sort(order.begin(), order.end(),
                   [this](size_t a, size_t b) { return nodes_[a].group_bundles > nodes_[b].group_bundles; });
  for (size_t n : order) {
    if (!ResourcesFit(rest, nodes_[n].free)) continue;
    for (size_t b : to_place_) Assign(b, n);
    return true;
  }
  // No node holds them all: fill the nodes in turn, first fit with the largest
  // bundles first (best effort; the optimum is bin packing).
  std::vector<size_t> pending = LargestFirst();
  for (size_t n : order) {
    std::vector<size_t> left;
    for (size_t b : pending) {
      if (Fits(b, n)) {
        Assign(b, n);
      } else {
        left.push_back(b);
      }
    }
    pending = std::move(left);
  }
  if (pending.empty()) return true;
  return Fail(Describe(pending.front()) + " fits in no node's " + Resources() +
              " resources beside the group's other bundles");
}

bool PlacementPass::Spread() {
  if (!EachBundleFits(AllNodes())) return false;
  // First as many bundles as can be on nodes of their own (so SPREAD places whatever
  // STRICT_SPREAD would), then the rest where they fit, best effort.
  std::vector<size_t> unused;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].group_bundles == 0) unused.push_back(n);
  }
  const std::vector<size_t> order = LargestFirst();
  const std::vector<size_t> matched = MatchDistinct(order, unused);
  for (size_t k = 0; k < order.size(); ++k) {
    if (matched[k] != kUnmatched) Assign(order[k], matched[k]);
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (matched[k] != kUnmatched) continue;
    const size_t b = order[k];
    // The node with the fewest bundles of the group, then the least utilised, then
    // the smallest id (nodes_ is in id order).
    std::optional<size_t> best;
    std::pair<size_t, int64_t> best_key;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (!Fits(b, n)) continue;
      std::pair<size_t, int64_t> key{nodes_[n].group_bundles, Utilisation(n, bundles_[b])};
      if (!best || key < best_key) {
        best = n;
        best_key = key;
      }
    }
    if (!best) {
      return Fail(Describe(b) + " fits in no node's " + Resources() + " resources beside the group's other bundles");
    }
    Assign(b, *best);
  }
  return true;
}

bool PlacementPass::StrictPack() {
  const ResourceMap rest = SumToPlace();
  const std::string together = NameBundles(to_place_) + " " + Braced(rest);
  if (!placed_.empty()) {
    const NodeID home = chosen_[placed_.front()];
    for (size_t b : placed_) {
      if (chosen_[b] != home) return Fail("STRICT_PACK " + NameBundles(placed_) + " are placed on more than one node");
    }
    std::optional<size_t> n = FindNode(home);
    if (!n) {
      return Fail("STRICT_PACK " + together + " must join " + NameBundles(placed_) + " on node " + home.Hex() +
                  ", which is not among the nodes");
    }
    if (!ResourcesFit(rest, nodes_[*n].free)) {
      return Fail("node " + home.Hex() + "'s " + Resources() + " resources cannot hold STRICT_PACK " + together +
                  " beside " + NameBundles(placed_));
    }
    for (size_t b : to_place_) Assign(b, *n);
    return true;
  }
  if (!EachBundleFits(AllNodes())) return false;
  for (size_t n : ByUtilisation(AllNodes(), rest)) {
    if (!ResourcesFit(rest, nodes_[n].free)) continue;
    for (size_t b : to_place_) Assign(b, n);
    return true;
  }
  return Fail("no node's " + Resources() + " resources can hold STRICT_PACK " + together);
}

bool PlacementPass::StrictSpread() {
  std::vector<size_t> usable;  // nodes holding no bundle of the group
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].group_bundles == 0) usable.push_back(n);
  }
  const size_t excluded = nodes_.size() - usable.size();
  const std::string needs = "STRICT_SPREAD needs " + CountNodes(to_place_.size()) + " for " + NameBundles(to_place_) +
                            (excluded > 0 ? " besides the " + CountNodes(excluded) + " of its placed bundles" : "");
  if (usable.size() < to_place_.size()) return Fail(needs + ", there are " + std::to_string(usable.size()));
  if (!EachBundleFits(usable, excluded > 0 ? " but those holding the group's other bundles" : "")) return false;
  const std::vector<size_t> order = LargestFirst();
  const std::vector<size_t> node_of = MatchDistinct(order, usable);
  const size_t matched =
      static_cast<size_t>(std::count_if(node_of.begin(), node_of.end(), [](size_t n) { return n != kUnmatched; }));
  if (matched < to_place_.size()) {
    return Fail(needs + ", only " + std::to_string(matched) + " can each hold one of them in their " + Resources() +
                " resources");
  }
  for (size_t k = 0; k < order.size(); ++k) Assign(order[k], node_of[k]);
  return true;
}

std::vector<size_t> PlacementPass::MatchDistinct(const std::vector<size_t>& order,
                                                 const std::vector<size_t>& candidates) const {
  const std::vector<size_t> preference = ByUtilisation(candidates, SumToPlace());
  std::vector<std::vector<size_t>> edges(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    for (size_t n : preference) {
      if (Fits(order[k], n)) edges[k].push_back(n);
    }
  }
  std::vector<size_t> owner(nodes_.size(), kUnmatched);
  size_t matched = 0;
  for (size_t k = 0; k < order.size() && matched < candidates.size(); ++k) {
    std::vector<bool> seen(nodes_.size(), false);
    if (Augment(k, edges, seen, owner)) ++matched;
  }
  std::vector<size_t> node_of(order.size(), kUnmatched);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (owner[n] != kUnmatched) node_of[owner[n]] = n;
  }
  return node_of;
}

bool PlacementPass::EachBundleFits(const std::vector<size_t>& candidates, const std::string& which) {
  for (size_t b : to_place_) {
    bool fits = std::any_of(candidates.begin(), candidates.end(), [&](size_t n) { return Fits(b, n); });
    if (fits) continue;
    return Fail(Describe(b) + " fits in no node's " + Resources() + " resources" + which +
                (nodes_.empty() ? " (there are no nodes)" : ""));
  }
  return true;
}

std::vector<size_t> PlacementPass::ByUtilisation(std::vector<size_t> candidates, const ResourceMap& request) const {
  std::vector<std::pair<int64_t, size_t>> keyed;
  for (size_t n : candidates) keyed.emplace_back(Utilisation(n, request), n);
  // nodes_ is in id order, so the index breaks ties by id.
  std::sort(keyed.begin(), keyed.end());
  for (size_t i = 0; i < keyed.size(); ++i) candidates[i] = keyed[i].second;
  return candidates;
}

int64_t PlacementPass::Utilisation(size_t node, const ResourceMap& request) const {
  return ToSteps(NodeUtilisation(request, *nodes_[node].total, nodes_[node].free));
}

std::vector<size_t> PlacementPass::LargestFirst() const {
  std::vector<size_t> order = to_place_;
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) { return size_[a] > size_[b]; });
  return order;
}

std::vector<size_t> PlacementPass::AllNodes() const {
  std::vector<size_t> all(nodes_.size());
  for (size_t n = 0; n < all.size(); ++n) all[n] = n;
  return all;
}

std::optional<size_t> PlacementPass::FindNode(const NodeID& id) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), id, [](const Node& n, const NodeID& v) { return n.id < v; });
  if (it == nodes_.end() || it->id != id) return std::nullopt;
  return static_cast<size_t>(it - nodes_.begin());
}

ResourceMap PlacementPass::SumToPlace() const {
  ResourceMap sum;
  for (size_t b : to_place_) AddResources(sum, bundles_[b]);
  return sum;
}

void PlacementPass::Assign(size_t bundle, size_t node) {
  chosen_[bundle] = nodes_[node].id;
  SubtractResources(nodes_[node].free, bundles_[bundle]);
  ++nodes_[node].group_bundles;
}

}  // namespace

BundlePlacement PlaceBundles(const std::vector<ResourceMap>& bundles, const std::vector<NodeID>& placed,
                             rpc::PlacementStrategy strategy, const std::vector<BundleNode>& nodes) {
  CHECK_EQ(placed.size(), bundles.size());
  BundlePlacement result;
  PlacementPass now(bundles, placed, nodes, Capacity::kAvailable);
  PlacementPass once_freed(bundles, placed, nodes, Capacity::kTotal);
  if (now.Run(strategy)) {
    result.outcome = BundlePlacement::Outcome::kPlaced;
    result.nodes = now.chosen();
    if ((strategy == rpc::PACK || strategy == rpc::SPREAD) && once_freed.Run(strategy)) {
      const size_t nodes_now = CountDistinct(result.nodes);
      const size_t nodes_then = CountDistinct(once_freed.chosen());
      result.better_once_freed = strategy == rpc::PACK ? nodes_then < nodes_now : nodes_then > nodes_now;
      if (result.better_once_freed) {
        result.reason = std::string(strategy == rpc::PACK ? "PACK" : "SPREAD") + " fits on " + CountNodes(nodes_now) +
                        " now, on " + CountNodes(nodes_then) + " once resources in use are given back";
      }
    }
    return result;
  }
  if (once_freed.Run(strategy)) {
    result.outcome = BundlePlacement::Outcome::kNotNow;
    result.reason = now.reason();
  } else {
    result.outcome = BundlePlacement::Outcome::kInfeasible;
    result.reason = once_freed.reason();
  }
  return result;
}

}  // namespace manta::scheduling
