#include "src/gcs/gcs_metrics.h"

#include <map>

#include "src/common/metrics/metrics_endpoint.h"
#include "src/gcs/gcs_state_manager.h"

namespace manta::gcs {

namespace {

using metrics::Kind;
using metrics::MakeFamily;
using metrics::Sample;

// Every state named, with 0 for those nobody is in, so that series do not vanish.
std::vector<Sample> ByState(const std::map<std::string, int64_t>& counts, const std::vector<std::string>& states) {
  std::vector<Sample> samples;
  for (const std::string& state : states) {
    auto it = counts.find(state);
    samples.push_back({{state}, static_cast<double>(it == counts.end() ? 0 : it->second)});
  }
  return samples;
}

// Every value of a proto enum, by name.
std::vector<std::string> EnumNames(const google::protobuf::EnumDescriptor* e) {
  std::vector<std::string> names;
  for (int i = 0; i < e->value_count(); ++i) names.push_back(e->value(i)->name());
  return names;
}

metrics::MetricFamily Tasks(GcsTaskManager& tasks) {
  std::vector<Sample> samples;
  for (const auto& [key, n] : tasks.StateCounts()) {
    samples.push_back({{rpc::TaskStatus_Name(key.second), key.first}, static_cast<double>(n)});
  }
  return MakeFamily("ray_tasks",
                    "Task attempts by state and function (FINISHED and FAILED count every attempt that ended since "
                    "the GCS started)",
                    Kind::kGauge, {"State", "Name"}, std::move(samples));
}

metrics::MetricFamily Actors(GcsActorManager& actors) {
  std::map<std::string, int64_t> counts;
  const rpc::GetAllActorInfoReply all = Ask(actors, &GcsActorManager::HandleGetAllActorInfo);
  for (const rpc::ActorTableData& a : all.actors()) {
    ++counts[rpc::ActorTableData::ActorState_Name(a.state())];
  }
  return MakeFamily("ray_actors", "Actors by state", Kind::kGauge, {"State"},
                    ByState(counts, EnumNames(rpc::ActorTableData::ActorState_descriptor())));
}

metrics::MetricFamily PlacementGroups(GcsPlacementGroupManager& groups) {
  std::map<std::string, int64_t> counts;
  const rpc::GetAllPlacementGroupReply all = Ask(groups, &GcsPlacementGroupManager::HandleGetAllPlacementGroup);
  for (const rpc::PlacementGroupTableData& g : all.placement_groups()) {
    ++counts[rpc::PlacementGroupTableData::PlacementGroupState_Name(g.state())];
  }
  return MakeFamily("ray_placement_groups", "Placement groups by state", Kind::kGauge, {"State"},
                    ByState(counts, EnumNames(rpc::PlacementGroupTableData::PlacementGroupState_descriptor())));
}

}  // namespace

std::vector<metrics::MetricFamily> GcsMetricFamilies(GcsTaskManager& tasks, GcsActorManager& actors,
                                                     GcsPlacementGroupManager& groups, GcsNodeManager& nodes) {
  std::vector<metrics::MetricFamily> out;
  out.push_back(Tasks(tasks));
  out.push_back(Actors(actors));
  out.push_back(PlacementGroups(groups));
  std::map<std::string, int64_t> node_counts;
  const rpc::GetAllNodeInfoReply all_nodes = Ask(nodes, &GcsNodeManager::HandleGetAllNodeInfo);
  for (const rpc::NodeInfo& n : all_nodes.node_info_list()) {
    ++node_counts[n.state() == rpc::NodeInfo::ALIVE ? "ALIVE" : "DEAD"];
  }
  out.push_back(MakeFamily("manta_nodes", "Nodes by state", Kind::kGauge, {"State"},
                           ByState(node_counts, {"ALIVE", "DEAD"})));
  out.push_back(MakeFamily("manta_task_events_dropped_total",
                           "Task attempts whose events were dropped: by core workers' buffers (source), counted "
                           "without details past task_events_max_detailed_per_s (summarized), or evicted by the "
                           "GCS's caps (gcs)",
                           Kind::kCounter, {"Stage"},
                           {{{"source"}, static_cast<double>(tasks.dropped_at_source())},
                            {{"summarized"}, static_cast<double>(tasks.summarized())},
                            {{"gcs"}, static_cast<double>(tasks.evicted())}}));
  out.push_back(MakeFamily("manta_task_events_stored", "Task attempts the GCS keeps", Kind::kGauge, {},
                           {{{}, static_cast<double>(tasks.num_attempts())}}));
  return out;
}

}  // namespace manta::gcs
