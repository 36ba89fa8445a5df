#include "src/autoscaler/autoscaler.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace manta::autoscaler {

namespace {

// At most this many units of demand are fitted per update (a backlog of a million
// tasks needs no more nodes than this many would ask for).
constexpr int64_t kMaxUnitsPerUpdate = 20000;
constexpr size_t kEventsKept = 20;

double Size(const scheduling::ResourceMap& r) {
  double s = 0;
  for (const auto& [name, q] : r) {
    // Memory quantities are bytes: weigh them in GiB so that CPUs still count.
    s += (name == "memory" || name == "object_store_memory") ? q / (1 << 30) : q;
  }
  return s;
}

// The resources of `r` a bin must have; zero quantities do not constrain.
bool Fits(const scheduling::ResourceMap& r, const scheduling::ResourceMap& available) {
  return scheduling::ResourcesFit(r, available);
}

bool Idle(const NodeSnapshot& n) {
  if (n.num_leases > 0 || n.primary_objects > 0 || n.spilled_bytes > 0 || !n.demands.empty()) return false;
  // Nothing reserved: every resource (bundles' included) is back.
  for (const auto& [name, q] : n.total) {
    if (name.find("_group_") != std::string::npos) return false;
    auto it = n.available.find(name);
    if (it == n.available.end() || !scheduling::SameQuantity(it->second, q)) return false;
  }
  return true;
}

}  // namespace

std::string InstanceStateName(Autoscaler::InstanceState state) {
  switch (state) {
    case Autoscaler::InstanceState::kLaunching:
      return "launching";
    case Autoscaler::InstanceState::kRunning:
      return "running";
    case Autoscaler::InstanceState::kDraining:
      return "draining";
    case Autoscaler::InstanceState::kTerminating:
      return "terminating";
  }
  return "?";
}

// A node, existing or to be launched, that demand is fitted into.
struct Autoscaler::Bin {
  scheduling::ResourceMap available;
  bool pending = false;  // a node being launched, or to be launched now
  std::set<std::string> groups;              // STRICT_SPREAD groups placed here
};

Autoscaler::Autoscaler(AutoscalerConfig config, ClusterActions& actions, std::function<std::string()> new_instance_id)
    : config_(std::move(config)), actions_(actions), new_instance_id_(std::move(new_instance_id)) {}

void Autoscaler::Update(const ClusterSnapshot& snapshot, int64_t now_ms) {
  last_update_ms_ = now_ms;
  Reconcile(snapshot, now_ms);
  ScaleUp(snapshot, now_ms);
  ScaleDown(snapshot, now_ms);
}

void Autoscaler::Reconcile(const ClusterSnapshot& snapshot, int64_t now_ms) {
  std::set<std::string> joined;
  for (const NodeSnapshot& n : snapshot.nodes) {
    if (n.node_type.empty() || config_.Type(n.node_type) == nullptr) continue;
    auto it = instances_.find(n.instance_id);
    if (it == instances_.end()) {
      // Adopt it: in place of the oldest launch of its type, or as a node of its own.
      auto oldest = instances_.end();
      for (auto i = instances_.begin(); i != instances_.end(); ++i) {
        if (i->second.node_type == n.node_type && i->second.state == InstanceState::kLaunching &&
            (oldest == instances_.end() || i->second.since_ms < oldest->second.since_ms)) {
          oldest = i;
        }
      }
      if (oldest != instances_.end()) instances_.erase(oldest);
      Instance adopted{n.instance_id, n.node_type, InstanceState::kRunning, n.node_id, now_ms, -1};
      it = instances_.emplace(n.instance_id, adopted).first;
    }
    Instance& instance = it->second;
    joined.insert(instance.id);
    instance.node_id = n.node_id;
    if (instance.state == InstanceState::kLaunching) {
      instance.state = InstanceState::kRunning;
      instance.since_ms = now_ms;
      Record(now_ms, "node " + instance.id + " (" + instance.node_type + ") joined");
    }
    if (n.draining && instance.state == InstanceState::kRunning) {
      instance.state = InstanceState::kDraining;  // drained by someone else
      instance.since_ms = now_ms;
    }
  }
  for (auto it = instances_.begin(); it != instances_.end();) {
    Instance& instance = it->second;
    const bool gone = joined.count(instance.id) == 0;
    if (instance.state == InstanceState::kTerminating && gone) {
      it = instances_.erase(it);
      continue;
    }
    if (instance.state == InstanceState::kLaunching &&
        now_ms - instance.since_ms > static_cast<int64_t>(config_.launch_timeout_s * 1000)) {
      TerminateOne(instance, now_ms, "did not join within launch_timeout_s");
    } else if ((instance.state == InstanceState::kRunning || instance.state == InstanceState::kDraining) && gone) {
      TerminateOne(instance, now_ms, "its node left the cluster");
    }
    ++it;
  }
}

