#include "src/gcs/gcs_grpc_services.h"

#include "src/common/rpc/grpc_server.h"

namespace manta::gcs {

using rpc::SendReply;
using rpc::ServeOnLoop;

using rpc::BindHandler;

ServerUnaryReactor* NodeInfoService::RegisterNode(CallbackServerContext* c, const rpc::RegisterNodeRequest* q,
                                                  rpc::RegisterNodeReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.RegisterNode", c, q, r, BindHandler(nodes_, &GcsNodeManager::HandleRegisterNode));
}
ServerUnaryReactor* NodeInfoService::UnregisterNode(CallbackServerContext* c, const rpc::UnregisterNodeRequest* q,
                                                    rpc::UnregisterNodeReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.UnregisterNode", c, q, r,
                     BindHandler(nodes_, &GcsNodeManager::HandleUnregisterNode));
}
ServerUnaryReactor* NodeInfoService::DrainNode(CallbackServerContext* c, const rpc::DrainNodeRequest* q,
                                               rpc::DrainNodeReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.DrainNode", c, q, r, BindHandler(nodes_, &GcsNodeManager::HandleDrainNode));
}
ServerUnaryReactor* NodeInfoService::GetAllNodeInfo(CallbackServerContext* c, const rpc::GetAllNodeInfoRequest* q,
                                                    rpc::GetAllNodeInfoReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.GetAllNodeInfo", c, q, r,
                     BindHandler(nodes_, &GcsNodeManager::HandleGetAllNodeInfo));
}
ServerUnaryReactor* NodeInfoService::GetClusterId(CallbackServerContext* c, const rpc::GetClusterIdRequest* q,
                                                  rpc::GetClusterIdReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.GetClusterId", c, q, r,
                     [id = cluster_id_](const rpc::GetClusterIdRequest&, rpc::GetClusterIdReply* reply,
                                        SendReply s) {
                       reply->set_cluster_id(id.Binary());
                       std::move(s)(absl::OkStatus());
                     });
}
ServerUnaryReactor* NodeInfoService::ReportResourceUsage(CallbackServerContext* c,
                                                         const rpc::ReportResourceUsageRequest* q,
                                                         rpc::ReportResourceUsageReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.ReportResourceUsage", c, q, r,
                     BindHandler(nodes_, &GcsNodeManager::HandleReportResourceUsage));
}

ServerUnaryReactor* JobInfoService::GetNextJobID(CallbackServerContext* c, const rpc::GetNextJobIDRequest* q,
                                                 rpc::GetNextJobIDReply* r) {
  return ServeOnLoop(loop_, "JobInfo.GetNextJobID", c, q, r, BindHandler(jobs_, &GcsJobManager::HandleGetNextJobID));
}
ServerUnaryReactor* JobInfoService::AddJob(CallbackServerContext* c, const rpc::AddJobRequest* q,
                                           rpc::AddJobReply* r) {
  return ServeOnLoop(loop_, "JobInfo.AddJob", c, q, r, BindHandler(jobs_, &GcsJobManager::HandleAddJob));
}
ServerUnaryReactor* JobInfoService::MarkJobFinished(CallbackServerContext* c, const rpc::MarkJobFinishedRequest* q,
                                                    rpc::MarkJobFinishedReply* r) {
  return ServeOnLoop(loop_, "JobInfo.MarkJobFinished", c, q, r,
                     BindHandler(jobs_, &GcsJobManager::HandleMarkJobFinished));
}
ServerUnaryReactor* JobInfoService::GetAllJobInfo(CallbackServerContext* c, const rpc::GetAllJobInfoRequest* q,
                                                  rpc::GetAllJobInfoReply* r) {
  return ServeOnLoop(loop_, "JobInfo.GetAllJobInfo", c, q, r, BindHandler(jobs_, &GcsJobManager::HandleGetAllJobInfo));
}

ServerUnaryReactor* WorkerInfoService::ReportWorkerFailure(CallbackServerContext* c,
                                                           const rpc::ReportWorkerFailureRequest* q,
                                                           rpc::ReportWorkerFailureReply* r) {
  return ServeOnLoop(loop_, "WorkerInfo.ReportWorkerFailure", c, q, r,
                     BindHandler(workers_, &GcsWorkerManager::HandleReportWorkerFailure));
}

ServerUnaryReactor* KVService::InternalKVGet(CallbackServerContext* c, const rpc::InternalKVGetRequest* q,
                                             rpc::InternalKVGetReply* r) {
  return ServeOnLoop(loop_, "KV.Get", c, q, r, BindHandler(kv_, &GcsKVManager::HandleGet));
}
ServerUnaryReactor* KVService::InternalKVPut(CallbackServerContext* c, const rpc::InternalKVPutRequest* q,
                                             rpc::InternalKVPutReply* r) {
  return ServeOnLoop(loop_, "KV.Put", c, q, r, BindHandler(kv_, &GcsKVManager::HandlePut));
}
ServerUnaryReactor* KVService::InternalKVDel(CallbackServerContext* c, const rpc::InternalKVDelRequest* q,
                                             rpc::InternalKVDelReply* r) {
  return ServeOnLoop(loop_, "KV.Del", c, q, r, BindHandler(kv_, &GcsKVManager::HandleDel));
}
ServerUnaryReactor* KVService::InternalKVExists(CallbackServerContext* c, const rpc::InternalKVExistsRequest* q,
                                                rpc::InternalKVExistsReply* r) {
  return ServeOnLoop(loop_, "KV.Exists", c, q, r, BindHandler(kv_, &GcsKVManager::HandleExists));
}
ServerUnaryReactor* KVService::InternalKVKeys(CallbackServerContext* c, const rpc::InternalKVKeysRequest* q,
                                              rpc::InternalKVKeysReply* r) {
  return ServeOnLoop(loop_, "KV.Keys", c, q, r, BindHandler(kv_, &GcsKVManager::HandleKeys));
}

