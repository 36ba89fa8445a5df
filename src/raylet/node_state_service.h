// NodeStateService: a raylet's answer to `manta list workers` (ARCHITECTURE.md §18):
// the node's live workers and drivers and the last ones that went away, from the
// worker pool; and the timeline's raylet tracks: the node's pulls, spills, restores. The GCS's state API asks every live node and merges the rows.
#pragma once

#include <string>

#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/node_event_log.h"
#include "src/common/rpc/grpc_server.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

class NodeStateGrpcService final : public rpc::NodeStateService::CallbackService {
 public:
  NodeStateGrpcService(EventLoop& loop, const WorkerPool& pool, const NodeEventLog& events, NodeID node_id,
                       std::string node_ip)
      : loop_(loop), pool_(pool), events_(events), node_id_(node_id), node_ip_(std::move(node_ip)) {}

  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* c, const rpc::ListWorkersRequest* q,
                                        rpc::ListWorkersReply* r) override;
  grpc::ServerUnaryReactor* GetNodeEvents(grpc::CallbackServerContext* c, const rpc::GetNodeEventsRequest* q,
                                          rpc::GetNodeEventsReply* r) override;
  // Loop thread.
  void HandleListWorkers(const rpc::ListWorkersRequest& request, rpc::ListWorkersReply* reply,
                         rpc::SendReply send_reply);
  // The node's pulls, spills and restores (the timeline's raylet tracks).
  void HandleGetNodeEvents(const rpc::GetNodeEventsRequest& request, rpc::GetNodeEventsReply* reply,
                           rpc::SendReply send_reply);

 private:
  EventLoop& loop_;
  const WorkerPool& pool_;
  const NodeEventLog& events_;
  const NodeID node_id_;
  const std::string node_ip_;
};

}  // namespace manta::raylet
