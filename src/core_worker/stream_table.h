// StreamTable: the owner's side of streaming tasks (ray::Generator; ARCHITECTURE.md
// §5, "Streaming").
//
// A streaming task yields items while it runs; its worker sends each one (a
// StreamItem: the value inline or where it is stored, like a return) in a reply of
// the task's push, ahead of the task's result. Item i is the object
// ObjectID::FromIndex(task, i + 2), owned by the caller like a return; the task's
// one return (index 1, the *end*) gets the number of items, or the error that
// stopped it. The table keeps, per stream:
//   - the items received, in order: item i is accepted when it is the next one; an
//     earlier index is a duplicate (a retried attempt yields again from item 0: what
//     was delivered is not delivered twice) and is discarded, so is anything once
//     the end is known or the consumer gone;
//   - the items consumed: Next hands out the next received item (its local reference,
//     taken when it was stored, passes to the caller's ObjectRef), or, once every
//     item was handed out, the end: the end's id once if the task failed (its Get
//     throws the error), then "no more";
//   - back-pressure: with a limit n > 0 the worker pauses while n of its attempt's
//     items are unconsumed. The table tells the worker what was consumed only when
//     it may be paused (its attempt reported n items beyond the last count sent) and
//     at least n/2 more were consumed since that count, so a consumer that keeps up
//     costs no message, and one at the limit about two per window.
// The consumer is gone when the end object is freed (its ObjectRefGenerator
// dropped): unconsumed items are released and a paused worker is let go for good.
//
// Threading: thread-safe (one absl::Mutex with a CondVar for blocked Next calls).
// Hooks run outside the mutex; `ready` callbacks too, and must only hand work on.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/id.h"

namespace manta::core {

// What a consumer of a stream with this many consumed items sends when it leaves.
inline constexpr int64_t kStreamConsumerGone = int64_t{1} << 62;

class StreamTable {
 public:
  struct Hooks {
    // Registers the item (owned, with one local reference for the stream) and stores
    // its value, like a return.
    std::function<void(const ObjectID& id, const rpc::ReturnObject& item)> store;
    // An item not accepted: the copy it names in a node's store must go.
    std::function<void(const ObjectID& id, const rpc::ReturnObject& item)> discard;
    // Drops the stream's local reference on an item never handed out.
    std::function<void(const ObjectID& id)> release;
    // Tells `worker` that `consumed` items of attempt `attempt` were consumed.
    std::function<void(const rpc::Address& worker, const TaskID& task, int attempt, int64_t consumed)> consumed;
  };
  explicit StreamTable(Hooks hooks) : hooks_(std::move(hooks)) {}

  // A streaming task was submitted; `backpressure` <= 0: none.
  void Add(const TaskID& task, int64_t backpressure);
  // The items of one reply, in order.
  void OnItems(const google::protobuf::RepeatedPtrField<rpc::StreamItem>& items);
  // The task's end object has its value (`failed`: an error). Every item reported
  // before it has been received by then (they travel ahead of the result).
  void OnEnd(const TaskID& task, bool failed);
  // The end object was freed: the consumer is gone.
  void Release(const TaskID& task);

  struct Next {
    enum class Kind { kItem, kError, kEnd, kWait };
    Kind kind = Kind::kWait;
    ObjectID id;  // kItem: the item (its reference passes to the caller); kError: the end
  };
  // The next item without waiting (kWait when there is none yet).
  Next TryNext(const TaskID& task);
  // Waits for the next item or the end (`timeout_ms` -1: for ever). DeadlineExceeded
  // after the timeout; NotFound for a stream not known here; Cancelled at shutdown.
  absl::StatusOr<Next> WaitNext(const TaskID& task, int64_t timeout_ms);
  // Runs `ready` once TryNext would not return kWait (at once if so now).
  void NotifyNext(const TaskID& task, std::function<void()> ready);
  // Wakes every waiter; later calls do not wait.
  void Shutdown();

  bool Contains(const TaskID& task) const;
  size_t Size() const;

 private:
  struct Stream {
    int64_t backpressure = 0;
    int64_t accepted = 0;  // items taken for storing (0..accepted-1)
    int64_t received = 0;  // of those, stored (0..received-1)
    int64_t consumed = 0;  // items handed out
    bool ended = false;
    bool failed = false;
    bool error_given = false;
    // Back-pressure, for the attempt running now.
    int attempt = 0;
    int64_t attempt_reported = 0;  // items of this attempt seen (duplicates too)
    int64_t told = 0;              // the count last sent to its worker
    rpc::Address worker;
    std::vector<std::function<void()>> ready;
  };
  struct Ack {
    rpc::Address worker;
    TaskID task;
    int attempt;
    int64_t consumed;
  };
  // Whether the consumer should tell the worker now; if so, records it in *ack.
  static bool NeedsAck(Stream& s, const TaskID& task, Ack* ack);
  // Takes the ready callbacks of `s` when it has something for TryNext.
  static std::vector<std::function<void()>> TakeReadyLocked(Stream& s);
  static bool HasNextLocked(const Stream& s) { return s.received > s.consumed || s.ended; }
  Next TakeNextLocked(const TaskID& task, Stream& s, std::vector<Ack>* acks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accepts one item (under the mutex); false: discard it.
  bool AcceptLocked(const rpc::StreamItem& item, const TaskID& task, std::vector<Ack>* acks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendAcks(const std::vector<Ack>& acks);

  Hooks hooks_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  absl::flat_hash_map<TaskID, Stream, IdHash> streams_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::core
