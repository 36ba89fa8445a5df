// The core worker's peers: other core workers (owners, borrowers, leased workers),
// and, through src/raylet/raylet_client.h, its node's raylet (and raylets it is
// spilled back to).
//
// Each peer is an interface with a gRPC implementation here; unit tests use fakes.
// Callbacks of the gRPC clients run on the core worker's EventLoop. Clients are
// handed out by a pool keyed by "ip:port", created on first use and kept.
// Thread-safe: the pools take a mutex; the clients themselves are thread-safe.
#pragma once

#include <algorithm>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "protos/node_manager.pb.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/client_pool.h"
#include "src/common/rpc/grpc_client.h"
#include "src/raylet/raylet_client.h"

namespace manta::core {

template <typename Reply>
using RpcCallback = rpc::ReplyCallback<Reply>;
using raylet::MakeGrpcRayletClient;
using raylet::RayletClientInterface;
using raylet::RayletClientPool;
using rpc::ClientPool;

// Another core worker.
class CoreWorkerClientInterface {
 public:
  virtual ~CoreWorkerClientInterface() = default;
  virtual const std::string& address() const = 0;
  // Answered by the owner once the object is ready (or failed, or out of scope).
  virtual void GetObjectStatus(const rpc::GetObjectStatusRequest& request,
                               RpcCallback<rpc::GetObjectStatusReply> cb) = 0;
  virtual void WaitForRefRemoved(const rpc::WaitForRefRemovedRequest& request,
                                 RpcCallback<rpc::WaitForRefRemovedReply> cb) = 0;
  virtual void AddObjectLocation(const rpc::AddObjectLocationRequest& request,
                                 RpcCallback<rpc::AddObjectLocationReply> cb) = 0;
  virtual void Exit(const rpc::ExitRequest& request, RpcCallback<rpc::ExitReply> cb) = 0;
  virtual void CancelTask(const rpc::CancelTaskRequest& request, RpcCallback<rpc::CancelTaskReply> cb) = 0;
  virtual void RemoteCancelTask(const rpc::RemoteCancelTaskRequest& request,
                                RpcCallback<rpc::RemoteCancelTaskReply> cb) = 0;
  virtual void StreamConsumed(const rpc::StreamConsumedRequest& request,
                              RpcCallback<rpc::StreamConsumedReply> cb) = 0;
  // Shutdown: cancel every call in flight (callbacks still run), and count them.
  virtual void CancelAll() = 0;
  virtual int64_t InFlight() const = 0;
};

using CoreWorkerClientPool = ClientPool<CoreWorkerClientInterface>;

// gRPC implementations (rpc_clients.cc).
std::shared_ptr<CoreWorkerClientInterface> MakeGrpcCoreWorkerClient(EventLoop& loop, const std::string& address,
                                                                    const rpc::ClientOptions& options);

}  // namespace manta::core
