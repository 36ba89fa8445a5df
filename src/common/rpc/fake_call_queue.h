// FakeCallQueue: the calls of one method of a fake RPC client (unit tests only):
// requests in arrival order, each pending until the test answers it. The answer's
// callback runs on an EventLoop (the one bound at construction, or the one named
// in the call), as a real client's callbacks run on their loop, and never under
// the queue's lock (a callback may call the client again). Thread-safe.
#pragma once

#include <glog/logging.h>

#include <deque>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/client_pool.h"

namespace manta::rpc {

template <typename Request, typename Reply>
class FakeCallQueue {
 public:
  using Callback = ReplyCallback<Reply>;

  FakeCallQueue() = default;
  explicit FakeCallQueue(EventLoop& loop) : loop_(&loop) {}

  void Add(Request request, Callback callback) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({std::move(request), std::move(callback)});
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
  // Answers the oldest pending call; its callback runs on `loop`. REQUIRES: pending() > 0.
  void ReplyNext(EventLoop& loop, absl::Status status, Reply reply = Reply()) {
    Call call;
    {
      absl::MutexLock lock(&mu_);
      CHECK(!pending_.empty()) << "no pending call to answer";
      call = std::move(pending_.front());
      pending_.pop_front();
    }
    Answer(loop, std::move(call), std::move(status), std::move(reply));
  }
  // The same, on the loop bound at construction.
  void ReplyNext(absl::Status status, Reply reply = Reply()) {
    CHECK(loop_ != nullptr) << "no loop bound: name one";
    ReplyNext(*loop_, std::move(status), std::move(reply));
  }
  // Answers every pending call with `status`, on the bound loop.
  void ReplyAll(const absl::Status& status) {
    CHECK(loop_ != nullptr) << "no loop bound";
    std::deque<Call> calls;
    {
      absl::MutexLock lock(&mu_);
      calls.swap(pending_);
    }
    for (Call& call : calls) Answer(*loop_, std::move(call), status, Reply());
  }

 private:
  struct Call {
    Request request;
    Callback callback;
  };
  static void Answer(EventLoop& loop, Call call, absl::Status status, Reply reply) {
    loop.Post("FakeCallQueue.Reply",
              [callback = std::move(call.callback), status = std::move(status), reply = std::move(reply)]() mutable {
                callback(status, std::move(reply));
              });
  }

  EventLoop* const loop_ = nullptr;
  mutable absl::Mutex mu_;
  std::deque<Call> pending_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::rpc
