#include "src/core_worker/rpc_clients.h"

#include "protos/core_worker.grpc.pb.h"

namespace manta::core {
namespace {

// Long enough to mean "no deadline": lease requests wait for resources and pushed
// tasks run as long as they need; a dead peer still fails the call at once.
constexpr int64_t kNoDeadlineMs = int64_t{10} * 365 * 24 * 3600 * 1000;

using CoreStub = rpc::CoreWorkerService::Stub;

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
  void CancelTask(const rpc::CancelTaskRequest& q, RpcCallback<rpc::CancelTaskReply> cb) override {
    client_.Call(&CoreStub::async::CancelTask, "CancelTask", q, std::move(cb), {0, false});
  }
  void RemoteCancelTask(const rpc::RemoteCancelTaskRequest& q, RpcCallback<rpc::RemoteCancelTaskReply> cb) override {
    client_.Call(&CoreStub::async::RemoteCancelTask, "RemoteCancelTask", q, std::move(cb), {0, false});
  }
  void StreamConsumed(const rpc::StreamConsumedRequest& q, RpcCallback<rpc::StreamConsumedReply> cb) override {
    client_.Call(&CoreStub::async::StreamConsumed, "StreamConsumed", q, std::move(cb), {0, false});
  }

 private:
  std::string address_;
  rpc::GrpcClient<rpc::CoreWorkerService> client_;
};

}  // namespace

std::shared_ptr<CoreWorkerClientInterface> MakeGrpcCoreWorkerClient(EventLoop& loop, const std::string& address,
                                                                    const rpc::ClientOptions& options) {
  return std::make_shared<GrpcCoreWorkerClient>(loop, address, options);
}

}  // namespace manta::core
