#include "src/gcs/gcs_health_checker.h"

#include <glog/logging.h>

#include "absl/hash/hash.h"

namespace manta::gcs {

GcsHealthChecker::GcsHealthChecker(CheckFn check, DeadFn on_dead, int64_t failure_threshold,
                                   int64_t initial_delay_ms, std::function<int64_t()> now_ms,
                                   int64_t isolation_grace_ms, int64_t period_ms)
    : check_(std::move(check)),
      on_dead_(std::move(on_dead)),
      failure_threshold_(std::max<int64_t>(1, failure_threshold)),
      initial_delay_ms_(initial_delay_ms),
      isolation_grace_ms_(isolation_grace_ms),
      period_ms_(std::max<int64_t>(0, period_ms)),
      now_ms_(std::move(now_ms)) {}

void GcsHealthChecker::AddNode(const NodeID& node_id, bool remote) {
  NodeState state;
  state.remote = remote;
  state.next_check_ms = now_ms_() + initial_delay_ms_;
  if (period_ms_ > 0) {
    state.next_check_ms += static_cast<int64_t>(absl::HashOf(node_id) % static_cast<uint64_t>(period_ms_));
  }
  state.generation = next_generation_++;
  nodes_[node_id] = state;
}

void GcsHealthChecker::RemoveNode(const NodeID& node_id) { nodes_.erase(node_id); }

void GcsHealthChecker::Tick() {
  int64_t now = now_ms_();
  // Collect first: a check may complete inline and change nodes_.
  std::vector<std::pair<NodeID, uint64_t>> due;
  for (auto& [node_id, state] : nodes_) {
    if (state.in_flight || now < state.next_check_ms) continue;
    state.in_flight = true;
    // The next due time keeps the node's phase and is in the future, however late
    // this Tick came (a stalled loop does not bring a burst of checks after it).
    if (period_ms_ > 0) state.next_check_ms += ((now - state.next_check_ms) / period_ms_ + 1) * period_ms_;
    due.emplace_back(node_id, state.generation);
  }
  for (const auto& [id, generation] : due) {
    check_(id, [this, id, generation](absl::Status status) { OnCheckResult(id, generation, status); });
  }
}

void GcsHealthChecker::OnCheckResult(const NodeID& id, uint64_t generation, const absl::Status& status) {
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second.generation != generation) return;
  NodeState& s = it->second;
  s.in_flight = false;
  if (status.ok()) {
    s.misses = 0;
    if (s.remote && isolation_held_) {
      // The cut around the GCS healed: misses counted while it was isolated say
      // nothing about the nodes, which get a fresh count (their connections may
      // take a moment to come back).
      isolation_held_ = false;
      for (auto& [other_id, other] : nodes_) {
        if (other.remote) other.misses = 0;
      }
    }
    return;
  }
  if (s.misses++ == 0) s.first_miss_ms = now_ms_();
  VLOG(1) << "health check of node " << id.Hex() << " failed (" << s.misses << "/" << failure_threshold_
          << "): " << status.message();
  if (s.misses < failure_threshold_) return;
  if (s.remote && Isolated() && now_ms_() - s.first_miss_ms < isolation_grace_ms_) {
    isolation_held_ = true;
    LOG_EVERY_N(WARNING, 20) << "no node on another host answers health checks: this GCS is more likely cut off "
                                "than they all dead; not declaring node "
                             << id.Hex() << " dead yet";
    return;
  }
  nodes_.erase(it);
  std::string reason =
      "missed " + std::to_string(failure_threshold_) + " health checks; last error: " + std::string(status.message());
  LOG(WARNING) << "node " << id.Hex() << " is DEAD: " << reason;
  on_dead_(id, reason);
}

bool GcsHealthChecker::Isolated() const {
  int64_t remote = 0;
  for (const auto& [id, state] : nodes_) {
    if (!state.remote) continue;
    if (state.misses == 0) return false;
    ++remote;
  }
  return remote >= 2;
}

}  // namespace manta::gcs
