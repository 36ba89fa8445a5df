// `manta status`: alive and dead nodes with total and available resources, the
// lease requests waiting at each node that no node can ever satisfy (infeasible),
// and the number of actors in each state.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "protos/gcs.grpc.pb.h"
#include "src/autoscaler/autoscaler_state.h"
#include "src/cli/commands.h"
#include "src/cli/session.h"
#include "src/common/cluster_tls.h"
#include "src/common/config.h"
#include "src/common/id.h"
#include "src/common/json.h"
#include "src/common/node_address.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/scheduling/bundle_resources.h"
#include "src/scheduling/resources.h"

namespace manta::cli {
namespace {

// Status replies list every node and actor: allow large ones.
constexpr int64_t kMaxStatusReplyBytes = 256 << 20;

scheduling::ResourceMap ToMap(const google::protobuf::Map<std::string, double>& m) {
  return scheduling::ResourceMap(m.begin(), m.end());
}

std::string Bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace

absl::StatusOr<std::string> JoinCluster(const ClusterFlags& flags) {
  std::string address = flags.address;
  if (address.empty()) {
    if (const char* env = std::getenv("RAY_ADDRESS"); env != nullptr && *env != '\0' && std::string(env) != "auto") {
      address = env;
    }
  }
  if (address.empty()) {
    auto latest = LatestHeadAddress();
    if (!latest.ok()) return latest.status();
    address = *latest;
  }
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return absl::InvalidArgumentError("--address: " + std::string(hp.status().message()));
  auto config = Config::FromEnvironment();
  if (!config.ok()) return config.status();
  auto mode = ParseClusterTlsMode(config->cluster_tls);
  if (!mode.ok()) return mode.status();
  rpc::Credentials credentials;
  std::string session;
  auto token = FindClusterToken(address, flags.token_file, TempRoot(), &session);
  if (!token.ok()) return token.status();
  credentials.token = std::move(*token);
  if (auto s = AddMemberTls(address, session, *mode, MemberAddresses(hp->host, {}), config->enrollment_timeout_ms,
                            &credentials);
      !s.ok()) {
    return s;
  }
  rpc::SetProcessCredentials(std::move(credentials));
  return address;
}

namespace {

// One call to the GCS with the cluster token and a 10 s deadline.
template <typename Stub, typename Request, typename Reply>
absl::StatusOr<Reply> CallGcs(const std::string& address, std::unique_ptr<Stub> stub,
                              grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Reply*)) {
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Reply reply;
  grpc::Status s = ((*stub).*method)(&ctx, Request(), &reply);
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  return reply;
}

}  // namespace

absl::StatusOr<rpc::GetAllNodeInfoReply> FetchNodes(const std::string& address) {
  return CallGcs(address, rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address, kMaxStatusReplyBytes)),
                 &rpc::NodeInfoGcsService::Stub::GetAllNodeInfo);
}

absl::StatusOr<rpc::GetAllActorInfoReply> FetchActors(const std::string& address) {
  return CallGcs(address, rpc::ActorInfoGcsService::NewStub(rpc::MakeChannel(address, kMaxStatusReplyBytes)),
                 &rpc::ActorInfoGcsService::Stub::GetAllActorInfo);
}

absl::StatusOr<rpc::GetAllPlacementGroupReply> FetchPlacementGroups(const std::string& address) {
  return CallGcs(address, rpc::PlacementGroupInfoGcsService::NewStub(rpc::MakeChannel(address, kMaxStatusReplyBytes)),
                 &rpc::PlacementGroupInfoGcsService::Stub::GetAllPlacementGroup);
}

std::string Hex(const std::string& binary) {
  return BytesToHex(reinterpret_cast<const uint8_t*>(binary.data()), binary.size());
}

std::string PlacementGroupStateName(rpc::PlacementGroupTableData::PlacementGroupState state) {
  return rpc::PlacementGroupTableData::PlacementGroupState_Name(state);
}

