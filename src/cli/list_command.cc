// `manta list actors`: every actor the GCS knows, with its id, class, name,
// namespace, state, node, pid, restarts and (when DEAD) why.
// `manta list placement-groups`: every placement group, with its id, name, namespace,
// strategy, state, bundles (resources and node) and, while not placed, why.
#include <iostream>
#include <map>

#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/common/id.h"
#include "src/common/json.h"
#include "src/scheduling/resources.h"

namespace manta::cli {
int RunListActors(const ClusterFlags& flags, bool json) {
  auto address = JoinCluster(flags);
  if (!address.ok()) {
    std::cerr << "manta list actors: " << address.status().message() << std::endl;
    return 1;
  }
  auto actors = FetchActors(*address);
  if (!actors.ok()) {
    std::cerr << "manta list actors: " << actors.status().message() << std::endl;
    return 1;
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& a : actors->actors()) {
      nlohmann::json j;
      j["actor_id"] = Hex(a.actor_id());
      j["class_name"] = a.class_name();
      j["name"] = a.name();
      j["namespace"] = a.ray_namespace();
      j["state"] = ActorStateName(a.state());
      j["node_id"] = a.node_id().empty() ? "" : Hex(a.node_id());
      j["pid"] = a.pid();
      j["num_restarts"] = a.num_restarts();
      j["max_restarts"] = a.max_restarts();
      j["detached"] = a.detached();
      j["job_id"] = Hex(a.job_id());
      j["death_cause"] = a.state() == rpc::ActorTableData::DEAD ? a.death_cause().message() : "";
      out.push_back(j);
    }
    std::cout << DumpJson(out, 2) << std::endl;
    return 0;
  }
  std::cout << actors->actors_size() << " actor(s)\n";
  for (const auto& a : actors->actors()) {
    std::cout << Hex(a.actor_id()) << "  " << ActorStateName(a.state()) << "  "
              << (a.class_name().empty() ? "?" : a.class_name());
    if (!a.name().empty()) std::cout << "  name=" << a.name() << " namespace=" << a.ray_namespace();
    if (a.detached()) std::cout << "  detached";
    if (a.state() == rpc::ActorTableData::ALIVE) {
      std::cout << "  node=" << Hex(a.node_id()).substr(0, 12) << " pid=" << a.pid();
    }
    std::cout << "  restarts=" << a.num_restarts();
    if (a.state() == rpc::ActorTableData::DEAD) std::cout << "\n      " << a.death_cause().message();
    std::cout << "\n";
  }
  std::cout << std::flush;
  return 0;
}

int RunListPlacementGroups(const ClusterFlags& flags, bool json) {
  auto address = JoinCluster(flags);
  if (!address.ok()) {
    std::cerr << "manta list placement-groups: " << address.status().message() << std::endl;
    return 1;
  }
  auto groups = FetchPlacementGroups(*address);
  if (!groups.ok()) {
    std::cerr << "manta list placement-groups: " << groups.status().message() << std::endl;
    return 1;
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& g : groups->placement_groups()) {
      nlohmann::json j;
      j["placement_group_id"] = Hex(g.placement_group_id());
      j["name"] = g.name();
      j["namespace"] = g.ray_namespace();
      j["strategy"] = rpc::PlacementStrategy_Name(g.strategy());
      j["state"] = PlacementGroupStateName(g.state());
      j["job_id"] = Hex(g.creator_job_id());
      j["infeasible"] = g.infeasible();
      j["pending_reason"] = g.pending_reason();
      j["bundles"] = nlohmann::json::array();
      for (const auto& b : g.bundles()) {
        std::map<std::string, double> resources(b.unit_resources().begin(), b.unit_resources().end());
        j["bundles"].push_back({{"index", b.bundle_index()},
                                {"resources", resources},
                                {"node_id", b.node_id().empty() ? "" : Hex(b.node_id())}});
      }
      out.push_back(j);
    }
    std::cout << DumpJson(out, 2) << std::endl;
    return 0;
  }
  std::cout << groups->placement_groups_size() << " placement group(s)\n";
  for (const auto& g : groups->placement_groups()) {
    std::cout << Hex(g.placement_group_id()) << "  " << PlacementGroupStateName(g.state()) << "  "
              << rpc::PlacementStrategy_Name(g.strategy());
    if (!g.name().empty()) std::cout << "  name=" << g.name() << " namespace=" << g.ray_namespace();
    std::cout << "\n";
    for (const auto& b : g.bundles()) {
      std::cout << "      bundle " << b.bundle_index() << ": {"
                << scheduling::FormatResources(scheduling::ResourceMap(b.unit_resources().begin(),
                                                                       b.unit_resources().end()))
                << "}" << (b.node_id().empty() ? "" : "  node=" + Hex(b.node_id()).substr(0, 12)) << "\n";
    }
    if (!g.pending_reason().empty()) {
      std::cout << "      " << (g.infeasible() ? "infeasible: " : "waiting: ") << g.pending_reason() << "\n";
    }
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace manta::cli
