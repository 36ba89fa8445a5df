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

#include <glog/logging.h>

#include <deque>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "src/common/event_loop.h"
#include "src/core_worker/rpc_clients.h"

namespace manta::core {

// The calls of one method: requests in arrival order, answered by the test.
template <typename Request, typename Reply>
class FakeCallQueue {
 public:
  explicit FakeCallQueue(EventLoop& loop) : loop_(loop) {}

  void Add(const Request& request, RpcCallback<Reply> callback) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({request, std::move(callback)});
    ++total_;
  }
  // Calls received so far, answered or not.
  int total() const {
    absl::MutexLock lock(&mu_);
    return total_;
  }
  size_t pending() const {
    absl::MutexLock lock(&mu_);
    return pending_.size();
  }
  // The oldest pending request. REQUIRES: pending() > 0.
  Request Next() const {
    absl::MutexLock lock(&mu_);
    CHECK(!pending_.empty()) << "no pending call";
    return pending_.front().request;
  }
  // Answers the oldest pending call. REQUIRES: pending() > 0.
  void ReplyNext(absl::Status status, Reply reply = Reply()) {
    Call call;
    {
      absl::MutexLock lock(&mu_);
      CHECK(!pending_.empty()) << "no pending call to answer";
      call = std::move(pending_.front());
      pending_.pop_front();
    }
    Answer(std::move(call), std::move(status), std::move(reply));
  }
  // Answers every pending call with `status`.
  void ReplyAll(const absl::Status& status) {
    std::deque<Call> calls;
    {
      absl::MutexLock lock(&mu_);
      calls.swap(pending_);
    }
    for (Call& call : calls) Answer(std::move(call), status, Reply());
  }

 private:
  struct Call {
    Request request;
    RpcCallback<Reply> callback;
  };
  // Outside the mutex, and on the loop: the callback may call this client again.
  void Answer(Call call, absl::Status status, Reply reply) {
    loop_.Post("FakeCoreWorkerClient.Reply",
               [callback = std::move(call.callback), status = std::move(status), reply = std::move(reply)]() mutable {
                 callback(status, std::move(reply));
               });
  }

  EventLoop& loop_;
  mutable absl::Mutex mu_;
  std::deque<Call> pending_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

class FakeCoreWorkerClient final : public CoreWorkerClientInterface {
 public:
  // `address` is the peer's "ip:port"; callbacks run on `loop`.
  FakeCoreWorkerClient(std::string address, EventLoop& loop)
      : get_object_status(loop), wait_for_ref_removed(loop), add_object_location(loop), exits(loop),
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
  void CancelAll() override {
    const absl::Status cancelled = absl::CancelledError("cancelled");
    get_object_status.ReplyAll(cancelled);
    wait_for_ref_removed.ReplyAll(cancelled);
    add_object_location.ReplyAll(cancelled);
    exits.ReplyAll(cancelled);
  }
  int64_t InFlight() const override {
    return static_cast<int64_t>(get_object_status.pending() + wait_for_ref_removed.pending() +
                                add_object_location.pending() + exits.pending());
  }

  FakeCallQueue<rpc::GetObjectStatusRequest, rpc::GetObjectStatusReply> get_object_status;
  FakeCallQueue<rpc::WaitForRefRemovedRequest, rpc::WaitForRefRemovedReply> wait_for_ref_removed;
  FakeCallQueue<rpc::AddObjectLocationRequest, rpc::AddObjectLocationReply> add_object_location;
  FakeCallQueue<rpc::ExitRequest, rpc::ExitReply> exits;

 private:
  std::string address_;
};

}  // namespace manta::core
