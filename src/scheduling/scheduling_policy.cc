#include "src/scheduling/scheduling_policy.h"

#include <algorithm>
#include <vector>

namespace manta::scheduling {

namespace {

double UsedRatio(const std::string& name, const ResourceMap& total, const ResourceMap& available) {
  auto t = total.find(name);
  if (t == total.end() || t->second <= 0) return -1;  // the node has none of it
  auto a = available.find(name);
  double avail = a == available.end() ? 0.0 : a->second;
  return std::max(0.0, (t->second - avail) / t->second);
}

struct Candidate {
  NodeID node_id;
  bool is_local = false;
  double utilisation = 0;
  bool available_now = false;
};

// Least utilised first; on ties the local node (no network hop), then by id so that
// the outcome does not depend on hash-map order.
bool LessLoaded(const Candidate& a, const Candidate& b) {
  if (a.utilisation != b.utilisation) return a.utilisation < b.utilisation;
  if (a.is_local != b.is_local) return a.is_local;
  return a.node_id < b.node_id;
}

SchedulingDecision Decide(SchedulingDecision::Kind kind, const Candidate& c) {
  SchedulingDecision d;
  d.kind = kind;
  d.node_id = c.node_id;
  d.available_now = c.available_now;
  return d;
}

}  // namespace

double NodeUtilisation(const ResourceMap& request, const ResourceMap& total, const ResourceMap& available) {
  double worst = -1;
  for (const auto& [name, amount] : request) worst = std::max(worst, UsedRatio(name, total, available));
  if (worst < 0) worst = UsedRatio("CPU", total, available);
  return std::max(0.0, worst);
}

SchedulingDecision ScheduleLease(const ResourceMap& request, const LocalNodeState& local,
                                 const ClusterResourceView& view, const SchedulingPolicyOptions& options,
                                 const RandomIndexFn& random_index) {
  std::vector<Candidate> feasible;  // every node whose totals can satisfy the request
  size_t num_nodes = 0;             // alive, non-draining nodes, this one included
  bool local_feasible = false;
  if (!local.draining) {
    ++num_nodes;
    if (ResourcesFit(request, *local.total)) {
      local_feasible = true;
      Candidate c{local.node_id, true, NodeUtilisation(request, *local.total, *local.available),
                  ResourcesFit(request, *local.available)};
      if (c.available_now && c.utilisation < options.spread_threshold) {
        return Decide(SchedulingDecision::Kind::kLocal, c);
      }
      feasible.push_back(c);
    }
  }
  for (const auto& [id, node] : view.nodes()) {
    if (id == local.node_id || node.draining) continue;
    ++num_nodes;
    if (!ResourcesFit(request, node.total)) continue;
    feasible.push_back(Candidate{id, false, NodeUtilisation(request, node.total, node.available),
                                 ResourcesFit(request, node.available)});
  }
  if (feasible.empty()) return SchedulingDecision{};

  std::vector<Candidate> now;
  for (const Candidate& c : feasible) {
    if (c.available_now) now.push_back(c);
  }
  if (!now.empty()) {
    std::sort(now.begin(), now.end(), LessLoaded);
    size_t k = std::max<size_t>(1, static_cast<size_t>(options.top_k_fraction * static_cast<double>(num_nodes)));
    k = std::min(k, now.size());
    const Candidate& pick = now[k == 1 ? 0 : std::min(random_index(k), k - 1)];
    return Decide(pick.is_local ? SchedulingDecision::Kind::kLocal : SchedulingDecision::Kind::kRemote, pick);
  }
  // Nobody can run it now: wait here if this node could ever run it, else queue at
  // the least-loaded node that could.
  std::sort(feasible.begin(), feasible.end(), LessLoaded);
  if (local_feasible) {
    for (const Candidate& c : feasible) {
      if (c.is_local) return Decide(SchedulingDecision::Kind::kLocal, c);
    }
  }
  return Decide(SchedulingDecision::Kind::kRemote, feasible.front());
}

}  // namespace manta::scheduling
