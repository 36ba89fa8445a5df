// The GCS's gRPC service implementations: each RPC is posted to the GCS loop and
// handed to the manager that owns the state. No logic lives here.
#pragma once

#include "protos/gcs.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/gcs/gcs_actor_manager.h"
#include "src/gcs/gcs_job_manager.h"
#include "src/gcs/gcs_kv_manager.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_placement_group_manager.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/gcs_state_manager.h"
#include "src/gcs/gcs_task_manager.h"
#include "src/gcs/gcs_worker_manager.h"

namespace manta::gcs {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

class NodeInfoService final : public rpc::NodeInfoGcsService::CallbackService {
 public:
  NodeInfoService(EventLoop& loop, GcsNodeManager& nodes, const ClusterID& cluster_id)
      : loop_(loop), nodes_(nodes), cluster_id_(cluster_id) {}
  ServerUnaryReactor* RegisterNode(CallbackServerContext* c, const rpc::RegisterNodeRequest* q,
                                   rpc::RegisterNodeReply* r) override;
  ServerUnaryReactor* UnregisterNode(CallbackServerContext* c, const rpc::UnregisterNodeRequest* q,
                                     rpc::UnregisterNodeReply* r) override;
  ServerUnaryReactor* DrainNode(CallbackServerContext* c, const rpc::DrainNodeRequest* q,
                                rpc::DrainNodeReply* r) override;
  ServerUnaryReactor* GetAllNodeInfo(CallbackServerContext* c, const rpc::GetAllNodeInfoRequest* q,
                                     rpc::GetAllNodeInfoReply* r) override;
  ServerUnaryReactor* GetClusterId(CallbackServerContext* c, const rpc::GetClusterIdRequest* q,
                                   rpc::GetClusterIdReply* r) override;
  ServerUnaryReactor* ReportResourceUsage(CallbackServerContext* c, const rpc::ReportResourceUsageRequest* q,
                                          rpc::ReportResourceUsageReply* r) override;

 private:
  EventLoop& loop_;
  GcsNodeManager& nodes_;
  ClusterID cluster_id_;
};

class JobInfoService final : public rpc::JobInfoGcsService::CallbackService {
 public:
  JobInfoService(EventLoop& loop, GcsJobManager& jobs) : loop_(loop), jobs_(jobs) {}
  ServerUnaryReactor* GetNextJobID(CallbackServerContext* c, const rpc::GetNextJobIDRequest* q,
                                   rpc::GetNextJobIDReply* r) override;
  ServerUnaryReactor* AddJob(CallbackServerContext* c, const rpc::AddJobRequest* q, rpc::AddJobReply* r) override;
  ServerUnaryReactor* MarkJobFinished(CallbackServerContext* c, const rpc::MarkJobFinishedRequest* q,
                                      rpc::MarkJobFinishedReply* r) override;
  ServerUnaryReactor* GetAllJobInfo(CallbackServerContext* c, const rpc::GetAllJobInfoRequest* q,
                                    rpc::GetAllJobInfoReply* r) override;

 private:
  EventLoop& loop_;
  GcsJobManager& jobs_;
};

class WorkerInfoService final : public rpc::WorkerInfoGcsService::CallbackService {
 public:
  WorkerInfoService(EventLoop& loop, GcsWorkerManager& workers) : loop_(loop), workers_(workers) {}
  ServerUnaryReactor* ReportWorkerFailure(CallbackServerContext* c, const rpc::ReportWorkerFailureRequest* q,
                                          rpc::ReportWorkerFailureReply* r) override;
  ServerUnaryReactor* ReportWorkerLogs(CallbackServerContext* c, const rpc::ReportWorkerLogsRequest* q,
                                       rpc::ReportWorkerLogsReply* r) override;

 private:
  EventLoop& loop_;
  GcsWorkerManager& workers_;
};

class KVService final : public rpc::InternalKVGcsService::CallbackService {
 public:
  KVService(EventLoop& loop, GcsKVManager& kv) : loop_(loop), kv_(kv) {}
  ServerUnaryReactor* InternalKVGet(CallbackServerContext* c, const rpc::InternalKVGetRequest* q,
                                    rpc::InternalKVGetReply* r) override;
  ServerUnaryReactor* InternalKVPut(CallbackServerContext* c, const rpc::InternalKVPutRequest* q,
                                    rpc::InternalKVPutReply* r) override;
  ServerUnaryReactor* InternalKVDel(CallbackServerContext* c, const rpc::InternalKVDelRequest* q,
                                    rpc::InternalKVDelReply* r) override;
  ServerUnaryReactor* InternalKVExists(CallbackServerContext* c, const rpc::InternalKVExistsRequest* q,
                                       rpc::InternalKVExistsReply* r) override;
  ServerUnaryReactor* InternalKVKeys(CallbackServerContext* c, const rpc::InternalKVKeysRequest* q,
                                     rpc::InternalKVKeysReply* r) override;

 private:
  EventLoop& loop_;
  GcsKVManager& kv_;
};

class PubSubService final : public rpc::InternalPubSubGcsService::CallbackService {
 public:
  PubSubService(EventLoop& loop, GcsPublisher& publisher) : loop_(loop), publisher_(publisher) {}
  ServerUnaryReactor* GcsSubscriberCommandBatch(CallbackServerContext* c,
                                                const rpc::GcsSubscriberCommandBatchRequest* q,
                                                rpc::GcsSubscriberCommandBatchReply* r) override;
  ServerUnaryReactor* GcsSubscriberPoll(CallbackServerContext* c, const rpc::GcsSubscriberPollRequest* q,
                                        rpc::GcsSubscriberPollReply* r) override;