ServerUnaryReactor* ActorInfoService::RegisterActor(CallbackServerContext* c, const rpc::RegisterActorRequest* q,
                                                    rpc::RegisterActorReply* r) {
  return ServeOnLoop(loop_, "Actor.RegisterActor", c, q, r, BindHandler(actors_, &GcsActorManager::HandleRegisterActor));
}
ServerUnaryReactor* ActorInfoService::CreateActor(CallbackServerContext* c, const rpc::CreateActorRequest* q,
                                                  rpc::CreateActorReply* r) {
  return ServeOnLoop(loop_, "Actor.CreateActor", c, q, r, BindHandler(actors_, &GcsActorManager::HandleCreateActor));
}
ServerUnaryReactor* ActorInfoService::GetActorInfo(CallbackServerContext* c, const rpc::GetActorInfoRequest* q,
                                                   rpc::GetActorInfoReply* r) {
  return ServeOnLoop(loop_, "Actor.GetActorInfo", c, q, r, BindHandler(actors_, &GcsActorManager::HandleGetActorInfo));
}
ServerUnaryReactor* ActorInfoService::GetNamedActorInfo(CallbackServerContext* c,
                                                        const rpc::GetNamedActorInfoRequest* q,
                                                        rpc::GetNamedActorInfoReply* r) {
  return ServeOnLoop(loop_, "Actor.GetNamedActorInfo", c, q, r,
                     BindHandler(actors_, &GcsActorManager::HandleGetNamedActorInfo));
}
ServerUnaryReactor* ActorInfoService::GetAllActorInfo(CallbackServerContext* c, const rpc::GetAllActorInfoRequest* q,
                                                      rpc::GetAllActorInfoReply* r) {
  return ServeOnLoop(loop_, "Actor.GetAllActorInfo", c, q, r,
                     BindHandler(actors_, &GcsActorManager::HandleGetAllActorInfo));
}
ServerUnaryReactor* ActorInfoService::KillActor(CallbackServerContext* c, const rpc::KillActorRequest* q,
                                                rpc::KillActorReply* r) {
  return ServeOnLoop(loop_, "Actor.KillActor", c, q, r, BindHandler(actors_, &GcsActorManager::HandleKillActor));
}
ServerUnaryReactor* ActorInfoService::ReportActorOutOfScope(CallbackServerContext* c,
                                                            const rpc::ReportActorOutOfScopeRequest* q,
                                                            rpc::ReportActorOutOfScopeReply* r) {
  return ServeOnLoop(loop_, "Actor.ReportActorOutOfScope", c, q, r,
                     BindHandler(actors_, &GcsActorManager::HandleReportActorOutOfScope));
}

ServerUnaryReactor* PlacementGroupInfoService::CreatePlacementGroup(CallbackServerContext* c,
                                                                   const rpc::CreatePlacementGroupRequest* q,
                                                                   rpc::CreatePlacementGroupReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.Create", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleCreatePlacementGroup));
}
ServerUnaryReactor* PlacementGroupInfoService::RemovePlacementGroup(CallbackServerContext* c,
                                                                   const rpc::RemovePlacementGroupRequest* q,
                                                                   rpc::RemovePlacementGroupReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.Remove", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleRemovePlacementGroup));
}
ServerUnaryReactor* PlacementGroupInfoService::GetPlacementGroup(CallbackServerContext* c,
                                                                const rpc::GetPlacementGroupRequest* q,
                                                                rpc::GetPlacementGroupReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.Get", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleGetPlacementGroup));
}
ServerUnaryReactor* PlacementGroupInfoService::GetNamedPlacementGroup(CallbackServerContext* c,
                                                                     const rpc::GetNamedPlacementGroupRequest* q,
                                                                     rpc::GetNamedPlacementGroupReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.GetNamed", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleGetNamedPlacementGroup));
}
ServerUnaryReactor* PlacementGroupInfoService::GetAllPlacementGroup(CallbackServerContext* c,
                                                                   const rpc::GetAllPlacementGroupRequest* q,
                                                                   rpc::GetAllPlacementGroupReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.GetAll", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleGetAllPlacementGroup));
}
ServerUnaryReactor* PlacementGroupInfoService::WaitPlacementGroupUntilReady(
    CallbackServerContext* c, const rpc::WaitPlacementGroupUntilReadyRequest* q,
    rpc::WaitPlacementGroupUntilReadyReply* r) {
  return ServeOnLoop(loop_, "PlacementGroup.Wait", c, q, r,
                     BindHandler(groups_, &GcsPlacementGroupManager::HandleWaitPlacementGroupUntilReady));
}

ServerUnaryReactor* PubSubService::GcsSubscriberCommandBatch(CallbackServerContext* c,
                                                             const rpc::GcsSubscriberCommandBatchRequest* q,
                                                             rpc::GcsSubscriberCommandBatchReply* r) {
  return ServeOnLoop(loop_, "PubSub.CommandBatch", c, q, r,
                     [p = &publisher_](const rpc::GcsSubscriberCommandBatchRequest& req,
                                       rpc::GcsSubscriberCommandBatchReply*, SendReply s) {
                       std::move(s)(p->HandleCommandBatch(req));
                     });
}
ServerUnaryReactor* PubSubService::GcsSubscriberPoll(CallbackServerContext* c, const rpc::GcsSubscriberPollRequest* q,
                                                     rpc::GcsSubscriberPollReply* r) {
  return ServeOnLoop(loop_, "PubSub.Poll", c, q, r, BindHandler(publisher_, &GcsPublisher::HandlePoll));
}

}  // namespace manta::gcs