const char* ActorStateName(rpc::ActorTableData::ActorState state) {
  switch (state) {
    case rpc::ActorTableData::DEPENDENCIES_UNREADY:
      return "DEPENDENCIES_UNREADY";
    case rpc::ActorTableData::PENDING_CREATION:
      return "PENDING_CREATION";
    case rpc::ActorTableData::ALIVE:
      return "ALIVE";
    case rpc::ActorTableData::RESTARTING:
      return "RESTARTING";
    case rpc::ActorTableData::DEAD:
      return "DEAD";
    default:
      return "UNKNOWN";
  }
}

namespace {

// "2 ALIVE, 1 DEAD", or "none".
std::string CountsLine(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [state, n] : counts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  return out.empty() ? "none" : out;
}

// A node's own resources: committed bundles are shown with their placement groups.
scheduling::ResourceMap WithoutBundleResources(const scheduling::ResourceMap& resources) {
  scheduling::ResourceMap out;
  for (const auto& [name, quantity] : resources) {
    if (!scheduling::GroupOfResource(name).has_value()) out.emplace(name, quantity);
  }
  return out;
}

struct ClusterSnapshot {
  std::string address;
  std::string cluster_hex;
  rpc::GetAllNodeInfoReply nodes;
  std::map<std::string, scheduling::ResourceMap> available;  // by node id (binary)
  std::map<std::string, rpc::ObjectStoreStats> stores;
  std::map<std::string, std::vector<std::string>> infeasible;
  std::map<std::string, int> actor_states;  // actors per state
  std::map<std::string, int> group_states;  // placement groups per state
  std::vector<rpc::PlacementGroupTableData> waiting_groups;  // those waiting to be placed
  // Requests waiting at each node (resource_demands of its report), by node id.
  std::map<std::string, std::vector<rpc::ResourceDemand>> demands;
  // What the autoscaler published (null without one).
  nlohmann::json autoscaler;
};


// The requests waiting at a node, as `manta status --json` lists them.
nlohmann::json DemandJson(const ClusterSnapshot& snap, const std::string& node_id) {
  nlohmann::json out = nlohmann::json::array();
  if (auto d = snap.demands.find(node_id); d != snap.demands.end()) {
    for (const rpc::ResourceDemand& demand : d->second) {
      out.push_back({{"shape", ToMap(demand.shape())},
                     {"queued", demand.num_queued()},
                     {"infeasible", demand.num_infeasible()}});
    }
  }
  return out;
}

std::string DemandLine(const rpc::ResourceDemand& d) {
  std::string line = "{" + scheduling::FormatResources(ToMap(d.shape())) + "}:";
  if (d.num_queued() > 0) line += " " + std::to_string(d.num_queued()) + " waiting for resources";
  if (d.num_infeasible() > 0) line += " " + std::to_string(d.num_infeasible()) + " infeasible";
  return line;
}

// The autoscaler's lines: its nodes by state, the demand not met, what it did last.
void PrintAutoscaler(const nlohmann::json& state) {
  if (!state.is_object()) return;
  const nlohmann::json instances = state.value("instances", nlohmann::json::array());
  const nlohmann::json types = state.value("node_types", nlohmann::json::object());
  const nlohmann::json unmet = state.value("unmet_demand", nlohmann::json::array());
  std::map<std::string, int> by_state;
  for (const auto& i : instances) ++by_state[i.value("state", "?")];
  std::cout << "\nAutoscaler:  " << (by_state.empty() ? "no nodes launched" : CountsLine(by_state)) << "\n";
  for (const auto& [name, t] : types.items()) {
    std::cout << "      type " << name << ": " << t.value("count", 0) << " (min " << t.value("min_workers", 0)
              << ", max " << t.value("max_workers", 0) << ")\n";
  }
  for (const auto& i : instances) {
    std::cout << "      " << i.value("state", "?") << " " << i.value("instance_id", "") << " ("
              << i.value("node_type", "") << ")" << "\n";
  }
  for (const auto& d : unmet) {
    scheduling::ResourceMap shape = d.value("shape", scheduling::ResourceMap());
    std::cout << "      demand {" << scheduling::FormatResources(shape) << "} x " << d.value("count", 0) << ": "
              << d.value("status", "") << "\n";
  }
  for (const auto& e : state.value("events", nlohmann::json::array())) {
    const absl::Time when = absl::FromUnixMillis(e.value("time_ms", int64_t{0}));
    std::cout << "      event: " << absl::FormatTime("%H:%M:%S", when, absl::LocalTimeZone()) << " "
              << e.value("message", "") << "\n";
  }
}

// What `manta status` shows, read from the GCS at `address`.
absl::StatusOr<ClusterSnapshot> TakeSnapshot(const std::string& address) {
  ClusterSnapshot snap;
  snap.address = address;
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address, kMaxStatusReplyBytes));
  rpc::GetAllNodeInfoReply& nodes = snap.nodes;
  rpc::GetClusterIdReply cluster;
  {
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = stub->GetAllNodeInfo(&ctx, rpc::GetAllNodeInfoRequest(), &nodes);
    if (!s.ok()) {
      return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                    (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
    }
  }
  {
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    (void)stub->GetClusterId(&ctx, rpc::GetClusterIdRequest(), &cluster);
  }
  auto& available = snap.available;
  auto& stores = snap.stores;
  auto& infeasible = snap.infeasible;
  for (const auto& u : nodes.resource_usage()) {
    available[u.node_id()] = ToMap(u.resources_available());
    if (u.infeasible_shapes_size() > 0) {
      infeasible[u.node_id()] = std::vector<std::string>(u.infeasible_shapes().begin(), u.infeasible_shapes().end());
    }
    if (u.has_object_store()) stores[u.node_id()] = u.object_store();
    if (u.resource_demands_size() > 0) {
      snap.demands[u.node_id()].assign(u.resource_demands().begin(), u.resource_demands().end());
    }
  }
  // (None published, or the call failed: no Autoscaler section.)
  (void)autoscaler::ReadAutoscalerState(rpc::MakeChannel(address, kMaxStatusReplyBytes), &snap.autoscaler);

  snap.cluster_hex =
      BytesToHex(reinterpret_cast<const uint8_t*>(cluster.cluster_id().data()), cluster.cluster_id().size());
  // Actors per state (a GCS without actors, or an error here, shows none).
  if (auto actors = FetchActors(address); actors.ok()) {
    for (const auto& actor : actors->actors()) ++snap.actor_states[ActorStateName(actor.state())];
  }
  // Placement groups per state, and those waiting to be placed (with why).
  if (auto groups = FetchPlacementGroups(address); groups.ok()) {
    for (const auto& group : groups->placement_groups()) {
      ++snap.group_states[PlacementGroupStateName(group.state())];
      if (group.state() == rpc::PlacementGroupTableData::PENDING ||
          group.state() == rpc::PlacementGroupTableData::RESCHEDULING) {
        snap.waiting_groups.push_back(group);
      }
    }
  }
  return snap;
}

