#include "src/gcs/gcs_client.h"

#include <glog/logging.h>

#include <algorithm>

#include "src/common/id.h"
#include "src/common/util.h"

namespace manta::gcs {

using NodeStub = rpc::NodeInfoGcsService::Stub;
using PubSubStub = rpc::InternalPubSubGcsService::Stub;
using JobStub = rpc::JobInfoGcsService::Stub;
using WorkerStub = rpc::WorkerInfoGcsService::Stub;
using ActorStub = rpc::ActorInfoGcsService::Stub;
using PlacementGroupStub = rpc::PlacementGroupInfoGcsService::Stub;
using TaskStub = rpc::TaskInfoGcsService::Stub;

GrpcGcsClient::GrpcGcsClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options,
                             PlacementWaitTimes wait_times)
    : loop_(loop), rpc_deadline_ms_(options.deadline_ms), wait_times_(wait_times), node_(loop, address, options),
      pubsub_(loop, address, options), job_(loop, address, options), worker_(loop, address, options),
      actor_(loop, address, options), placement_group_(loop, address, options),
      task_(loop, address, options) {}

void GrpcGcsClient::AsyncRegisterNode(const rpc::NodeInfo& info, Callback<rpc::RegisterNodeReply> cb) {
  rpc::RegisterNodeRequest request;
  *request.mutable_node_info() = info;
  // Registering the same node id twice is harmless, so retries are safe.
  node_.Call(&NodeStub::async::RegisterNode, "RegisterNode", std::move(request), std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncUnregisterNode(const std::string& node_id, const std::string& reason,
                                        Callback<rpc::UnregisterNodeReply> cb) {
  rpc::UnregisterNodeRequest request;
  request.set_node_id(node_id);
  request.set_reason(reason);
  node_.Call(&NodeStub::async::UnregisterNode, "UnregisterNode", std::move(request), std::move(cb), {2000, false});
}

void GrpcGcsClient::AsyncGetAllNodeInfo(Callback<rpc::GetAllNodeInfoReply> cb) {
  node_.Call(&NodeStub::async::GetAllNodeInfo, "GetAllNodeInfo", rpc::GetAllNodeInfoRequest(), std::move(cb),
             {0, true});
}

void GrpcGcsClient::AsyncGetClusterId(int64_t deadline_ms, Callback<rpc::GetClusterIdReply> cb) {
  node_.Call(&NodeStub::async::GetClusterId, "GetClusterId", rpc::GetClusterIdRequest(), std::move(cb),
             {deadline_ms, false});
}

void GrpcGcsClient::AsyncReportResourceUsage(const rpc::ResourceUsage& usage,
                                             Callback<rpc::ReportResourceUsageReply> cb) {
  rpc::ReportResourceUsageRequest request;
  *request.mutable_usage() = usage;
  node_.Call(&NodeStub::async::ReportResourceUsage, "ReportResourceUsage", std::move(request), std::move(cb),
             {0, false});
}

void GrpcGcsClient::AsyncSubscriberCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request,
                                                Callback<rpc::GcsSubscriberCommandBatchReply> cb) {
  pubsub_.Call(&PubSubStub::async::GcsSubscriberCommandBatch, "GcsSubscriberCommandBatch", request, std::move(cb),
               {0, true});
}

void GrpcGcsClient::AsyncSubscriberPoll(const rpc::GcsSubscriberPollRequest& request, int64_t deadline_ms,
                                        Callback<rpc::GcsSubscriberPollReply> cb) {
  pubsub_.Call(&PubSubStub::async::GcsSubscriberPoll, "GcsSubscriberPoll", request, std::move(cb),
               {deadline_ms, false});
}

// Not idempotent: a retried GetNextJobID could skip an id, which is harmless, but
// a retry after a lost reply would hand out two; callers retry themselves.
void GrpcGcsClient::AsyncGetNextJobID(Callback<rpc::GetNextJobIDReply> cb) {
  job_.Call(&JobStub::async::GetNextJobID, "GetNextJobID", rpc::GetNextJobIDRequest(), std::move(cb), {0, false});
}

// Writing the same job record twice is harmless.
void GrpcGcsClient::AsyncAddJob(const rpc::JobInfo& info, Callback<rpc::AddJobReply> cb) {
  rpc::AddJobRequest request;
  *request.mutable_job_info() = info;
  job_.Call(&JobStub::async::AddJob, "AddJob", std::move(request), std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncMarkJobFinished(const std::string& job_id, Callback<rpc::MarkJobFinishedReply> cb) {
  rpc::MarkJobFinishedRequest request;
  request.set_job_id(job_id);
  job_.Call(&JobStub::async::MarkJobFinished, "MarkJobFinished", std::move(request), std::move(cb), {2000, true});
}

void GrpcGcsClient::AsyncGetAllJobInfo(Callback<rpc::GetAllJobInfoReply> cb) {
  job_.Call(&JobStub::async::GetAllJobInfo, "GetAllJobInfo", rpc::GetAllJobInfoRequest(), std::move(cb), {0, true});
}

// Publishing a death twice is harmless: releasing leases again finds none.
void GrpcGcsClient::AsyncReportWorkerFailure(const rpc::WorkerDeltaData& failure,
                                             Callback<rpc::ReportWorkerFailureReply> cb) {
  rpc::ReportWorkerFailureRequest request;
  *request.mutable_worker_failure() = failure;
  worker_.Call(&WorkerStub::async::ReportWorkerFailure, "ReportWorkerFailure", std::move(request), std::move(cb),
               {0, true});
}

void GrpcGcsClient::AsyncAddTaskEventData(rpc::TaskEventBatch batch, Callback<rpc::AddTaskEventDataReply> cb) {
  rpc::AddTaskEventDataRequest request;
  *request.mutable_batch() = std::move(batch);
  task_.Call(&TaskStub::async::AddTaskEventData, "AddTaskEventData", std::move(request), std::move(cb), {0, false});
}

void GrpcGcsClient::AsyncReportWorkerLogs(rpc::ReportWorkerLogsRequest request,
                                          Callback<rpc::ReportWorkerLogsReply> cb) {
  worker_.Call(&WorkerStub::async::ReportWorkerLogs, "ReportWorkerLogs", std::move(request), std::move(cb),
               {0, false});
}

// Registering an actor twice is answered OK by the GCS (the second is a repeat).
void GrpcGcsClient::AsyncRegisterActor(const rpc::RegisterActorRequest& request,
                                       Callback<rpc::RegisterActorReply> cb) {
  actor_.Call(&ActorStub::async::RegisterActor, "RegisterActor", request, std::move(cb), {0, true});
}

// Repeats are answered OK without effect.
void GrpcGcsClient::AsyncCreateActor(const rpc::CreateActorRequest& request, Callback<rpc::CreateActorReply> cb) {
  actor_.Call(&ActorStub::async::CreateActor, "CreateActor", request, std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncGetActorInfo(const std::string& actor_id, Callback<rpc::GetActorInfoReply> cb) {
  rpc::GetActorInfoRequest request;
  request.set_actor_id(actor_id);
  actor_.Call(&ActorStub::async::GetActorInfo, "GetActorInfo", std::move(request), std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncGetNamedActorInfo(const std::string& name, const std::string& ray_namespace,
                                           Callback<rpc::GetNamedActorInfoReply> cb) {
  rpc::GetNamedActorInfoRequest request;
  request.set_name(name);
  request.set_ray_namespace(ray_namespace);
  actor_.Call(&ActorStub::async::GetNamedActorInfo, "GetNamedActorInfo", std::move(request), std::move(cb),
              {0, true});
}

void GrpcGcsClient::AsyncGetAllActorInfo(Callback<rpc::GetAllActorInfoReply> cb) {
  actor_.Call(&ActorStub::async::GetAllActorInfo, "GetAllActorInfo", rpc::GetAllActorInfoRequest(), std::move(cb),
              {0, true});
}

// Killing twice is harmless (the second finds the actor dead or restarting).
void GrpcGcsClient::AsyncKillActor(const rpc::KillActorRequest& request, Callback<rpc::KillActorReply> cb) {
  actor_.Call(&ActorStub::async::KillActor, "KillActor", request, std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncReportActorOutOfScope(const std::string& actor_id,
                                               Callback<rpc::ReportActorOutOfScopeReply> cb) {
  rpc::ReportActorOutOfScopeRequest request;
  request.set_actor_id(actor_id);
  actor_.Call(&ActorStub::async::ReportActorOutOfScope, "ReportActorOutOfScope", std::move(request), std::move(cb),
              {0, true});
}

// Creating the same group id again is answered OK, so retries are safe.
void GrpcGcsClient::AsyncCreatePlacementGroup(const rpc::PlacementGroupTableData& group,
                                              Callback<rpc::CreatePlacementGroupReply> cb) {
  rpc::CreatePlacementGroupRequest request;
  *request.mutable_placement_group() = group;
  placement_group_.Call(&PlacementGroupStub::async::CreatePlacementGroup, "CreatePlacementGroup", std::move(request),
                        std::move(cb), {0, true});
}

// Removing a removed group is OK, so a retry after a lost reply is too.
void GrpcGcsClient::AsyncRemovePlacementGroup(const std::string& group_id,
                                              Callback<rpc::RemovePlacementGroupReply> cb) {
  rpc::RemovePlacementGroupRequest request;
  request.set_placement_group_id(group_id);
  placement_group_.Call(&PlacementGroupStub::async::RemovePlacementGroup, "RemovePlacementGroup", std::move(request),
                        std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncGetPlacementGroup(const std::string& group_id, Callback<rpc::GetPlacementGroupReply> cb) {
  rpc::GetPlacementGroupRequest request;
  request.set_placement_group_id(group_id);
  placement_group_.Call(&PlacementGroupStub::async::GetPlacementGroup, "GetPlacementGroup", std::move(request),
                        std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncGetNamedPlacementGroup(const std::string& name, const std::string& ray_namespace,
                                                Callback<rpc::GetNamedPlacementGroupReply> cb) {
  rpc::GetNamedPlacementGroupRequest request;
  request.set_name(name);
  request.set_ray_namespace(ray_namespace);
  placement_group_.Call(&PlacementGroupStub::async::GetNamedPlacementGroup, "GetNamedPlacementGroup",
                        std::move(request), std::move(cb), {0, true});
}

void GrpcGcsClient::AsyncGetAllPlacementGroup(Callback<rpc::GetAllPlacementGroupReply> cb) {
  placement_group_.Call(&PlacementGroupStub::async::GetAllPlacementGroup, "GetAllPlacementGroup",
                        rpc::GetAllPlacementGroupRequest(), std::move(cb), {0, true});
}

namespace {

// One placement group wait across its attempts. Holds a copy of the client (which
// shares its channel and calls) so that no attempt refers to the GcsClient itself.
struct PlacementWait {
  rpc::GrpcClient<rpc::PlacementGroupInfoGcsService> client;
  EventLoop* loop;
  int64_t rpc_deadline_ms;
  PlacementWaitTimes times;
  std::shared_ptr<GrpcGcsClient::WaitTracker> tracker;
  std::string group_id;
  int64_t deadline_ms;  // MonotonicMs() when the caller's timeout passes
  GrpcGcsClient::Callback<rpc::WaitPlacementGroupUntilReadyReply> callback;
};

void FinishWait(const std::shared_ptr<PlacementWait>& wait, const absl::Status& status,
                rpc::WaitPlacementGroupUntilReadyReply&& reply) {
  wait->callback(status, std::move(reply));
  wait->tracker->active.fetch_sub(1);
}

void WaitAttempt(std::shared_ptr<PlacementWait> wait) {
  const int64_t left = std::max<int64_t>(wait->deadline_ms - MonotonicMs(), 0);
  rpc::WaitPlacementGroupUntilReadyRequest request;
  request.set_placement_group_id(wait->group_id);
  request.set_timeout_ms(std::min(left, wait->times.slice_ms));
  // The GCS holds the call for timeout_ms: its deadline allows one RPC deadline more.
  rpc::CallOptions options{request.timeout_ms() + wait->rpc_deadline_ms, /*idempotent=*/false};
  wait->client.Call(
      &PlacementGroupStub::async::WaitPlacementGroupUntilReady, "WaitPlacementGroupUntilReady", std::move(request),
      GrpcGcsClient::Callback<rpc::WaitPlacementGroupUntilReadyReply>(
          [wait](const absl::Status& s, rpc::WaitPlacementGroupUntilReadyReply&& reply) {
            const int64_t now = MonotonicMs();
            const bool time_left = now < wait->deadline_ms;
            if (s.ok() && !reply.ready() && time_left) return WaitAttempt(wait);  // a slice ended
            const bool transient = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
            if (!transient) return FinishWait(wait, s, std::move(reply));
            if (time_left && !wait->tracker->cancelled.load()) {
              const int64_t pause = std::min(wait->times.retry_ms, wait->deadline_ms - now);
              wait->loop->PostAfter("GcsClient.RetryPlacementGroupWait", pause, [wait] {
                if (wait->tracker->cancelled.load()) {
                  return FinishWait(wait, absl::CancelledError("the client is shutting down"), {});
                }
                WaitAttempt(wait);
              });
              return;
            }
            // The timeout passed while the GCS could not answer: not known to be created.
            auto id = PlacementGroupID::FromBinaryChecked(wait->group_id);
            LOG(WARNING) << "waiting for placement group " << (id.ok() ? id->Hex() : "(malformed id)")
                         << ": the GCS did not answer before the timeout (" << s << ")";
            FinishWait(wait, absl::OkStatus(), rpc::WaitPlacementGroupUntilReadyReply());
          }),
      options);
}

}  // namespace

void GrpcGcsClient::AsyncWaitPlacementGroupUntilReady(const std::string& group_id, int64_t timeout_ms,
                                                      Callback<rpc::WaitPlacementGroupUntilReadyReply> cb) {
  waits_->active.fetch_add(1);
  auto wait = std::make_shared<PlacementWait>(PlacementWait{placement_group_, &loop_, rpc_deadline_ms_, wait_times_, waits_,
                                                            group_id, MonotonicMs() + std::max<int64_t>(timeout_ms, 0),
                                                            std::move(cb)});
  WaitAttempt(std::move(wait));
}

}  // namespace manta::gcs
