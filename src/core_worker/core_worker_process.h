// CoreWorkerProcess: the composition root of a driver's or worker's core worker
// (ARCHITECTURE.md §1, §4).
//
// Start() builds the parts in order and hands them to a CoreWorker:
//   1. the event loop and its thread, and the clients of the GCS, the raylets, other
//      core workers and the task channels (rpc_clients.h, task_channel.h);
//   2. a driver finds its node's raylet through the GCS;
//   3. the CoreWorkerService's gRPC server and, for a worker, the task channel's
//      server, both bound before anyone learns their ports;
//   4. a driver's new job id from the GCS; registration with the raylet, which
//      answers the node's id and its object store's socket;
//   5. the object store connection;
//   6. the CoreWorker, given all of the above (CoreWorkerParts), which the
//      CoreWorkerService then serves; a driver's job is added to the GCS last.
// Errors name what could not be reached. Shutdown() (also run by the destructor)
// stops the core worker, cancels every RPC still in flight and lets the loop run
// their callbacks, then stops the servers and the loop, so no callback outlives
// what it uses.
#pragma once

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "src/common/event_loop.h"
#include "src/core_worker/core_worker.h"

namespace manta::rpc {
class GrpcServer;
}
namespace manta::gcs {
class GrpcGcsClient;
}
namespace manta::object_store {
class ObjectStoreClient;
}

namespace manta::core {

class CoreWorkerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<CoreWorkerProcess>> Start(CoreWorkerOptions options);
  ~CoreWorkerProcess();
  CoreWorkerProcess(const CoreWorkerProcess&) = delete;
  CoreWorkerProcess& operator=(const CoreWorkerProcess&) = delete;

  CoreWorker& core() { return *core_; }
  // Idempotent.
  void Shutdown();

 private:
  class Service;
  explicit CoreWorkerProcess(CoreWorkerOptions options);
  absl::Status Connect();
  void MakeClients(const rpc::ClientOptions& client_options, const TaskChannelSecurity& channel_security);
  absl::Status StartServers(const TaskChannelSecurity& channel_security);
  absl::Status FindLocalRaylet();
  absl::Status CreateJob();
  // Registers with the raylet: *node_id and *store_socket are its answer.
  absl::Status RegisterWithRaylet(NodeID* node_id, std::string* store_socket);
  // A driver runs with its node's configuration, as the node's workers do (the head's
  // --system-config included), except what its own environment sets. Read after the
  // clients and servers are made: their settings come from the environment alone.
  void AdoptNodeConfig(const google::protobuf::Map<std::string, std::string>& node_config);
  absl::Status ConnectStore(const std::string& store_socket);
  absl::Status AddJob();
  // Cancels every RPC in flight and waits (bounded) until the loop ran their callbacks.
  void CancelRpcsAndDrain(int64_t timeout_ms);

  CoreWorkerOptions options_;
  EventLoop loop_;
  std::thread loop_thread_;
  std::unique_ptr<gcs::GrpcGcsClient> gcs_;
  std::unique_ptr<RayletClientPool> raylets_;
  std::unique_ptr<CoreWorkerClientPool> workers_;
  std::unique_ptr<TaskChannelPool> channels_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<rpc::GrpcServer> server_;
  // Workers: where owners push tasks (read by the execution thread).
  std::unique_ptr<TaskChannelServer> channel_server_;
  std::unique_ptr<object_store::ObjectStoreClient> store_;
  std::unique_ptr<CoreWorker> core_;
  bool shut_down_ = false;
};

}  // namespace manta::core
