// FakeCoreWorkerClient: the in-process fake of CoreWorkerClientInterface for unit
// tests, standing for another core worker (an owner, a borrower) as the core
// worker under test sees it.
//
// Each call is recorded in the queue of its method (requests in arrival order) and
// stays pending until the test answers it with ReplyNext(status, reply); the
// callback then runs on the loop given at construction, as a real client's runs on
// the core worker's loop. CancelAll answers every pending call CANCELLED (also on
// the loop), as a real client does at shutdown; InFlight counts the calls not yet
// answered (a drain then runs a turn of the loop, for the callbacks posted).
// Thread-safe: the core worker calls it from its loop and from user threads while
// the test answers from its own.
#pragma once

#include <string>
#include <utility>

#include "src/common/event_loop.h"
#include "src/common/rpc/fake_call_queue.h"
#include "src/core_worker/rpc_clients.h"

namespace manta::core {

template <typename Request, typename Reply>
using FakeCallQueue = rpc::FakeCallQueue<Request, Reply>;

class FakeCoreWorkerClient final : public CoreWorkerClientInterface {
 public:
  // `address` is the peer's "ip:port"; callbacks run on `loop`.
  FakeCoreWorkerClient(std::string address, EventLoop& loop)
      : get_object_status(loop), wait_for_ref_removed(loop), add_object_location(loop), exits(loop), cancels(loop),
        remote_cancels(loop), stream_consumed(loop),
        address_(std::move(address)) {}

  const std::string& address() const override { return address_; }
  void GetObjectStatus(const rpc::GetObjectStatusRequest& request,
                       RpcCallback<rpc::GetObjectStatusReply> cb) override {
    get_object_status.Add(request, std::move(cb));
  }
  void WaitForRefRemoved(const rpc::WaitForRefRemovedRequest& request,
                         RpcCallback<rpc::WaitForRefRemovedReply> cb) override {
    wait_for_ref_removed.Add(request, std::move(cb));
  }
  void AddObjectLocation(const rpc::AddObjectLocationRequest& request,
                         RpcCallback<rpc::AddObjectLocationReply> cb) override {
    add_object_location.Add(request, std::move(cb));
  }
  void Exit(const rpc::ExitRequest& request, RpcCallback<rpc::ExitReply> cb) override {
    exits.Add(request, std::move(cb));
  }
  void CancelTask(const rpc::CancelTaskRequest& request, RpcCallback<rpc::CancelTaskReply> cb) override {
    cancels.Add(request, std::move(cb));
  }
  void RemoteCancelTask(const rpc::RemoteCancelTaskRequest& request,
                        RpcCallback<rpc::RemoteCancelTaskReply> cb) override {
    remote_cancels.Add(request, std::move(cb));
  }
  void StreamConsumed(const rpc::StreamConsumedRequest& request, RpcCallback<rpc::StreamConsumedReply> cb) override {
    stream_consumed.Add(request, std::move(cb));
  }
  void CancelAll() override {
    const absl::Status cancelled = absl::CancelledError("cancelled");
    get_object_status.ReplyAll(cancelled);
    wait_for_ref_removed.ReplyAll(cancelled);
    add_object_location.ReplyAll(cancelled);
    exits.ReplyAll(cancelled);
    cancels.ReplyAll(cancelled);
    remote_cancels.ReplyAll(cancelled);
    stream_consumed.ReplyAll(cancelled);
  }
  int64_t InFlight() const override {
    return static_cast<int64_t>(get_object_status.pending() + wait_for_ref_removed.pending() +
                                add_object_location.pending() + exits.pending() + cancels.pending() +
                                remote_cancels.pending() + stream_consumed.pending());
  }

  FakeCallQueue<rpc::GetObjectStatusRequest, rpc::GetObjectStatusReply> get_object_status;
  FakeCallQueue<rpc::WaitForRefRemovedRequest, rpc::WaitForRefRemovedReply> wait_for_ref_removed;
  FakeCallQueue<rpc::AddObjectLocationRequest, rpc::AddObjectLocationReply> add_object_location;
  FakeCallQueue<rpc::ExitRequest, rpc::ExitReply> exits;
  FakeCallQueue<rpc::CancelTaskRequest, rpc::CancelTaskReply> cancels;
  FakeCallQueue<rpc::RemoteCancelTaskRequest, rpc::RemoteCancelTaskReply> remote_cancels;
  FakeCallQueue<rpc::StreamConsumedRequest, rpc::StreamConsumedReply> stream_consumed;

 private:
  std::string address_;
};

}  // namespace manta::core
