// The core worker's peers: its node's raylet (and raylets it is spilled back to) and
// other core workers (owners, borrowers, leased workers).
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
#include "src/common/rpc/grpc_client.h"

namespace manta::core {

template <typename Reply>
using RpcCallback = std::function<void(const absl::Status&, Reply&&)>;

// A raylet as the core worker sees it.
class RayletClientInterface {
 public:
  virtual ~RayletClientInterface() = default;
  virtual const std::string& address() const = 0;
  virtual void RegisterWorker(const rpc::RegisterWorkerRequest& request,
                              RpcCallback<rpc::RegisterWorkerReply> cb) = 0;
  // No deadline: a request that cannot be satisfied yet stays queued at the raylet.
  virtual void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request,
                                  RpcCallback<rpc::RequestWorkerLeaseReply> cb) = 0;
  virtual void ReturnWorker(const rpc::ReturnWorkerRequest& request, RpcCallback<rpc::ReturnWorkerReply> cb) = 0;
  virtual void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request,
                                 RpcCallback<rpc::CancelWorkerLeaseReply> cb) = 0;
  virtual void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& request,
                                   RpcCallback<rpc::NotifyWorkerBlockedReply> cb) = 0;
  virtual void PinObjectIDs(const rpc::PinObjectIDsRequest& request, RpcCallback<rpc::PinObjectIDsReply> cb) = 0;
  virtual void FreeObjects(const rpc::FreeObjectsRequest& request, RpcCallback<rpc::FreeObjectsReply> cb) = 0;
  // Deadline `deadline_ms` (0 = the default).
  virtual void FetchObjects(const rpc::FetchObjectsRequest& request, int64_t deadline_ms,
                            RpcCallback<rpc::FetchObjectsReply> cb) = 0;
  // Shutdown: cancel every call in flight (callbacks still run), and count them.
  virtual void CancelAll() = 0;
  virtual int64_t InFlight() const = 0;
};

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
  // Shutdown: cancel every call in flight (callbacks still run), and count them.
  virtual void CancelAll() = 0;
  virtual int64_t InFlight() const = 0;
};

// Hands out one client per address. Thread-safe.
template <typename Interface>
class ClientPool {
 public:
  using Factory = std::function<std::shared_ptr<Interface>(const std::string& address)>;
  explicit ClientPool(Factory factory) : factory_(std::move(factory)) {}
  std::shared_ptr<Interface> Get(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& slot = clients_[address];
    if (!slot) slot = factory_(address);
    return slot;
  }
  // Forgets a client (a peer that died); later Gets create a fresh one. Calls in
  // flight on it still complete; the pool keeps counting them (Retired()).
  void Disconnect(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto it = clients_.find(address);
    if (it == clients_.end()) return;
    retired_.push_back(std::move(it->second));
    clients_.erase(it);
  }
  // Forgets every client, current or retired, for which `dead` is true (closed
  // connections with nothing in flight).
  void Prune(const std::function<bool(Interface&)>& dead) {
    absl::MutexLock lock(&mu_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      auto next = std::next(it);
      if (dead(*it->second)) clients_.erase(it);
      it = next;
    }
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [&](const std::shared_ptr<Interface>& c) { return dead(*c); }),
                   retired_.end());
  }
  // Runs `fn` on every client, current and retired.
  void ForEach(const std::function<void(Interface&)>& fn) {
    absl::MutexLock lock(&mu_);
    for (auto& [address, client] : clients_) fn(*client);
    for (auto& client : retired_) fn(*client);
  }
  // Runs `fn` on every current client outside the pool's mutex, so `fn` may use
  // the pool (and callbacks it triggers may too).
  void ForEachShared(const std::function<void(const std::shared_ptr<Interface>&)>& fn) {
    std::vector<std::shared_ptr<Interface>> clients;
    {
      absl::MutexLock lock(&mu_);
      clients.reserve(clients_.size());
      for (auto& [address, client] : clients_) clients.push_back(client);
    }
    for (const auto& client : clients) fn(client);
  }

 private:
  Factory factory_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Interface>> clients_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Interface>> retired_ ABSL_GUARDED_BY(mu_);
};

using RayletClientPool = ClientPool<RayletClientInterface>;
using CoreWorkerClientPool = ClientPool<CoreWorkerClientInterface>;

// gRPC implementations (rpc_clients.cc).
std::shared_ptr<RayletClientInterface> MakeGrpcRayletClient(EventLoop& loop, const std::string& address,
                                                            const rpc::ClientOptions& options);
std::shared_ptr<CoreWorkerClientInterface> MakeGrpcCoreWorkerClient(EventLoop& loop, const std::string& address,
                                                                    const rpc::ClientOptions& options);

}  // namespace manta::core
