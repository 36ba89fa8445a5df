#include "src/gcs/gcs_client.h"

namespace manta::gcs {

using NodeStub = rpc::NodeInfoGcsService::Stub;
using PubSubStub = rpc::InternalPubSubGcsService::Stub;
using JobStub = rpc::JobInfoGcsService::Stub;
using WorkerStub = rpc::WorkerInfoGcsService::Stub;
using ActorStub = rpc::ActorInfoGcsService::Stub;

GrpcGcsClient::GrpcGcsClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options)
    : node_(loop, address, options), pubsub_(loop, address, options), job_(loop, address, options),
      worker_(loop, address, options), actor_(loop, address, options) {}

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

}  // namespace manta::gcs
