// FakeGcsClient: a scriptable GcsServicesInterface for unit tests (of the raylet's
// node manager and of the core worker). Each method either of them calls queues the
// call (CallQueue: requests in arrival order); the test answers them with ReplyNext,
// and the callback runs on the loop it names, as a real client's does. Methods
// neither calls answer UNIMPLEMENTED at once. Thread-safe: the queues take a lock.
#pragma once

#include <glog/logging.h>

#include <deque>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

#include "src/common/event_loop.h"
#include "src/common/rpc/fake_call_queue.h"
#include "src/gcs/gcs_client.h"

namespace manta::gcs {

// The calls of one GCS method: requests in arrival order, answered by the test.
template <typename Request, typename Reply>
using CallQueue = rpc::FakeCallQueue<Request, Reply>;

struct UnregisterRequest {
  std::string node_id;
  std::string reason;
};
struct NoRequest {};

struct NamedRequest {
  std::string name;
  std::string ray_namespace;
};

class FakeGcsClient final : public GcsServicesInterface {
 public:
  template <typename Reply>
  using Callback = GcsClientInterface::Callback<Reply>;
  void AsyncRegisterNode(const rpc::NodeInfo& info, Callback<rpc::RegisterNodeReply> cb) override {
    register_node.Add(info, std::move(cb));
  }
  void AsyncUnregisterNode(const std::string& node_id, const std::string& reason,
                           Callback<rpc::UnregisterNodeReply> cb) override {
    unregister_node.Add({node_id, reason}, std::move(cb));
  }
  void AsyncGetAllNodeInfo(Callback<rpc::GetAllNodeInfoReply> cb) override {
    get_all_node_info.Add({}, std::move(cb));
  }
  void AsyncGetClusterId(int64_t deadline_ms, Callback<rpc::GetClusterIdReply> cb) override {
    get_cluster_id.Add(deadline_ms, std::move(cb));
  }
  void AsyncReportResourceUsage(const rpc::ResourceUsage& usage,
                                Callback<rpc::ReportResourceUsageReply> cb) override {
    report_usage.Add(usage, std::move(cb));
  }
  void AsyncSubscriberCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request,
                                   Callback<rpc::GcsSubscriberCommandBatchReply> cb) override {
    subscribe.Add(request, std::move(cb));
  }
  void AsyncSubscriberPoll(const rpc::GcsSubscriberPollRequest& request, int64_t deadline_ms,
                           Callback<rpc::GcsSubscriberPollReply> cb) override {
    poll.Add(request, std::move(cb));
  }
  void AsyncGetNextJobID(Callback<rpc::GetNextJobIDReply> cb) override { next_job_id.Add({}, std::move(cb)); }
  void AsyncAddJob(const rpc::JobInfo& info, Callback<rpc::AddJobReply> cb) override {
    add_job.Add(info, std::move(cb));
  }
  void AsyncMarkJobFinished(const std::string& job_id, Callback<rpc::MarkJobFinishedReply> cb) override {
    mark_job_finished.Add(job_id, std::move(cb));
  }
  void AsyncGetAllJobInfo(Callback<rpc::GetAllJobInfoReply> cb) override { get_all_jobs.Add({}, std::move(cb)); }
  void AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                Callback<rpc::ReportWorkerFailureReply> cb) override {
    worker_failures.Add(failure, std::move(cb));
  }
  void AsyncAddTaskEventData(rpc::TaskEventBatch batch, Callback<rpc::AddTaskEventDataReply> cb) override {
    task_events.Add(std::move(batch), std::move(cb));
  }
  void AsyncReportWorkerLogs(rpc::ReportWorkerLogsRequest request, Callback<rpc::ReportWorkerLogsReply> cb) override {
    worker_logs.Add(std::move(request), std::move(cb));
  }

  // Actors: what a core worker asks.
  void AsyncRegisterActor(const rpc::RegisterActorRequest& request, Callback<rpc::RegisterActorReply> cb) override {
    register_actor.Add(request, std::move(cb));
  }
  void AsyncCreateActor(const rpc::CreateActorRequest& request, Callback<rpc::CreateActorReply> cb) override {
    create_actor.Add(request, std::move(cb));
  }
  void AsyncGetActorInfo(const std::string& actor_id, Callback<rpc::GetActorInfoReply> cb) override {
    get_actor_info.Add(actor_id, std::move(cb));
  }
  void AsyncGetNamedActorInfo(const std::string& name, const std::string& ray_namespace,
                              Callback<rpc::GetNamedActorInfoReply> cb) override {
    get_named_actor.Add({name, ray_namespace}, std::move(cb));
  }
  void AsyncGetAllActorInfo(Callback<rpc::GetAllActorInfoReply> cb) override {
    cb(absl::UnimplementedError("not used by the core worker"), {});
  }
  void AsyncKillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) override {
    kill_actor.Add(request, std::move(cb));
  }
  void AsyncReportActorOutOfScope(const std::string& actor_id,
                                  Callback<rpc::ReportActorOutOfScopeReply> cb) override {
    actor_out_of_scope.Add(actor_id, std::move(cb));
  }

  // Placement groups: lookups are queued; the node manager makes no other call.
  void AsyncCreatePlacementGroup(const rpc::PlacementGroupTableData&,
                                 Callback<rpc::CreatePlacementGroupReply> cb) override {
    cb(absl::UnimplementedError("not faked"), {});
  }
  void AsyncRemovePlacementGroup(const std::string&, Callback<rpc::RemovePlacementGroupReply> cb) override {
    cb(absl::UnimplementedError("not faked"), {});
  }
  void AsyncGetPlacementGroup(const std::string& group_id, Callback<rpc::GetPlacementGroupReply> cb) override {
    get_placement_group.Add(group_id, std::move(cb));
  }
  void AsyncGetNamedPlacementGroup(const std::string&, const std::string&,
                                   Callback<rpc::GetNamedPlacementGroupReply> cb) override {
    cb(absl::UnimplementedError("not faked"), {});
  }
  void AsyncGetAllPlacementGroup(Callback<rpc::GetAllPlacementGroupReply> cb) override {
    cb(absl::UnimplementedError("not faked"), {});
  }
  void AsyncWaitPlacementGroupUntilReady(const std::string&, int64_t,
                                         Callback<rpc::WaitPlacementGroupUntilReadyReply> cb) override {
    cb(absl::UnimplementedError("not faked"), {});
  }

  // Nothing is in flight in the fake's sense: pending calls are the test's to answer.
  void CancelAll() override {}
  int64_t InFlight() const override { return 0; }

  CallQueue<rpc::NodeInfo, rpc::RegisterNodeReply> register_node;
  CallQueue<UnregisterRequest, rpc::UnregisterNodeReply> unregister_node;
  CallQueue<NoRequest, rpc::GetAllNodeInfoReply> get_all_node_info;
  CallQueue<int64_t, rpc::GetClusterIdReply> get_cluster_id;
  CallQueue<rpc::ResourceUsage, rpc::ReportResourceUsageReply> report_usage;
  CallQueue<rpc::GcsSubscriberCommandBatchRequest, rpc::GcsSubscriberCommandBatchReply> subscribe;
  CallQueue<rpc::GcsSubscriberPollRequest, rpc::GcsSubscriberPollReply> poll;
  CallQueue<std::string, rpc::MarkJobFinishedReply> mark_job_finished;
  CallQueue<NoRequest, rpc::GetAllJobInfoReply> get_all_jobs;
  CallQueue<rpc::WorkerDeltaData, rpc::ReportWorkerFailureReply> worker_failures;
  CallQueue<rpc::TaskEventBatch, rpc::AddTaskEventDataReply> task_events;
  CallQueue<rpc::ReportWorkerLogsRequest, rpc::ReportWorkerLogsReply> worker_logs;
  CallQueue<std::string, rpc::GetPlacementGroupReply> get_placement_group;
  CallQueue<NoRequest, rpc::GetNextJobIDReply> next_job_id;
  CallQueue<rpc::JobInfo, rpc::AddJobReply> add_job;
  CallQueue<rpc::RegisterActorRequest, rpc::RegisterActorReply> register_actor;
  CallQueue<rpc::CreateActorRequest, rpc::CreateActorReply> create_actor;
  CallQueue<std::string, rpc::GetActorInfoReply> get_actor_info;
  CallQueue<NamedRequest, rpc::GetNamedActorInfoReply> get_named_actor;
  CallQueue<rpc::KillActorRequest, rpc::KillActorReply> kill_actor;
  CallQueue<std::string, rpc::ReportActorOutOfScopeReply> actor_out_of_scope;
};

}  // namespace manta::gcs
