#include "src/raylet/node_manager_worker_grpc_service.h"

#include "src/common/rpc/serve_on_loop.h"

namespace manta::raylet {

MANTA_SERVE_ON_LOOP_AS(NodeManagerWorkerGrpcService, RegisterWorker, "NodeManager.RegisterWorker",
                       pool_, &WorkerPool::HandleRegisterWorker)

MANTA_SERVE_ON_LOOP_AS(NodeManagerWorkerGrpcService, RequestWorkerLease, "NodeManager.RequestWorkerLease",
                       lease_manager_, &LeaseManager::HandleRequestWorkerLease)

MANTA_SERVE_ON_LOOP_AS(NodeManagerWorkerGrpcService, ReturnWorker, "NodeManager.ReturnWorker",
                       lease_manager_, &LeaseManager::HandleReturnWorker)

MANTA_SERVE_ON_LOOP_AS(NodeManagerWorkerGrpcService, CancelWorkerLease, "NodeManager.CancelWorkerLease",
                       lease_manager_, &LeaseManager::HandleCancelWorkerLease)

MANTA_SERVE_ON_LOOP_AS(NodeManagerWorkerGrpcService, NotifyWorkerBlocked, "NodeManager.NotifyWorkerBlocked",
                       lease_manager_, &LeaseManager::HandleNotifyWorkerBlocked)

}  // namespace manta::raylet
