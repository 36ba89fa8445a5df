// The task attempts the GCS keeps (GetTaskTimeline) as Chrome trace-event JSON, which
// Perfetto and chrome://tracing open (ARCHITECTURE.md §18): each node is a process
// (integer pid, named by an "M" record), each worker or driver on it a thread (its OS
// pid as tid, named too); each execution is an "X" slice named by its function, and
// an arrow (an "s"/"f" flow pair) goes from where it was submitted to where it ran.
// Used by `manta timeline` and the dashboard.
#pragma once

#include "nlohmann/json.hpp"
#include "protos/gcs.pb.h"

namespace manta {

// The trace events of `b`'s attempts (a JSON array): metadata first, then the events
// by time.
nlohmann::json TaskTimelineTrace(const rpc::TaskEventBatch& b);

}  // namespace manta
