#include "src/core_worker/rpc_clients.h"

#include "protos/core_worker.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"


namespace manta::core {
namespace {

// Long enough to mean "no deadline": lease requests wait for resources and pushed
// tasks run as long as they need; a dead peer still fails the call at once.
constexpr int64_t kNoDeadlineMs = int64_t{10} * 365 * 24 * 3600 * 1000;

using WorkerStub = rpc::NodeManagerWorkerService::Stub;
using NodeStub = rpc::NodeManagerService::Stub;
using CoreStub = rpc::CoreWorkerService::Stub;

class GrpcRayletClient final : public RayletClientInterface {
 public:
  GrpcRayletClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options)
      : address_(address), worker_(loop, address, options), node_(loop, address, options) {}
  const std::string& address() const override { return address_; }
  void RegisterWorker(const rpc::RegisterWorkerRequest& q, RpcCallback<rpc::RegisterWorkerReply> cb) override {
    worker_.Call(&WorkerStub::async::RegisterWorker, "RegisterWorker", q, std::move(cb), {0, true});
  }
  void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& q,
                          RpcCallback<rpc::RequestWorkerLeaseReply> cb) override {
    worker_.Call(&WorkerStub::async::RequestWorkerLease, "RequestWorkerLease", q, std::move(cb),
                 {kNoDeadlineMs, false});
  }
  void ReturnWorker(const rpc::ReturnWorkerRequest& q, RpcCallback<rpc::ReturnWorkerReply> cb) override {
    worker_.Call(&WorkerStub::async::ReturnWorker, "ReturnWorker", q, std::move(cb), {0, true});
  }
  void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& q,
                         RpcCallback<rpc::CancelWorkerLeaseReply> cb) override {
    worker_.Call(&WorkerStub::async::CancelWorkerLease, "CancelWorkerLease", q, std::move(cb), {0, true});
  }
  void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& q,
                           RpcCallback<rpc::NotifyWorkerBlockedReply> cb) override {
    worker_.Call(&WorkerStub::async::NotifyWorkerBlocked, "NotifyWorkerBlocked", q, std::move(cb), {0, true});
  }
  void PinObjectIDs(const rpc::PinObjectIDsRequest& q, RpcCallback<rpc::PinObjectIDsReply> cb) override {
    node_.Call(&NodeStub::async::PinObjectIDs, "PinObjectIDs", q, std::move(cb), {0, true});
  }
  void FreeObjects(const rpc::FreeObjectsRequest& q, RpcCallback<rpc::FreeObjectsReply> cb) override {
    node_.Call(&NodeStub::async::FreeObjects, "FreeObjects", q, std::move(cb), {0, true});
  }
  void FetchObjects(const rpc::FetchObjectsRequest& q, int64_t deadline_ms,
                    RpcCallback<rpc::FetchObjectsReply> cb) override {
    node_.Call(&NodeStub::async::FetchObjects, "FetchObjects", q, std::move(cb), {deadline_ms, false});
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

class GrpcCoreWorkerClient final : public CoreWorkerClientInterface {
 public:
  GrpcCoreWorkerClient(EventLoop& loop, const std::string& address, const rpc::ClientOptions& options)
      : address_(address), client_(loop, address, options) {}
  const std::string& address() const override { return address_; }
  void CancelAll() override { client_.CancelAll(); }
  int64_t InFlight() const override { return client_.InFlight(); }
  void GetObjectStatus(const rpc::GetObjectStatusRequest& q, RpcCallback<rpc::GetObjectStatusReply> cb) override {
    client_.Call(&CoreStub::async::GetObjectStatus, "GetObjectStatus", q, std::move(cb), {kNoDeadlineMs, false});
  }
  void WaitForRefRemoved(const rpc::WaitForRefRemovedRequest& q,
                         RpcCallback<rpc::WaitForRefRemovedReply> cb) override {
    client_.Call(&CoreStub::async::WaitForRefRemoved, "WaitForRefRemoved", q, std::move(cb),
                 {kNoDeadlineMs, false});
  }
  void AddObjectLocation(const rpc::AddObjectLocationRequest& q,
                         RpcCallback<rpc::AddObjectLocationReply> cb) override {
    client_.Call(&CoreStub::async::AddObjectLocation, "AddObjectLocation", q, std::move(cb), {0, true});
  }
  void Exit(const rpc::ExitRequest& q, RpcCallback<rpc::ExitReply> cb) override {
    client_.Call(&CoreStub::async::Exit, "Exit", q, std::move(cb), {0, false});
  }

 private:
  std::string address_;
  rpc::GrpcClient<rpc::CoreWorkerService> client_;
};

}  // namespace

std::shared_ptr<RayletClientInterface> MakeGrpcRayletClient(EventLoop& loop, const std::string& address,
                                                            const rpc::ClientOptions& options) {
  return std::make_shared<GrpcRayletClient>(loop, address, options);
}

std::shared_ptr<CoreWorkerClientInterface> MakeGrpcCoreWorkerClient(EventLoop& loop, const std::string& address,
                                                                    const rpc::ClientOptions& options) {
  return std::make_shared<GrpcCoreWorkerClient>(loop, address, options);
}

}  // namespace manta::core
