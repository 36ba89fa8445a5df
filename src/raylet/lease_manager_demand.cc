// What waits at the lease manager: counts, infeasible shapes, and the demand the
// autoscaler reads (LeaseManager::Demands).
#include <algorithm>

#include "src/raylet/lease_manager.h"
#include "src/raylet/lease_request.h"

namespace manta::raylet {

size_t LeaseManager::num_queued() const {
  size_t n = 0;
  for (const auto& [shape, queue] : queued_) n += queue.size();
  return n;
}

size_t LeaseManager::num_infeasible() const {
  size_t n = 0;
  for (const auto& [shape, queue] : infeasible_) n += queue.size();
  return n;
}

std::vector<std::string> LeaseManager::InfeasibleShapes() const {
  std::vector<std::string> out;
  for (const auto& [shape, queue] : infeasible_) {
    // Requests waiting for their bundle to be placed are not infeasible.
    if (!queue.empty() && queue.front()->placement_group.IsNil()) out.push_back(scheduling::FormatResources(shape));
  }
  return out;
}

std::vector<LeaseManager::Demand> LeaseManager::Demands() const {
  // An owner keeps a few lease requests in flight per shape and says how many tasks
  // wait behind them (backlog): its demand is the larger of the two.
  struct OwnerDemand {
    int64_t requests = 0;
    int64_t backlog = 0;
  };
  std::map<scheduling::ResourceMap, std::pair<std::map<std::string, OwnerDemand>, std::map<std::string, OwnerDemand>>>
      by_shape;
  auto count = [&by_shape](const std::map<scheduling::ResourceMap, std::deque<RequestPtr>>& waiting, bool queued) {
    for (const auto& [shape, queue] : waiting) {
      for (const RequestPtr& r : queue) {
        if (!r->placement_group.IsNil()) continue;
        auto& owners = queued ? by_shape[shape].first : by_shape[shape].second;
        OwnerDemand& d = owners[r->owner_worker_id.IsNil() ? r->id : r->owner_worker_id.Binary()];
        ++d.requests;
        d.backlog = std::max(d.backlog, r->backlog);
      }
    }
  };
  count(queued_, true);
  count(infeasible_, false);
  auto total = [](const std::map<std::string, OwnerDemand>& owners) {
    int64_t n = 0;
    for (const auto& [owner, d] : owners) n += std::max(d.requests, d.backlog);
    return n;
  };
  std::vector<Demand> out;
  for (const auto& [shape, owners] : by_shape) out.push_back({shape, total(owners.first), total(owners.second)});
  return out;
}

}  // namespace manta::raylet
