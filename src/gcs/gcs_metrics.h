// The GCS's state as Prometheus metrics (its MetricsEndpoint; ARCHITECTURE.md §18),
// snapshot on the GCS loop: ray_tasks{State,Name} (GcsTaskManager::StateCounts),
// ray_actors{State}, ray_placement_groups{State}, manta_nodes{State}, and the task
// events kept and dropped.
#pragma once

#include <vector>

#include "src/common/metrics/metrics.h"
#include "src/gcs/gcs_actor_manager.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_placement_group_manager.h"
#include "src/gcs/gcs_task_manager.h"

namespace manta::gcs {

std::vector<metrics::MetricFamily> GcsMetricFamilies(GcsTaskManager& tasks, GcsActorManager& actors,
                                                     GcsPlacementGroupManager& groups, GcsNodeManager& nodes);

}  // namespace manta::gcs
