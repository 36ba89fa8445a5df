// `manta list actors`: every actor the GCS knows, with its id, class, name,
// namespace, state, node, pid, restarts and (when DEAD) why.
#include <iostream>

#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/common/id.h"

namespace manta::cli {
namespace {

std::string Hex(const std::string& binary) {
  return BytesToHex(reinterpret_cast<const uint8_t*>(binary.data()), binary.size());
}

}  // namespace

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
    std::cout << out.dump(2) << std::endl;
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

}  // namespace manta::cli
