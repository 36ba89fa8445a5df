// GcsClientInterface: how raylets, drivers and workers talk to the GCS.
//
// GrpcGcsClient is the real implementation over gRPC. Callbacks run on the caller's
// EventLoop. Reads and idempotent writes retry transient failures (so a GCS restart
// is ridden out); the rest fail fast. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "protos/gcs.grpc.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/grpc_client.h"

namespace manta::gcs {

class GcsClientInterface {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;
  virtual ~GcsClientInterface() = default;

  virtual void AsyncRegisterNode(const rpc::NodeInfo& info, Callback<rpc::RegisterNodeReply> cb) = 0;
  virtual void AsyncUnregisterNode(const std::string& node_id, const std::string& reason,
                                   Callback<rpc::UnregisterNodeReply> cb) = 0;
  virtual void AsyncGetAllNodeInfo(Callback<rpc::GetAllNodeInfoReply> cb) = 0;
  virtual void AsyncGetClusterId(int64_t deadline_ms, Callback<rpc::GetClusterIdReply> cb) = 0;
  virtual void AsyncReportResourceUsage(const rpc::ResourceUsage& usage,
                                        Callback<rpc::ReportResourceUsageReply> cb) = 0;
  virtual void AsyncSubscriberCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request,
                                           Callback<rpc::GcsSubscriberCommandBatchReply> cb) = 0;
  virtual void AsyncSubscriberPoll(const rpc::GcsSubscriberPollRequest& request, int64_t deadline_ms,
                                   Callback<rpc::GcsSubscriberPollReply> cb) = 0;
  // Jobs: a driver takes the next job id, then records its job; it marks the job
  // finished at shutdown.
  virtual void AsyncGetNextJobID(Callback<rpc::GetNextJobIDReply> cb) = 0;
  virtual void AsyncAddJob(const rpc::JobInfo& info, Callback<rpc::AddJobReply> cb) = 0;
  virtual void AsyncMarkJobFinished(const std::string& job_id, Callback<rpc::MarkJobFinishedReply> cb) = 0;
  virtual void AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                        Callback<rpc::ReportWorkerFailureReply> cb) = 0;
};

class GrpcGcsClient : public GcsClientInterface {
 public:
  GrpcGcsClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options);

  void AsyncRegisterNode(const rpc::NodeInfo& info, Callback<rpc::RegisterNodeReply> cb) override;
  void AsyncUnregisterNode(const std::string& node_id, const std::string& reason,
                           Callback<rpc::UnregisterNodeReply> cb) override;
  void AsyncGetAllNodeInfo(Callback<rpc::GetAllNodeInfoReply> cb) override;
  void AsyncGetClusterId(int64_t deadline_ms, Callback<rpc::GetClusterIdReply> cb) override;
  void AsyncReportResourceUsage(const rpc::ResourceUsage& usage, Callback<rpc::ReportResourceUsageReply> cb) override;
  void AsyncSubscriberCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request,
                                   Callback<rpc::GcsSubscriberCommandBatchReply> cb) override;
  void AsyncSubscriberPoll(const rpc::GcsSubscriberPollRequest& request, int64_t deadline_ms,
                           Callback<rpc::GcsSubscriberPollReply> cb) override;
  void AsyncGetNextJobID(Callback<rpc::GetNextJobIDReply> cb) override;
  void AsyncAddJob(const rpc::JobInfo& info, Callback<rpc::AddJobReply> cb) override;
  void AsyncMarkJobFinished(const std::string& job_id, Callback<rpc::MarkJobFinishedReply> cb) override;
  void AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                Callback<rpc::ReportWorkerFailureReply> cb) override;

  // Shutdown: cancels every call in flight (callbacks still run on the loop).
  void CancelAll() {
    node_.CancelAll();
    pubsub_.CancelAll();
    job_.CancelAll();
    worker_.CancelAll();
  }
  int64_t InFlight() const { return node_.InFlight() + pubsub_.InFlight() + job_.InFlight() + worker_.InFlight(); }

 private:
  rpc::GrpcClient<rpc::NodeInfoGcsService> node_;
  rpc::GrpcClient<rpc::InternalPubSubGcsService> pubsub_;
  rpc::GrpcClient<rpc::JobInfoGcsService> job_;
  rpc::GrpcClient<rpc::WorkerInfoGcsService> worker_;
};

}  // namespace manta::gcs