// A node's object store, as `manta status --json` shows it.
nlohmann::json StoreJson(const rpc::ObjectStoreStats& o) {
  return {{"capacity_bytes", o.capacity_bytes()},
          {"used_bytes", o.used_bytes()},
          {"num_objects", o.num_objects()},
          {"num_pinned", o.num_pinned()},
          {"num_spilled", o.num_spilled()},
          {"num_pending_creates", o.num_pending_creates()},
          {"spilled_bytes_current", o.spilled_bytes_current()},
          {"spilled_bytes_total", o.spilled_bytes_total()},
          {"restored_bytes_total", o.restored_bytes_total()},
          {"evicted_bytes_total", o.evicted_bytes_total()},
          {"pulled_bytes_total", o.pulled_bytes_total()},
          {"served_bytes_total", o.served_bytes_total()}};
}

void PrintStatusJson(const ClusterSnapshot& snap) {
  const auto& available = snap.available;
  const auto& stores = snap.stores;
  const auto& infeasible = snap.infeasible;
  nlohmann::json out;
  out["gcs_address"] = snap.address;
  out["cluster_id"] = snap.cluster_hex;
  out["gcs_metrics_export_port"] = snap.nodes.gcs_metrics_export_port();
  out["nodes"] = nlohmann::json::array();
  for (const auto& n : snap.nodes.node_info_list()) {
    nlohmann::json j;
    j["node_id"] = BytesToHex(reinterpret_cast<const uint8_t*>(n.node_id().data()), n.node_id().size());
    j["state"] = n.state() == rpc::NodeInfo::ALIVE ? "ALIVE" : "DEAD";
    j["address"] = RayletAddress(n);
    j["is_head"] = n.is_head_node();
    j["metrics_export_port"] = n.metrics_export_port();
    j["resources_total"] = ToMap(n.resources_total());
    auto a = available.find(n.node_id());
    j["resources_available"] = a != available.end() ? a->second : ToMap(n.resources_total());
    if (n.state() == rpc::NodeInfo::DEAD) {
      j["death_reason"] = n.death_reason();
      j["end_time_ms"] = n.end_time_ms();
    }
    auto inf = infeasible.find(n.node_id());
    j["infeasible_shapes"] = inf != infeasible.end() ? inf->second : std::vector<std::string>();
    if (!n.node_type().empty()) {
      j["node_type"] = n.node_type();
      j["instance_id"] = n.instance_id();
    }
    j["draining"] = n.draining();
    j["pending_demand"] = DemandJson(snap, n.node_id());
    if (auto st = stores.find(n.node_id()); st != stores.end()) j["object_store"] = StoreJson(st->second);
    out["nodes"].push_back(j);
  }
  out["autoscaler"] = snap.autoscaler;
  out["actors"] = snap.actor_states;
  out["placement_groups"] = snap.group_states;
  out["waiting_placement_groups"] = nlohmann::json::array();
  for (const auto& group : snap.waiting_groups) {
    out["waiting_placement_groups"].push_back({{"placement_group_id", Hex(group.placement_group_id())},
                                               {"name", group.name()},
                                               {"state", PlacementGroupStateName(group.state())},
                                               {"infeasible", group.infeasible()},
                                               {"reason", group.pending_reason()}});
  }
  std::cout << DumpJson(out, 2) << std::endl;
}