void Autoscaler::Record(int64_t now_ms, std::string message) {
  events_.push_back({now_ms, std::move(message)});
  if (events_.size() > kEventsKept) events_.erase(events_.begin());
}

int Autoscaler::CountOfType(const std::string& type) const {
  int n = 0;
  for (const auto& [id, i] : instances_) n += (i.node_type == type && i.state != InstanceState::kTerminating);
  return n;
}

int Autoscaler::CountLaunched() const {
  int n = 0;
  for (const auto& [id, i] : instances_) n += (i.state != InstanceState::kTerminating);
  return n;
}

void Autoscaler::LaunchOne(const NodeTypeConfig& type, int64_t now_ms) {
  std::string id = new_instance_id_();
  instances_[id] = Instance{id, type.name, InstanceState::kLaunching, "", now_ms, -1};
  Record(now_ms, "launching " + id + " (" + type.name + ")");
  LOG(INFO) << "autoscaler: launching node " << id << " of type " << type.name;
  actions_.Launch(type, id);
}

void Autoscaler::TerminateOne(Instance& instance, int64_t now_ms, const std::string& why) {
  instance.state = InstanceState::kTerminating;
  instance.since_ms = now_ms;
  Record(now_ms, "terminating " + instance.id + " (" + instance.node_type + "): " + why);
  LOG(INFO) << "autoscaler: terminating node " << instance.id << ": " << why;
  actions_.Terminate(instance.node_type, instance.id);
}

namespace {

// A unit of demand: a shape and (for STRICT_SPREAD) its group.
struct Unit {
  scheduling::ResourceMap shape;
  std::string spread_group;
};

// Every unit of demand of the snapshot (at most kMaxUnitsPerUpdate of the raylets'),
// largest first.
std::vector<Unit> DemandUnits(const ClusterSnapshot& snapshot) {
  std::vector<Unit> units;
  for (const NodeSnapshot& n : snapshot.nodes) {
    for (const auto& [shape, count] : n.demands) {
      for (int64_t i = 0; i < count && static_cast<int64_t>(units.size()) < kMaxUnitsPerUpdate; ++i) {
        units.push_back({shape, ""});
      }
    }
  }
  for (const PendingGroup& g : snapshot.pending_groups) {
    if (g.strategy == "STRICT_PACK") {
      scheduling::ResourceMap sum;
      for (const auto& b : g.bundles) scheduling::AddResources(sum, b);
      units.push_back({sum, ""});
    } else {
      for (const auto& b : g.bundles) units.push_back({b, g.strategy == "STRICT_SPREAD" ? g.id : ""});
    }
  }
  std::stable_sort(units.begin(), units.end(),
                   [](const Unit& a, const Unit& b) { return Size(a.shape) > Size(b.shape); });
  return units;
}

}  // namespace

const NodeTypeConfig* Autoscaler::NewNodeType(const scheduling::ResourceMap& shape,
                                              const std::map<std::string, int>& to_launch, bool* any_holds) const {
  const NodeTypeConfig* best = nullptr;
  int all = CountLaunched();
  for (const auto& [name, n] : to_launch) all += n;
  for (const NodeTypeConfig& t : config_.node_types) {
    if (!Fits(shape, t.resources)) continue;
    *any_holds = true;
    auto planned = to_launch.find(t.name);
    const int launching_now = planned == to_launch.end() ? 0 : planned->second;
    const int of_type = CountOfType(t.name);
    const int at_once = std::max(5, static_cast<int>(std::ceil(config_.upscaling_speed * std::max(1, of_type))));
    if (of_type + launching_now >= t.max_workers || all >= config_.max_workers || launching_now >= at_once) continue;
    if (best == nullptr || Size(t.resources) < Size(best->resources)) best = &t;
  }
  return best;
}

void Autoscaler::ScaleUp(const ClusterSnapshot& snapshot, int64_t now_ms) {
  const std::vector<Unit> units = DemandUnits(snapshot);
  std::vector<Bin> bins;
  for (const NodeSnapshot& n : snapshot.nodes) {
    if (!n.draining) bins.push_back({n.available, false, {}});
  }
  for (const auto& [id, i] : instances_) {
    if (i.state == InstanceState::kLaunching) bins.push_back({config_.Type(i.node_type)->resources, true, {}});
  }
  std::map<std::string, int> to_launch;
  std::map<std::pair<scheduling::ResourceMap, std::string>, int64_t> unmet;  // (shape, status) -> count
  auto place = [](Bin& bin, const Unit& u) {
    scheduling::SubtractResources(bin.available, u.shape);
    if (!u.spread_group.empty()) bin.groups.insert(u.spread_group);
  };
  for (const Unit& u : units) {
    auto fits = [&u](const Bin& b) { return Fits(u.shape, b.available) && b.groups.count(u.spread_group) == 0; };
    auto bin = std::find_if(bins.begin(), bins.end(), fits);
    if (bin != bins.end()) {
      place(*bin, u);
      if (bin->pending) ++unmet[{u.shape, "launching"}];
      continue;
    }
    // A new node: the smallest type that holds it, within the limits.
    bool any_holds = false;
    const NodeTypeConfig* best = NewNodeType(u.shape, to_launch, &any_holds);
    if (best == nullptr) {
      ++unmet[{u.shape, any_holds ? "at max_workers" : "no node type holds it"}];
      continue;
    }
    ++unmet[{u.shape, "launching"}];
    ++to_launch[best->name];
    bins.push_back({best->resources, true, {}});
    place(bins.back(), u);
  }
  unmet_.clear();
  for (const auto& [key, count] : unmet) unmet_.push_back({key.first, count, key.second});
  for (const NodeTypeConfig& t : config_.node_types) {
    int want = to_launch[t.name];
    const int below_min = t.min_workers - CountOfType(t.name) - want;
    if (below_min > 0) want += below_min;
    for (int i = 0; i < want && CountLaunched() < config_.max_workers; ++i) LaunchOne(t, now_ms);
  }
}

