// GcsWorkerManager: what workers print (passed on to their drivers), and worker and driver deaths, reported by the raylet that saw the
// process exit and published on GCS_WORKER_DELTA_CHANNEL, so that every raylet
// releases the leases (and drops the lease requests) the dead process owned — an
// owner on one node may hold workers on any other (ARCHITECTURE.md §7).
//
// Nothing is stored: a death matters to the leases alive now, and a raylet that
// missed it while the GCS restarted still frees them when the job ends.
// Loop thread only.
#pragma once

#include <functional>
#include <vector>

#include "protos/gcs.pb.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_publisher.h"

namespace manta::gcs {

class GcsWorkerManager {
 public:
  using DeathListener = std::function<void(const rpc::WorkerDeltaData&)>;
  explicit GcsWorkerManager(GcsPublisher& publisher) : publisher_(publisher) {}

  // Called (on the loop) for every failure accepted, after it was published.
  void AddDeathListener(DeathListener listener) { listeners_.push_back(std::move(listener)); }

  // Publishes the failure. InvalidArgument (nothing published) when the worker, node
  // or job id is malformed.
  void HandleReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                 rpc::ReportWorkerFailureReply* reply, rpc::SendReply send_reply);
  // Publishes each worker's lines on WORKER_LOG_CHANNEL keyed by its job (drivers
  // print them). InvalidArgument (nothing published) for a malformed job id.
  void HandleReportWorkerLogs(const rpc::ReportWorkerLogsRequest& request, rpc::ReportWorkerLogsReply* reply,
                              rpc::SendReply send_reply);

 private:
  GcsPublisher& publisher_;
  std::vector<DeathListener> listeners_;
};

}  // namespace manta::gcs