// One node's lines; its resources are added to the cluster's when it is alive.
void PrintNode(const ClusterSnapshot& snap, const rpc::NodeInfo& n, scheduling::ResourceMap* cluster_total,
               scheduling::ResourceMap* cluster_available) {
  const auto& available = snap.available;
  const auto& stores = snap.stores;
  const auto& infeasible = snap.infeasible;
  bool is_alive = n.state() == rpc::NodeInfo::ALIVE;
  std::string id = BytesToHex(reinterpret_cast<const uint8_t*>(n.node_id().data()), n.node_id().size());
  std::cout << (is_alive ? "ALIVE " : "DEAD  ") << id << "  " << n.node_manager_address() << ":"
            << n.node_manager_port() << (n.is_head_node() ? "  (head)" : "") << (n.draining() ? "  (draining)" : "")
            << "\n";
  scheduling::ResourceMap total = ToMap(n.resources_total());
  if (is_alive) {
    auto a = available.find(n.node_id());
    scheduling::ResourceMap avail = WithoutBundleResources(a != available.end() ? a->second : total);
    std::cout << "      total:     " << scheduling::FormatResources(total) << "\n"
              << "      available: " << scheduling::FormatResources(avail) << "\n";
    if (n.metrics_export_port() > 0) {
      std::cout << "      metrics:   " << MetricsUrl(n.node_manager_address(), n.metrics_export_port()) << "\n";
    }
    if (!n.node_type().empty()) {
      std::cout << "      type:      " << n.node_type() << " (instance " << n.instance_id() << ")\n";
    }
    if (auto d = snap.demands.find(n.node_id()); d != snap.demands.end()) {
      for (const rpc::ResourceDemand& demand : d->second) {
        std::cout << "      pending:   " << DemandLine(demand) << "\n";
      }
    }
    if (auto inf = infeasible.find(n.node_id()); inf != infeasible.end()) {
      for (const std::string& shape : inf->second) {
        std::cout << "      infeasible: {" << shape << "} (lease requests waiting: no node has these resources)\n";
      }
    }
    if (auto st = stores.find(n.node_id()); st != stores.end()) {
      const rpc::ObjectStoreStats& o = st->second;
      std::cout << "      objects:   " << Bytes(o.used_bytes()) << " / " << Bytes(o.capacity_bytes()) << " used, "
                << o.num_objects() << " objects (" << o.num_pinned() << " pinned), spilled "
                << Bytes(o.spilled_bytes_current()) << " in " << o.num_spilled() << " objects (total "
                << Bytes(o.spilled_bytes_total()) << " out, " << Bytes(o.restored_bytes_total())
                << " restored), transfer " << Bytes(o.pulled_bytes_total()) << " in / "
                << Bytes(o.served_bytes_total()) << " out\n";
    }
    for (const auto& [k, v] : total) (*cluster_total)[k] += v;
    for (const auto& [k, v] : avail) (*cluster_available)[k] += v;
  } else {
    std::cout << "      reason:    " << n.death_reason() << "\n";
  }
}

