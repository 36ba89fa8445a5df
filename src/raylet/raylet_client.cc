#include "src/raylet/raylet_client.h"

#include "protos/node_manager.grpc.pb.h"

namespace manta::raylet {
namespace {

// Long enough to mean "no deadline": lease requests wait for resources; a dead peer
// still fails the call at once.
constexpr int64_t kNoDeadlineMs = int64_t{10} * 365 * 24 * 3600 * 1000;

using WorkerStub = rpc::NodeManagerWorkerService::Stub;
using NodeStub = rpc::NodeManagerService::Stub;

class GrpcRayletClient final : public RayletClientInterface {
 public:
  GrpcRayletClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options)
      : address_(address), worker_(loop, address, options), node_(loop, address, options) {}
  const std::string& address() const override { return address_; }
  void RegisterWorker(const rpc::RegisterWorkerRequest& q, Callback<rpc::RegisterWorkerReply> cb) override {
    worker_.Call(&WorkerStub::async::RegisterWorker, "RegisterWorker", q, std::move(cb), {0, true});
  }
  void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& q, Callback<rpc::RequestWorkerLeaseReply> cb) override {
    worker_.Call(&WorkerStub::async::RequestWorkerLease, "RequestWorkerLease", q, std::move(cb),
                 {kNoDeadlineMs, false});
  }
  void ReturnWorker(const rpc::ReturnWorkerRequest& q, Callback<rpc::ReturnWorkerReply> cb) override {
    worker_.Call(&WorkerStub::async::ReturnWorker, "ReturnWorker", q, std::move(cb), {0, true});
  }
  void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& q, Callback<rpc::CancelWorkerLeaseReply> cb) override {
    worker_.Call(&WorkerStub::async::CancelWorkerLease, "CancelWorkerLease", q, std::move(cb), {0, true});
  }
  void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& q,
                           Callback<rpc::NotifyWorkerBlockedReply> cb) override {
    worker_.Call(&WorkerStub::async::NotifyWorkerBlocked, "NotifyWorkerBlocked", q, std::move(cb), {0, true});
  }
  void HealthCheck(Callback<rpc::HealthCheckReply> cb) override {
    node_.Call(&NodeStub::async::HealthCheck, "HealthCheck", rpc::HealthCheckRequest(), std::move(cb), {0, false});
  }
  void PinObjectIDs(const rpc::PinObjectIDsRequest& q, Callback<rpc::PinObjectIDsReply> cb) override {
    node_.Call(&NodeStub::async::PinObjectIDs, "PinObjectIDs", q, std::move(cb), {0, true});
  }
  void FreeObjects(const rpc::FreeObjectsRequest& q, Callback<rpc::FreeObjectsReply> cb) override {
    node_.Call(&NodeStub::async::FreeObjects, "FreeObjects", q, std::move(cb), {0, true});
  }
  void FetchObjects(const rpc::FetchObjectsRequest& q, int64_t deadline_ms,
                    Callback<rpc::FetchObjectsReply> cb) override {
    node_.Call(&NodeStub::async::FetchObjects, "FetchObjects", q, std::move(cb), {deadline_ms, false});
  }
  // The bundle calls are idempotent (repeating one changes nothing), so they retry.
  void PrepareBundleResources(const rpc::PrepareBundleResourcesRequest& q,
                              Callback<rpc::PrepareBundleResourcesReply> cb) override {
    node_.Call(&NodeStub::async::PrepareBundleResources, "PrepareBundleResources", q, std::move(cb), {0, true});
  }
  void CommitBundleResources(const rpc::CommitBundleResourcesRequest& q,
                             Callback<rpc::CommitBundleResourcesReply> cb) override {
    node_.Call(&NodeStub::async::CommitBundleResources, "CommitBundleResources", q, std::move(cb), {0, true});
  }
  void CancelResourceReserve(const rpc::CancelResourceReserveRequest& q,
                             Callback<rpc::CancelResourceReserveReply> cb) override {
    node_.Call(&NodeStub::async::CancelResourceReserve, "CancelResourceReserve", q, std::move(cb), {0, true});
  }
  void ReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& q,
                            Callback<rpc::ReleaseUnusedBundlesReply> cb) override {
    node_.Call(&NodeStub::async::ReleaseUnusedBundles, "ReleaseUnusedBundles", q, std::move(cb), {0, true});
  }
  void CancelAll() override {
    worker_.CancelAll();
    node_.CancelAll();
  }
  int64_t InFlight() const override { return worker_.InFlight() + node_.InFlight(); }

 private:
  std::string address_;
  rpc::GrpcClient<rpc::NodeManagerWorkerService> worker_;
  rpc::GrpcClient<rpc::NodeManagerService> node_;
};

}  // namespace

std::shared_ptr<RayletClientInterface> MakeGrpcRayletClient(EventLoop& loop, const std::string& address,
                                                            const rpc::ClientOptions& options) {
  return std::make_shared<GrpcRayletClient>(loop, address, options);
}

}  // namespace manta::raylet