 private:
  EventLoop& loop_;
  GcsPublisher& publisher_;
};

class ActorInfoService final : public rpc::ActorInfoGcsService::CallbackService {
 public:
  ActorInfoService(EventLoop& loop, GcsActorManager& actors) : loop_(loop), actors_(actors) {}
  ServerUnaryReactor* RegisterActor(CallbackServerContext* c, const rpc::RegisterActorRequest* q,
                                    rpc::RegisterActorReply* r) override;
  ServerUnaryReactor* CreateActor(CallbackServerContext* c, const rpc::CreateActorRequest* q,
                                  rpc::CreateActorReply* r) override;
  ServerUnaryReactor* GetActorInfo(CallbackServerContext* c, const rpc::GetActorInfoRequest* q,
                                   rpc::GetActorInfoReply* r) override;
  ServerUnaryReactor* GetNamedActorInfo(CallbackServerContext* c, const rpc::GetNamedActorInfoRequest* q,
                                        rpc::GetNamedActorInfoReply* r) override;
  ServerUnaryReactor* GetAllActorInfo(CallbackServerContext* c, const rpc::GetAllActorInfoRequest* q,
                                      rpc::GetAllActorInfoReply* r) override;
  ServerUnaryReactor* KillActor(CallbackServerContext* c, const rpc::KillActorRequest* q,
                                rpc::KillActorReply* r) override;
  ServerUnaryReactor* ReportActorOutOfScope(CallbackServerContext* c, const rpc::ReportActorOutOfScopeRequest* q,
                                            rpc::ReportActorOutOfScopeReply* r) override;

 private:
  EventLoop& loop_;
  GcsActorManager& actors_;
};

class PlacementGroupInfoService final : public rpc::PlacementGroupInfoGcsService::CallbackService {
 public:
  PlacementGroupInfoService(EventLoop& loop, GcsPlacementGroupManager& groups) : loop_(loop), groups_(groups) {}
  ServerUnaryReactor* CreatePlacementGroup(CallbackServerContext* c, const rpc::CreatePlacementGroupRequest* q,
                                           rpc::CreatePlacementGroupReply* r) override;
  ServerUnaryReactor* RemovePlacementGroup(CallbackServerContext* c, const rpc::RemovePlacementGroupRequest* q,
                                           rpc::RemovePlacementGroupReply* r) override;
  ServerUnaryReactor* GetPlacementGroup(CallbackServerContext* c, const rpc::GetPlacementGroupRequest* q,
                                        rpc::GetPlacementGroupReply* r) override;
  ServerUnaryReactor* GetNamedPlacementGroup(CallbackServerContext* c, const rpc::GetNamedPlacementGroupRequest* q,
                                             rpc::GetNamedPlacementGroupReply* r) override;
  ServerUnaryReactor* GetAllPlacementGroup(CallbackServerContext* c, const rpc::GetAllPlacementGroupRequest* q,
                                           rpc::GetAllPlacementGroupReply* r) override;
  ServerUnaryReactor* WaitPlacementGroupUntilReady(CallbackServerContext* c,
                                                   const rpc::WaitPlacementGroupUntilReadyRequest* q,
                                                   rpc::WaitPlacementGroupUntilReadyReply* r) override;

 private:
  EventLoop& loop_;
  GcsPlacementGroupManager& groups_;
};

class TaskInfoService final : public rpc::TaskInfoGcsService::CallbackService {
 public:
  TaskInfoService(EventLoop& loop, GcsTaskManager& tasks) : loop_(loop), tasks_(tasks) {}
  ServerUnaryReactor* AddTaskEventData(CallbackServerContext* c, const rpc::AddTaskEventDataRequest* q,
                                       rpc::AddTaskEventDataReply* r) override;

 private:
  EventLoop& loop_;
  GcsTaskManager& tasks_;
};

class StateService final : public rpc::StateGcsService::CallbackService {
 public:
  StateService(EventLoop& loop, GcsStateManager& state) : loop_(loop), state_(state) {}
  ServerUnaryReactor* ListState(CallbackServerContext* c, const rpc::ListStateRequest* q,
                                rpc::ListStateReply* r) override;
  ServerUnaryReactor* SummarizeState(CallbackServerContext* c, const rpc::SummarizeStateRequest* q,
                                     rpc::SummarizeStateReply* r) override;
  ServerUnaryReactor* GetTaskTimeline(CallbackServerContext* c, const rpc::GetTaskTimelineRequest* q,
                                      rpc::GetTaskTimelineReply* r) override;

 private:
  EventLoop& loop_;
  GcsStateManager& state_;
};

// All GCS services together, for the server to register.
class GcsGrpcServices {
 public:
  GcsGrpcServices(EventLoop& loop, GcsNodeManager& nodes, GcsJobManager& jobs, GcsWorkerManager& workers,
                  GcsKVManager& kv, GcsActorManager& actors, GcsPlacementGroupManager& groups,
                  GcsPublisher& publisher, const ClusterID& cluster_id, GcsTaskManager& tasks,
                  GcsStateManager& state)
      : node(loop, nodes, cluster_id), job(loop, jobs), worker(loop, workers), kv(loop, kv), actor(loop, actors),
        placement_group(loop, groups), pubsub(loop, publisher), task(loop, tasks), state(loop, state) {}
  NodeInfoService node;
  JobInfoService job;
  WorkerInfoService worker;
  KVService kv;
  ActorInfoService actor;
  PlacementGroupInfoService placement_group;
  PubSubService pubsub;
  TaskInfoService task;
  StateService state;
};

}  // namespace manta::gcs
