#include "src/gcs/gcs_grpc_services.h"

#include "src/common/rpc/serve_on_loop.h"

namespace manta::gcs {

using rpc::SendReply;
using rpc::ServeOnLoop;

using rpc::BindHandler;

MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", RegisterNode, nodes_, GcsNodeManager)
MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", UnregisterNode, nodes_, GcsNodeManager)
MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", DrainNode, nodes_, GcsNodeManager)
MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", GetAllNodeInfo, nodes_, GcsNodeManager)
ServerUnaryReactor* NodeInfoService::GetClusterId(CallbackServerContext* c, const rpc::GetClusterIdRequest* q,
                                                  rpc::GetClusterIdReply* r) {
  return ServeOnLoop(loop_, "NodeInfo.GetClusterId", c, q, r,
                     [id = cluster_id_](const rpc::GetClusterIdRequest&, rpc::GetClusterIdReply* reply,
                                        SendReply s) {
                       reply->set_cluster_id(id.Binary());
                       std::move(s)(absl::OkStatus());
                     });
}
MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", ReportResourceUsage, nodes_, GcsNodeManager)

MANTA_SERVE_ON_LOOP(JobInfoService, "JobInfo", GetNextJobID, jobs_, GcsJobManager)
MANTA_SERVE_ON_LOOP(JobInfoService, "JobInfo", AddJob, jobs_, GcsJobManager)
MANTA_SERVE_ON_LOOP(JobInfoService, "JobInfo", MarkJobFinished, jobs_, GcsJobManager)
MANTA_SERVE_ON_LOOP(JobInfoService, "JobInfo", GetAllJobInfo, jobs_, GcsJobManager)

MANTA_SERVE_ON_LOOP(WorkerInfoService, "WorkerInfo", ReportWorkerFailure, workers_, GcsWorkerManager)
MANTA_SERVE_ON_LOOP(WorkerInfoService, "WorkerInfo", ReportWorkerLogs, workers_, GcsWorkerManager)

MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVGet, "KV.Get", kv_, &GcsKVManager::HandleGet)
MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVPut, "KV.Put", kv_, &GcsKVManager::HandlePut)
MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVDel, "KV.Del", kv_, &GcsKVManager::HandleDel)
MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVExists, "KV.Exists", kv_, &GcsKVManager::HandleExists)
MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVKeys, "KV.Keys", kv_, &GcsKVManager::HandleKeys)

MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", RegisterActor, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", CreateActor, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", GetActorInfo, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", GetNamedActorInfo, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", GetAllActorInfo, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", KillActor, actors_, GcsActorManager)
MANTA_SERVE_ON_LOOP(ActorInfoService, "Actor", ReportActorOutOfScope, actors_, GcsActorManager)

MANTA_SERVE_ON_LOOP_AS(PlacementGroupInfoService, CreatePlacementGroup, "PlacementGroup.Create",
                       groups_, &GcsPlacementGroupManager::HandleCreatePlacementGroup)
MANTA_SERVE_ON_LOOP_AS(PlacementGroupInfoService, RemovePlacementGroup, "PlacementGroup.Remove",
                       groups_, &GcsPlacementGroupManager::HandleRemovePlacementGroup)
MANTA_SERVE_ON_LOOP_AS(PlacementGroupInfoService, GetPlacementGroup, "PlacementGroup.Get",
                       groups_, &GcsPlacementGroupManager::HandleGetPlacementGroup)
MANTA_SERVE_ON_LOOP_AS(PlacementGroupInfoService, GetNamedPlacementGroup, "PlacementGroup.GetNamed",
                       groups_, &GcsPlacementGroupManager::HandleGetNamedPlacementGroup)
MANTA_SERVE_ON_LOOP_AS(PlacementGroupInfoService, GetAllPlacementGroup, "PlacementGroup.GetAll",
                       groups_, &GcsPlacementGroupManager::HandleGetAllPlacementGroup)
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
MANTA_SERVE_ON_LOOP_AS(PubSubService, GcsSubscriberPoll, "PubSub.Poll", publisher_, &GcsPublisher::HandlePoll)

MANTA_SERVE_ON_LOOP(TaskInfoService, "TaskInfo", AddTaskEventData, tasks_, GcsTaskManager)
MANTA_SERVE_ON_LOOP(StateService, "State", ListState, state_, GcsStateManager)
MANTA_SERVE_ON_LOOP(StateService, "State", SummarizeState, state_, GcsStateManager)
MANTA_SERVE_ON_LOOP(StateService, "State", GetTaskTimeline, state_, GcsStateManager)

}  // namespace manta::gcs
