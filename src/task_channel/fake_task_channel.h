// FakeTaskChannel: the in-process fake of TaskChannelInterface for unit tests (the
// core worker's submitters, the GCS actor scheduler).
//
// Pushes are recorded; the test answers them (ReplyOk, ReplySome, Reply, Fail). A closed channel
// fails later pushes from the loop, as the real one does. Not thread-safe: for tests
// that drive one loop.
#pragma once

#include <deque>
#include <string>

#include "src/common/id.h"
#include "src/task_channel/task_channel.h"

namespace manta::core {

class FakeTaskChannel : public TaskChannelInterface {
 public:
  struct PendingPush {
    rpc::PushTaskRequest request;
    PushCallback callback;
    int answered = 0;  // tasks already answered by partial replies
  };

  FakeTaskChannel(std::string address, EventLoop& loop) : address_(std::move(address)), loop_(loop) {}
  const std::string& address() const override { return address_; }
  // Recorded decoded, with the next push_id (from 1).
  void PushSerialized(std::string bytes, PushCallback cb) override {
    if (closed) {
      loop_.Post("FakeTaskChannel.Closed", [cb] { cb(absl::UnavailableError("connection closed"), {}); });
      return;
    }
    rpc::PushTaskRequest q;
    if (!q.ParseFromString(bytes)) {
      loop_.Post("FakeTaskChannel.Malformed", [cb] { cb(absl::InternalError("push does not parse"), {}); });
      return;
    }
    q.set_push_id(next_push_id_++);
    pushes.push_back({std::move(q), std::move(cb)});
  }
  bool Poll() override { return false; }
  void CancelAll() override {
    auto pending = std::move(pushes);
    pushes.clear();
    for (auto& p : pending) p.callback(absl::CancelledError("cancelled"), {});
  }
  int64_t InFlight() const override { return static_cast<int64_t>(pushes.size()); }
  bool IsClosed() const override { return closed; }
  void Close(const absl::Status&) override { closed = true; }

  // A successful result of `spec`: its first return holds the bytes `data`.
  static void AddResult(const rpc::TaskSpec& spec, rpc::PushTaskReply* reply, const std::string& data = "ok") {
    rpc::TaskResult* r = reply->add_results();
    r->set_task_id(spec.task_id());
    r->set_attempt_number(spec.attempt_number());
    r->set_run_us(1);
    rpc::ReturnObject* ret = r->add_returns();
    ret->set_object_id(ObjectID::FromIndex(TaskID::FromBinary(spec.task_id()), 1).Binary());
    ret->set_data(data);
    ret->set_size_bytes(static_cast<int64_t>(data.size()));
  }

  // Answers the oldest push: every task not yet answered returns the bytes "ok".
  void ReplyOk() {
    if (pushes.empty()) return;
    auto p = std::move(pushes.front());
    pushes.pop_front();
    rpc::PushTaskReply reply;
    for (int i = p.answered; i < p.request.tasks_size(); ++i) AddResult(p.request.tasks(i), &reply);
    reply.set_done(true);
    p.callback(absl::OkStatus(), std::move(reply));
  }
  // Answers the next `n` tasks of the oldest push with "ok", as a worker's interim
  // reply does; the push stays open (ReplyOk answers the rest and closes it).
  void ReplySome(int n) {
    if (pushes.empty()) return;
    PendingPush& p = pushes.front();
    rpc::PushTaskReply reply;
    reply.set_push_id(p.request.push_id());
    for (int i = 0; i < n && p.answered < p.request.tasks_size(); ++i) AddResult(p.request.tasks(p.answered++), &reply);
    p.callback(absl::OkStatus(), std::move(reply));
  }
  // Answers the oldest push with `reply` (its push_id is filled in).
  void Reply(rpc::PushTaskReply reply) {
    if (pushes.empty()) return;
    auto p = std::move(pushes.front());
    pushes.pop_front();
    reply.set_push_id(p.request.push_id());
    p.callback(absl::OkStatus(), std::move(reply));
  }
  // Fails the oldest push as a dead connection does, or with `status`.
  void Fail(const absl::Status& status = absl::UnavailableError("Socket closed")) {
    if (pushes.empty()) return;
    auto p = std::move(pushes.front());
    pushes.pop_front();
    p.callback(status, {});
  }

  bool closed = false;  // the worker process went away
  std::deque<PendingPush> pushes;

 private:
  std::string address_;
  EventLoop& loop_;
  uint64_t next_push_id_ = 1;
};

}  // namespace manta::core
