// The task attempts the GCS keeps (GetTaskTimeline) as Chrome trace-event JSON, which
// Perfetto and chrome://tracing open (ARCHITECTURE.md §18): each node is a process
// (integer pid, named by an "M" record), each worker or driver on it a thread (its OS
// pid as tid, named too); each execution is an "X" slice named by its function, and
// an arrow (an "s"/"f" flow pair) goes from where it was submitted to where it ran.
// Object pulls, spills and restores are slices on the raylets' tracks. Used by
// `manta timeline` and the dashboard.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "protos/gcs.pb.h"
#include "protos/node_manager.pb.h"

namespace manta {

// The trace events of `b`'s attempts (a JSON array): metadata first, then the events
// by time. With `nodes`, each node's pulls, spills and restores are slices too, on
// tracks of the node named "object transfers" and "spilling" (as many of each as
// overlapping events need).
nlohmann::json TaskTimelineTrace(const rpc::TaskEventBatch& b,
                                 const std::vector<rpc::GetNodeEventsReply>& nodes = {});

// Every live node's events (NodeStateService.GetNodeEvents), asked through the GCS at
// `gcs_address`; a node that does not answer is named in *warnings.
std::vector<rpc::GetNodeEventsReply> FetchNodeEvents(const std::string& gcs_address,
                                                     std::vector<std::string>* warnings);

}  // namespace manta
