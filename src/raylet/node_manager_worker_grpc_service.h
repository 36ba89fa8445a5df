// NodeManagerWorkerGrpcService: the gRPC front of NodeManagerWorkerService (worker
// registration and leases). Each call is posted to the raylet's loop under its name
// and handed to the WorkerPool (RegisterWorker) or the LeaseManager (the rest).
// gRPC threads only post; `loop`, `pool` and `lease_manager` outlive the server.
#pragma once

#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/raylet/lease_manager.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

class NodeManagerWorkerGrpcService final : public rpc::NodeManagerWorkerService::CallbackService {
 public:
  NodeManagerWorkerGrpcService(EventLoop& loop, WorkerPool& pool, LeaseManager& lease_manager)
      : loop_(loop), pool_(pool), lease_manager_(lease_manager) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* c, const rpc::RegisterWorkerRequest* q,
                                           rpc::RegisterWorkerReply* r) override;
  grpc::ServerUnaryReactor* RequestWorkerLease(grpc::CallbackServerContext* c,
                                               const rpc::RequestWorkerLeaseRequest* q,
                                               rpc::RequestWorkerLeaseReply* r) override;
  grpc::ServerUnaryReactor* ReturnWorker(grpc::CallbackServerContext* c, const rpc::ReturnWorkerRequest* q,
                                         rpc::ReturnWorkerReply* r) override;
  grpc::ServerUnaryReactor* CancelWorkerLease(grpc::CallbackServerContext* c, const rpc::CancelWorkerLeaseRequest* q,
                                              rpc::CancelWorkerLeaseReply* r) override;
  grpc::ServerUnaryReactor* NotifyWorkerBlocked(grpc::CallbackServerContext* c,
                                                const rpc::NotifyWorkerBlockedRequest* q,
                                                rpc::NotifyWorkerBlockedReply* r) override;

 private:
  EventLoop& loop_;
  WorkerPool& pool_;
  LeaseManager& lease_manager_;
};

}  // namespace manta::raylet
