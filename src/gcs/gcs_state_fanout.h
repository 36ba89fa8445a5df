// GcsStateFanout: the state API's rows that live outside the GCS (ARCHITECTURE.md §18).
// Workers: every live node's raylet knows its own (NodeStateService.ListWorkers).
// Objects: every owner knows those it owns (CoreWorkerService.ListObjects), so the
// GCS asks every live node for its drivers and workers, then asks each of them.
//
// All calls of a round go out at once, each with a deadline; the answer is sent when
// every one has answered or failed. Filters are checked here first (a bad one is
// refused before anything is asked), applied by whoever answers, and the rows merged
// under the limit; the reply's warnings name what did not answer. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "protos/core_worker.pb.h"
#include "protos/gcs.pb.h"
#include "protos/node_manager.pb.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/grpc_client.h"
#include "src/gcs/gcs_node_manager.h"

namespace manta::gcs {

class GcsStateFanout {
 public:
  using Done = std::function<void(absl::Status)>;

  GcsStateFanout(EventLoop& loop, GcsNodeManager& nodes, rpc::ClientOptions options)
      : loop_(loop), nodes_(nodes), options_(std::move(options)) {}

  // `limit` is already checked (1..GcsStateManager::kMaxLimit). `reply` must live
  // until `done` runs.
  void ListWorkers(std::vector<rpc::StateFilter> filters, int64_t limit, bool detail, rpc::ListStateReply* reply,
                   Done done);
  void ListObjects(std::vector<rpc::StateFilter> filters, int64_t limit, bool detail, rpc::ListStateReply* reply,
                   Done done);
  // {"total": n, "total_bytes": b, "by_name": {REFERENCE_TYPE: {"type": "OBJECT",
  // "state_counts": {TASK_STATUS: n}, "bytes": b}}}.
  void SummarizeObjects(std::vector<rpc::StateFilter> filters, rpc::SummarizeStateReply* reply, Done done);

 private:
  // What every live node answered, and a warning per node that did not.
  struct NodeWorkers {
    std::vector<rpc::ListWorkersReply> replies;
    std::vector<std::string> warnings;
  };
  void CollectWorkers(std::function<void(NodeWorkers)> done);
  // Every live driver's and worker's ListObjects answer to `request`.
  struct OwnerObjects {
    std::vector<rpc::ListObjectsReply> replies;
    std::vector<std::string> warnings;
  };
  void CollectObjects(rpc::ListObjectsRequest request, std::function<void(OwnerObjects)> done);

  EventLoop& loop_;
  GcsNodeManager& nodes_;
  const rpc::ClientOptions options_;
};

// A worker's row (Ray's field names) as `manta list workers` shows it.
nlohmann::ordered_json WorkerRow(const rpc::WorkerStateInfo& w, const std::string& node_id_hex,
                                 const std::string& node_ip, bool detail);

}  // namespace manta::gcs
