// RayletClientInterface: a raylet as its clients see it (core workers leasing
// workers and managing objects; the GCS leasing workers for actors and reserving
// placement group bundles).
//
// GrpcRayletClient (MakeGrpcRayletClient) is the real one over gRPC; callbacks run on
// the EventLoop given to it. FakeRayletClient (fake_raylet_client.h) records requests
// for unit tests. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "protos/node_manager.pb.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/client_pool.h"
#include "src/common/rpc/grpc_client.h"

namespace manta::raylet {

class RayletClientInterface {
 public:
  template <typename Reply>
  using Callback = rpc::ReplyCallback<Reply>;
  virtual ~RayletClientInterface() = default;
  virtual const std::string& address() const = 0;
  virtual void RegisterWorker(const rpc::RegisterWorkerRequest& request, Callback<rpc::RegisterWorkerReply> cb) = 0;
  // No deadline: a request that cannot be satisfied yet stays queued at the raylet.
  virtual void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request,
                                  Callback<rpc::RequestWorkerLeaseReply> cb) = 0;
  virtual void ReturnWorker(const rpc::ReturnWorkerRequest& request, Callback<rpc::ReturnWorkerReply> cb) = 0;
  virtual void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request,
                                 Callback<rpc::CancelWorkerLeaseReply> cb) = 0;
  virtual void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& request,
                                   Callback<rpc::NotifyWorkerBlockedReply> cb) = 0;
  // One attempt, within the client's deadline: the GCS's health checks.
  virtual void HealthCheck(Callback<rpc::HealthCheckReply> cb) = 0;
  virtual void PinObjectIDs(const rpc::PinObjectIDsRequest& request, Callback<rpc::PinObjectIDsReply> cb) = 0;
  virtual void FreeObjects(const rpc::FreeObjectsRequest& request, Callback<rpc::FreeObjectsReply> cb) = 0;
  // Deadline `deadline_ms` (0 = the default).
  virtual void FetchObjects(const rpc::FetchObjectsRequest& request, int64_t deadline_ms,
                            Callback<rpc::FetchObjectsReply> cb) = 0;
  // Placement group bundles: the GCS's two-phase commit (protos/node_manager.proto).
  virtual void PrepareBundleResources(const rpc::PrepareBundleResourcesRequest& request,
                                      Callback<rpc::PrepareBundleResourcesReply> cb) = 0;
  virtual void CommitBundleResources(const rpc::CommitBundleResourcesRequest& request,
                                     Callback<rpc::CommitBundleResourcesReply> cb) = 0;
  virtual void CancelResourceReserve(const rpc::CancelResourceReserveRequest& request,
                                     Callback<rpc::CancelResourceReserveReply> cb) = 0;
  virtual void ReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& request,
                                    Callback<rpc::ReleaseUnusedBundlesReply> cb) = 0;
  // Shutdown: cancel every call in flight (callbacks still run), and count them.
  virtual void CancelAll() = 0;
  virtual int64_t InFlight() const = 0;
};

using RayletClientPool = rpc::ClientPool<RayletClientInterface>;

// The gRPC implementation; `address` is "ip:port" of the raylet.
std::shared_ptr<RayletClientInterface> MakeGrpcRayletClient(EventLoop& loop, const std::string& address,
                                                            const rpc::ClientOptions& options);

}  // namespace manta::raylet
