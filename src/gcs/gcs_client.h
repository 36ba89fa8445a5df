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
  // Every job with its registered config (raylets start workers as it says).
  virtual void AsyncGetAllJobInfo(Callback<rpc::GetAllJobInfoReply> cb) = 0;
  virtual void AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                        Callback<rpc::ReportWorkerFailureReply> cb) = 0;
};


// The actor calls (ActorInfoGcsService): what a core worker needs to create, find,
// follow and kill actors. A separate interface so fakes of the rest stay small.
class ActorInfoClientInterface {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;
  virtual ~ActorInfoClientInterface() = default;
  virtual void AsyncRegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) = 0;
  virtual void AsyncCreateActor(const rpc::CreateActorRequest& request, Callback<rpc::CreateActorReply> cb) = 0;
  virtual void AsyncGetActorInfo(const std::string& actor_id, Callback<rpc::GetActorInfoReply> cb) = 0;
  virtual void AsyncGetNamedActorInfo(const std::string& name, const std::string& ray_namespace,
                                      Callback<rpc::GetNamedActorInfoReply> cb) = 0;
  virtual void AsyncGetAllActorInfo(Callback<rpc::GetAllActorInfoReply> cb) = 0;
  virtual void AsyncKillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) = 0;
  virtual void AsyncReportActorOutOfScope(const std::string& actor_id,
                                          Callback<rpc::ReportActorOutOfScopeReply> cb) = 0;
};

class GrpcGcsClient : public GcsClientInterface, public ActorInfoClientInterface {
 public:
  template <typename Reply>
  using Callback = GcsClientInterface::Callback<Reply>;
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
  void AsyncGetAllJobInfo(Callback<rpc::GetAllJobInfoReply> cb) override;
  void AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                Callback<rpc::ReportWorkerFailureReply> cb) override;
  void AsyncRegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) override;
  void AsyncCreateActor(const rpc::CreateActorRequest& request, Callback<rpc::CreateActorReply> cb) override;
  void AsyncGetActorInfo(const std::string& actor_id, Callback<rpc::GetActorInfoReply> cb) override;
  void AsyncGetNamedActorInfo(const std::string& name, const std::string& ray_namespace,
                              Callback<rpc::GetNamedActorInfoReply> cb) override;
  void AsyncGetAllActorInfo(Callback<rpc::GetAllActorInfoReply> cb) override;
  void AsyncKillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) override;
  void AsyncReportActorOutOfScope(const std::string& actor_id, Callback<rpc::ReportActorOutOfScopeReply> cb) override;

  // Shutdown: cancels every call in flight (callbacks still run on the loop).
  void CancelAll() {
    node_.CancelAll();
    pubsub_.CancelAll();
    job_.CancelAll();
    worker_.CancelAll();
    actor_.CancelAll();
  }
  int64_t InFlight() const {
    return node_.InFlight() + pubsub_.InFlight() + job_.InFlight() + worker_.InFlight() + actor_.InFlight();
  }

 private:
  rpc::GrpcClient<rpc::NodeInfoGcsService> node_;
  rpc::GrpcClient<rpc::InternalPubSubGcsService> pubsub_;
  rpc::GrpcClient<rpc::JobInfoGcsService> job_;
  rpc::GrpcClient<rpc::WorkerInfoGcsService> worker_;
  rpc::GrpcClient<rpc::ActorInfoGcsService> actor_;
};

}  // namespace manta::gcs
