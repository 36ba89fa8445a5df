// GcsClientInterface: how raylets, drivers and workers talk to the GCS.
//
// GrpcGcsClient is the real implementation over gRPC. Callbacks run on the caller's
// EventLoop. Reads and idempotent writes retry transient failures (so a GCS restart
// is ridden out); the rest fail fast. Loop thread only.
#pragma once

#include <atomic>
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
  // A core worker's task events since its last batch (ARCHITECTURE.md §18). Sent
  // once: a batch the GCS did not take is lost (the events are not worth a retry
  // storm against a GCS that is down).
  virtual void AsyncAddTaskEventData(rpc::TaskEventBatch batch, Callback<rpc::AddTaskEventDataReply> cb) = 0;
  // Raylets: lines their workers printed, for the drivers. Sent once, never retried.
  virtual void AsyncReportWorkerLogs(rpc::ReportWorkerLogsRequest request, Callback<rpc::ReportWorkerLogsReply> cb) = 0;
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

// The placement group calls (PlacementGroupInfoGcsService, ARCHITECTURE.md §7): what a
// core worker needs to create, remove, wait for and look up placement groups. The
// semantics of each reply are those documented in protos/gcs.proto.
class PlacementGroupInfoClientInterface {
 public:
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;
  virtual ~PlacementGroupInfoClientInterface() = default;
  // INVALID_ARGUMENT for bad bundles or strategy; ALREADY_EXISTS when the name is
  // taken in the namespace. Creating the same id again is OK.
  virtual void AsyncCreatePlacementGroup(const rpc::PlacementGroupTableData& group,
                                         Callback<rpc::CreatePlacementGroupReply> cb) = 0;
  // OK for a group already removed; NOT_FOUND for an id never created.
  virtual void AsyncRemovePlacementGroup(const std::string& group_id, Callback<rpc::RemovePlacementGroupReply> cb) = 0;
  virtual void AsyncGetPlacementGroup(const std::string& group_id, Callback<rpc::GetPlacementGroupReply> cb) = 0;
  virtual void AsyncGetNamedPlacementGroup(const std::string& name, const std::string& ray_namespace,
                                           Callback<rpc::GetNamedPlacementGroupReply> cb) = 0;
  virtual void AsyncGetAllPlacementGroup(Callback<rpc::GetAllPlacementGroupReply> cb) = 0;
  // Answers ready = true once the group is CREATED, ready = false when `timeout_ms`
  // (>= 0) passes first; NOT_FOUND when the group is removed or unknown. The answer
  // comes within about timeout_ms plus one RPC deadline, whatever the GCS does.
  virtual void AsyncWaitPlacementGroupUntilReady(const std::string& group_id, int64_t timeout_ms,
                                                 Callback<rpc::WaitPlacementGroupUntilReadyReply> cb) = 0;
};

// Every GCS service a driver or worker uses, and the calls in flight (shutdown
// cancels them and waits until their callbacks ran). FakeGcsClient
// (fake_gcs_client.h) is the unit tests' one.
class GcsServicesInterface : public GcsClientInterface,
                             public ActorInfoClientInterface,
                             public PlacementGroupInfoClientInterface {
 public:
  virtual void CancelAll() = 0;
  virtual int64_t InFlight() const = 0;
};

// How a placement group wait asks: for at most slice_ms at a time, so that a GCS
// gone silent (no connection reset) is asked again rather than waited for until a
// far deadline; again retry_ms after a transient failure (the GCS restarting).
struct PlacementWaitTimes {
  int64_t slice_ms = 60000;
  int64_t retry_ms = 200;
};