void PrintStatusTable(const ClusterSnapshot& snap) {
  int alive = 0, dead = 0;
  scheduling::ResourceMap cluster_total, cluster_available;
  for (const auto& n : snap.nodes.node_info_list()) (n.state() == rpc::NodeInfo::ALIVE ? alive : dead)++;
  std::cout << "======== Manta cluster status ========\n"
            << "GCS address: " << snap.address << "\n"
            << "Cluster id:  " << snap.cluster_hex << "\n"
            << "GCS metrics: " << MetricsUrl(snap.address.substr(0, snap.address.rfind(':')),
                                             snap.nodes.gcs_metrics_export_port())
            << "\n"
            << "Nodes:       " << alive << " alive, " << dead << " dead\n\n";
  for (const auto& n : snap.nodes.node_info_list()) PrintNode(snap, n, &cluster_total, &cluster_available);
  std::cout << "\nCluster resources (alive nodes)\n"
            << "      total:     " << scheduling::FormatResources(cluster_total) << "\n"
            << "      available: " << scheduling::FormatResources(cluster_available) << "\n";
  std::cout << "\nActors:      " << CountsLine(snap.actor_states) << "\n";
  std::cout << "Placement groups: " << CountsLine(snap.group_states) << "\n";
  for (const auto& group : snap.waiting_groups) {
    std::cout << "      " << PlacementGroupStateName(group.state()) << " " << Hex(group.placement_group_id())
              << (group.name().empty() ? "" : " '" + group.name() + "'") << " ("
              << rpc::PlacementStrategy_Name(group.strategy()) << ", " << group.bundles_size() << " bundles)"
              << (group.infeasible() ? ": infeasible: " : (group.pending_reason().empty() ? "" : ": "))
              << group.pending_reason() << "\n";
  }
  PrintAutoscaler(snap.autoscaler);
  std::cout << std::flush;
}

}  // namespace

int RunStatus(const ClusterFlags& flags, bool json) {
  auto resolved = JoinCluster(flags);
  if (!resolved.ok()) {
    std::cerr << "manta status: " << resolved.status().message() << std::endl;
    return 1;
  }
  auto snap = TakeSnapshot(*resolved);
  if (!snap.ok()) {
    std::cerr << "manta status: " << snap.status().message() << std::endl;
    return 1;
  }
  if (json) {
    PrintStatusJson(*snap);
  } else {
    PrintStatusTable(*snap);
  }
  return 0;
}

}  // namespace manta::cli
