#include "src/raylet/node_state_service.h"

#include "src/common/rpc/serve_on_loop.h"

namespace manta::raylet {

void NodeStateGrpcService::HandleListWorkers(const rpc::ListWorkersRequest&, rpc::ListWorkersReply* reply,
                                             rpc::SendReply send_reply) {
  for (const WorkerPool::WorkerRecord& w : pool_.WorkerRecords()) {
    rpc::WorkerStateInfo* info = reply->add_workers();
    info->set_worker_id(w.worker_id.Binary());
    info->set_job_id(w.job_id.Binary());
    info->set_pid(w.pid);
    info->set_is_driver(w.is_driver);
    info->set_alive(w.alive);
    info->set_state(w.state);
    *info->mutable_address() = w.address;
    info->set_start_time_ms(w.start_unix_ms);
    info->set_end_time_ms(w.end_unix_ms);
    info->set_exit_detail(w.exit_detail);
    info->set_log_file(w.output.out.substr(w.output.out.rfind('/') + 1));
    info->set_err_file(w.output.err.substr(w.output.err.rfind('/') + 1));
  }
  reply->set_node_id(node_id_.Binary());
  reply->set_node_ip(node_ip_);
  std::move(send_reply)(absl::OkStatus());
}

void NodeStateGrpcService::HandleGetNodeEvents(const rpc::GetNodeEventsRequest&, rpc::GetNodeEventsReply* reply,
                                               rpc::SendReply send_reply) {
  int64_t dropped = 0;
  for (rpc::NodeEvent& e : events_.Events(&dropped)) *reply->add_events() = std::move(e);
  reply->set_dropped(dropped);
  reply->set_node_id(node_id_.Binary());
  std::move(send_reply)(absl::OkStatus());
}

MANTA_SERVE_ON_LOOP(NodeStateGrpcService, "NodeState", ListWorkers, *this, NodeStateGrpcService)
MANTA_SERVE_ON_LOOP(NodeStateGrpcService, "NodeState", GetNodeEvents, *this, NodeStateGrpcService)

}  // namespace manta::raylet