class GrpcGcsClient final : public GcsServicesInterface {
 public:
  template <typename Reply>
  using Callback = GcsClientInterface::Callback<Reply>;
  GrpcGcsClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options,
                PlacementWaitTimes wait_times = {});

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
  void AsyncAddTaskEventData(rpc::TaskEventBatch batch, Callback<rpc::AddTaskEventDataReply> cb) override;
  void AsyncReportWorkerLogs(rpc::ReportWorkerLogsRequest request, Callback<rpc::ReportWorkerLogsReply> cb) override;
  void AsyncRegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) override;
  void AsyncCreateActor(const rpc::CreateActorRequest& request, Callback<rpc::CreateActorReply> cb) override;
  void AsyncGetActorInfo(const std::string& actor_id, Callback<rpc::GetActorInfoReply> cb) override;
  void AsyncGetNamedActorInfo(const std::string& name, const std::string& ray_namespace,
                              Callback<rpc::GetNamedActorInfoReply> cb) override;
  void AsyncGetAllActorInfo(Callback<rpc::GetAllActorInfoReply> cb) override;
  void AsyncKillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) override;
  void AsyncReportActorOutOfScope(const std::string& actor_id, Callback<rpc::ReportActorOutOfScopeReply> cb) override;
  void AsyncCreatePlacementGroup(const rpc::PlacementGroupTableData& group,
                                 Callback<rpc::CreatePlacementGroupReply> cb) override;
  void AsyncRemovePlacementGroup(const std::string& group_id, Callback<rpc::RemovePlacementGroupReply> cb) override;
  void AsyncGetPlacementGroup(const std::string& group_id, Callback<rpc::GetPlacementGroupReply> cb) override;
  void AsyncGetNamedPlacementGroup(const std::string& name, const std::string& ray_namespace,
                                   Callback<rpc::GetNamedPlacementGroupReply> cb) override;
  void AsyncGetAllPlacementGroup(Callback<rpc::GetAllPlacementGroupReply> cb) override;
  // A long-held call, asked again (for what is left of timeout_ms) when it fails
  // transiently, so a GCS restart shorter than the timeout is ridden out; once the
  // timeout passed with the GCS unreachable the answer is ready = false.
  void AsyncWaitPlacementGroupUntilReady(const std::string& group_id, int64_t timeout_ms,
                                         Callback<rpc::WaitPlacementGroupUntilReadyReply> cb) override;

  // Shutdown: cancels every call in flight (callbacks still run on the loop).
  void CancelAll() override {
    waits_->cancelled.store(true);
    node_.CancelAll();
    pubsub_.CancelAll();
    job_.CancelAll();
    worker_.CancelAll();
    actor_.CancelAll();
    placement_group_.CancelAll();
    task_.CancelAll();
  }
  // Zero when no call awaits its callback (a placement group wait counts until its
  // callback ran, also between its attempts).
  int64_t InFlight() const override {
    return node_.InFlight() + pubsub_.InFlight() + job_.InFlight() + worker_.InFlight() + actor_.InFlight() +
           placement_group_.InFlight() + task_.InFlight() + waits_->active.load();
  }

  // Placement group waits not yet answered, and whether CancelAll ran (a wait between
  // attempts then ends CANCELLED instead of asking again). Shared with the waits,
  // which may outlive the client.
  struct WaitTracker {
    std::atomic<int64_t> active{0};
    std::atomic<bool> cancelled{false};
  };

 private:
  EventLoop& loop_;
  const int64_t rpc_deadline_ms_;
  const PlacementWaitTimes wait_times_;
  rpc::GrpcClient<rpc::NodeInfoGcsService> node_;
  rpc::GrpcClient<rpc::InternalPubSubGcsService> pubsub_;
  rpc::GrpcClient<rpc::JobInfoGcsService> job_;
  rpc::GrpcClient<rpc::WorkerInfoGcsService> worker_;
  rpc::GrpcClient<rpc::ActorInfoGcsService> actor_;
  rpc::GrpcClient<rpc::PlacementGroupInfoGcsService> placement_group_;
  rpc::GrpcClient<rpc::TaskInfoGcsService> task_;
  std::shared_ptr<WaitTracker> waits_ = std::make_shared<WaitTracker>();
};

}  // namespace manta::gcs
