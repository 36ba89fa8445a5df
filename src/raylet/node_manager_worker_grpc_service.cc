#include "src/raylet/node_manager_worker_grpc_service.h"

#include "src/common/rpc/grpc_server.h"

namespace manta::raylet {

grpc::ServerUnaryReactor* NodeManagerWorkerGrpcService::RegisterWorker(grpc::CallbackServerContext* c,
                                                                       const rpc::RegisterWorkerRequest* q,
                                                                       rpc::RegisterWorkerReply* r) {
  return rpc::ServeOnLoop(loop_, "NodeManager.RegisterWorker", c, q, r,
                          rpc::BindHandler(pool_, &WorkerPool::HandleRegisterWorker));
}

grpc::ServerUnaryReactor* NodeManagerWorkerGrpcService::RequestWorkerLease(grpc::CallbackServerContext* c,
                                                                           const rpc::RequestWorkerLeaseRequest* q,
                                                                           rpc::RequestWorkerLeaseReply* r) {
  return rpc::ServeOnLoop(loop_, "NodeManager.RequestWorkerLease", c, q, r,
                          rpc::BindHandler(lease_manager_, &LeaseManager::HandleRequestWorkerLease));
}

grpc::ServerUnaryReactor* NodeManagerWorkerGrpcService::ReturnWorker(grpc::CallbackServerContext* c,
                                                                     const rpc::ReturnWorkerRequest* q,
                                                                     rpc::ReturnWorkerReply* r) {
  return rpc::ServeOnLoop(loop_, "NodeManager.ReturnWorker", c, q, r,
                          rpc::BindHandler(lease_manager_, &LeaseManager::HandleReturnWorker));
}

grpc::ServerUnaryReactor* NodeManagerWorkerGrpcService::CancelWorkerLease(grpc::CallbackServerContext* c,
                                                                          const rpc::CancelWorkerLeaseRequest* q,
                                                                          rpc::CancelWorkerLeaseReply* r) {
  return rpc::ServeOnLoop(loop_, "NodeManager.CancelWorkerLease", c, q, r,
                          rpc::BindHandler(lease_manager_, &LeaseManager::HandleCancelWorkerLease));
}

grpc::ServerUnaryReactor* NodeManagerWorkerGrpcService::NotifyWorkerBlocked(grpc::CallbackServerContext* c,
                                                                            const rpc::NotifyWorkerBlockedRequest* q,
                                                                            rpc::NotifyWorkerBlockedReply* r) {
  return rpc::ServeOnLoop(loop_, "NodeManager.NotifyWorkerBlocked", c, q, r,
                          rpc::BindHandler(lease_manager_, &LeaseManager::HandleNotifyWorkerBlocked));
}

}  // namespace manta::raylet