void Autoscaler::ScaleDown(const ClusterSnapshot& snapshot, int64_t now_ms) {
  std::map<std::string, const NodeSnapshot*> by_instance;
  for (const NodeSnapshot& n : snapshot.nodes) {
    if (!n.instance_id.empty()) by_instance[n.instance_id] = &n;
  }
  std::map<std::string, int> kept;  // per type: instances not on their way out
  for (const auto& [id, i] : instances_) {
    kept[i.node_type] += (i.state == InstanceState::kLaunching || i.state == InstanceState::kRunning);
  }
  for (auto& [id, instance] : instances_) {
    auto it = by_instance.find(id);
    if (it == by_instance.end()) continue;
    const NodeSnapshot& node = *it->second;
    if (instance.state == InstanceState::kDraining) {
      // Drained: terminated once the raylet, asked after the drain took hold, holds
      // nothing a lease or an owner needs.
      if (node.draining && node.fresh && node.num_leases == 0 && node.primary_objects == 0 &&
          node.spilled_bytes == 0) {
        TerminateOne(instance, now_ms, "drained");
      }
      continue;
    }
    if (instance.state != InstanceState::kRunning) continue;
    if (!Idle(node)) {
      instance.idle_since_ms = -1;
      continue;
    }
    if (instance.idle_since_ms < 0) instance.idle_since_ms = now_ms;
    if (now_ms - instance.idle_since_ms < static_cast<int64_t>(config_.idle_timeout_s * 1000)) continue;
    const NodeTypeConfig* type = config_.Type(instance.node_type);
    if (type == nullptr || kept[instance.node_type] <= type->min_workers) continue;
    bool wanted = false;
    for (const UnmetDemand& d : unmet_) wanted = wanted || Fits(d.shape, type->resources);
    if (wanted) continue;
    --kept[instance.node_type];
    instance.state = InstanceState::kDraining;
    instance.since_ms = now_ms;
    Record(now_ms, "draining " + id + " (" + instance.node_type + "): idle");
    LOG(INFO) << "autoscaler: draining idle node " << id << " (" << node.node_id << ")";
    actions_.Drain(node.node_id);
  }
}

void Autoscaler::OnLaunchFailed(const std::string& instance_id, const std::string& why) {
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return;
  Record(last_update_ms_, "launch of " + instance_id + " failed: " + why);
  LOG(WARNING) << "autoscaler: launching " << instance_id << " failed: " << why;
  instances_.erase(it);
}

void Autoscaler::TerminateAll() {
  for (auto& [id, instance] : instances_) {
    if (instance.state != InstanceState::kTerminating) TerminateOne(instance, last_update_ms_, "the autoscaler stops");
  }
}

nlohmann::json Autoscaler::State() const {
  nlohmann::json out;
  out["updated_ms"] = last_update_ms_;
  out["instances"] = nlohmann::json::array();
  for (const auto& [id, i] : instances_) {
    out["instances"].push_back({{"instance_id", id},
                                {"node_type", i.node_type},
                                {"state", InstanceStateName(i.state)},
                                {"node_id", i.node_id},
                                {"since_ms", i.since_ms}});
  }
  out["unmet_demand"] = nlohmann::json::array();
  for (const UnmetDemand& d : unmet_) {
    out["unmet_demand"].push_back({{"shape", d.shape}, {"count", d.count}, {"status", d.status}});
  }
  out["node_types"] = nlohmann::json::object();
  for (const NodeTypeConfig& t : config_.node_types) {
    out["node_types"][t.name] = {{"resources", t.resources},
                                 {"min_workers", t.min_workers},
                                 {"max_workers", t.max_workers},
                                 {"count", CountOfType(t.name)}};
  }
  out["max_workers"] = config_.max_workers;
  out["events"] = nlohmann::json::array();
  for (const Event& e : events_) out["events"].push_back({{"time_ms", e.time_ms}, {"message", e.message}});
  return out;
}

}  // namespace manta::autoscaler
