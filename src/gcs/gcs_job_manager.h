// GcsJobManager: job id allocation and the job table (driver info, namespace).
//
// Job ids come from a durable counter in the store, so they are unique across GCS
// restarts. Changes are persisted before the reply and published on GCS_JOB_CHANNEL.
// Loop thread only.
#pragma once

#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

inline constexpr char kJobTable[] = "jobs";
inline constexpr char kCounterTable[] = "counters";

class GcsJobManager {
 public:
  GcsJobManager(StoreClientInterface& store, GcsPublisher& publisher, std::function<int64_t()> now_ms);

  void Initialize(const absl::flat_hash_map<std::string, std::string>& rows);
  // Called (on the loop) when a job is marked finished, and at Initialize for every
  // finished job loaded.
  void AddJobFinishedListener(std::function<void(const JobID&)> listener) {
    finished_listeners_.push_back(std::move(listener));
  }

  void HandleGetNextJobID(const rpc::GetNextJobIDRequest& request, rpc::GetNextJobIDReply* reply,
                          rpc::SendReply send_reply);
  void HandleAddJob(const rpc::AddJobRequest& request, rpc::AddJobReply* reply, rpc::SendReply send_reply);
  void HandleMarkJobFinished(const rpc::MarkJobFinishedRequest& request, rpc::MarkJobFinishedReply* reply,
                             rpc::SendReply send_reply);
  void HandleGetAllJobInfo(const rpc::GetAllJobInfoRequest& request, rpc::GetAllJobInfoReply* reply,
                           rpc::SendReply send_reply);

 private:
  void PersistAndPublish(const rpc::JobInfo& info, rpc::SendReply send_reply);

  StoreClientInterface& store_;
  GcsPublisher& publisher_;
  std::function<int64_t()> now_ms_;
  absl::flat_hash_map<JobID, rpc::JobInfo> jobs_;
  std::vector<std::function<void(const JobID&)>> finished_listeners_;
};

}  // namespace manta::gcs
