#include "src/core_worker/stream_table.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace manta::core {

namespace {

void RunAll(std::vector<std::function<void()>> callbacks) {
  for (auto& callback : callbacks) callback();
}

}  // namespace

void StreamTable::Add(const TaskID& task, int64_t backpressure) {
  absl::MutexLock lock(&mu_);
  Stream& s = streams_[task];
  s.backpressure = std::max<int64_t>(backpressure, 0);
}

bool StreamTable::NeedsAck(Stream& s, const TaskID& task, Ack* ack) {
  if (s.backpressure <= 0 || s.ended || s.worker.worker_id().empty()) return false;
  // Only while the worker may be paused, and in steps of half its window: one
  // message per window rather than one per item consumed at the limit.
  if (s.attempt_reported - s.told < s.backpressure) return false;
  if (s.consumed - s.told < std::max<int64_t>(1, s.backpressure / 2)) return false;
  s.told = s.consumed;
  *ack = Ack{s.worker, task, s.attempt, s.consumed};
  return true;
}

std::vector<std::function<void()>> StreamTable::TakeReadyLocked(Stream& s) {
  if (!HasNextLocked(s)) return {};
  return std::exchange(s.ready, {});
}

bool StreamTable::AcceptLocked(const rpc::StreamItem& item, const TaskID& task, std::vector<Ack>* acks) {
  auto it = streams_.find(task);
  if (it == streams_.end()) return false;  // not streaming here, or the consumer left
  Stream& s = it->second;
  if (item.attempt_number() > s.attempt) {  // a retry: its worker starts from nothing consumed
    s.attempt = item.attempt_number();
    s.attempt_reported = 0;
    s.told = 0;
    s.worker.Clear();
  }
  if (item.attempt_number() == s.attempt) {
    s.attempt_reported = std::max(s.attempt_reported, item.index() + 1);
    if (item.has_worker()) s.worker = item.worker();
  }
  const bool accept = !s.ended && item.index() == s.accepted;
  if (accept) ++s.accepted;
  Ack ack;
  if (NeedsAck(s, task, &ack)) acks->push_back(std::move(ack));
  return accept;
}

void StreamTable::OnItems(const google::protobuf::RepeatedPtrField<rpc::StreamItem>& items) {
  for (const rpc::StreamItem& item : items) {
    auto task = TaskID::FromBinaryChecked(item.task_id());
    if (!task.ok() || item.index() < 0 || item.index() >= int64_t{ObjectID::kPutIndexBase} - 2) {
      LOG(WARNING) << "ignoring a malformed stream item (task id " << BinaryHex(item.task_id()) << ", index "
                   << item.index() << ")";
      continue;
    }
    const ObjectID id = ObjectID::FromIndex(*task, static_cast<uint32_t>(item.index() + 2));
    if (item.object().object_id() != id.Binary()) {
      LOG(WARNING) << "ignoring stream item " << item.index() << " of task " << task->Hex()
                   << ": it names object " << BinaryHex(item.object().object_id()) << ", not " << id.Hex();
      continue;
    }
    std::vector<Ack> acks;
    bool accept;
    {
      absl::MutexLock lock(&mu_);
      accept = AcceptLocked(item, *task, &acks);
    }
    SendAcks(acks);
    if (!accept) {
      VLOG(2) << "stream item " << item.index() << " of task " << task->Hex() << " (attempt "
              << item.attempt_number() << ") not taken: a duplicate, late, or nobody consumes it";
      hooks_.discard(id, item.object());
      continue;
    }
    hooks_.store(id, item.object());
    std::vector<std::function<void()>> ready;
    bool gone = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = streams_.find(*task);
      if (it == streams_.end()) {
        gone = true;  // the consumer left while the item was stored
      } else {
        it->second.received = std::max(it->second.received, item.index() + 1);
        ready = TakeReadyLocked(it->second);
        changed_.SignalAll();
      }
    }
    if (gone) hooks_.release(id);
    RunAll(std::move(ready));
  }
}

void StreamTable::OnEnd(const TaskID& task, bool failed) {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(task);
    if (it == streams_.end() || it->second.ended) return;
    it->second.ended = true;
    it->second.failed = failed;
    ready = TakeReadyLocked(it->second);
    changed_.SignalAll();
  }
  RunAll(std::move(ready));
}

void StreamTable::Release(const TaskID& task) {
  Stream s;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(task);
    if (it == streams_.end()) return;
    s = std::move(it->second);
    streams_.erase(it);
    changed_.SignalAll();
  }
  for (int64_t i = s.consumed; i < s.received; ++i) {
    hooks_.release(ObjectID::FromIndex(task, static_cast<uint32_t>(i + 2)));
  }
  // A worker paused for this consumer goes on (its items are dropped from now on).
  if (s.backpressure > 0 && !s.ended && !s.worker.worker_id().empty()) {
    hooks_.consumed(s.worker, task, s.attempt, kStreamConsumerGone);
  }
  RunAll(std::move(s.ready));
}

StreamTable::Next StreamTable::TakeNextLocked(const TaskID& task, Stream& s, std::vector<Ack>* acks) {
  Next next;
  if (s.received > s.consumed) {
    next.kind = Next::Kind::kItem;
    next.id = ObjectID::FromIndex(task, static_cast<uint32_t>(s.consumed + 2));
    ++s.consumed;
    Ack ack;
    if (NeedsAck(s, task, &ack)) acks->push_back(std::move(ack));
  } else if (s.ended && s.failed && !s.error_given) {
    s.error_given = true;
    next.kind = Next::Kind::kError;
    next.id = ObjectID::FromIndex(task, 1);
  } else if (s.ended) {
    next.kind = Next::Kind::kEnd;
  }
  return next;
}

StreamTable::Next StreamTable::TryNext(const TaskID& task) {
  std::vector<Ack> acks;
  Next next;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(task);
    if (it != streams_.end()) next = TakeNextLocked(task, it->second, &acks);
  }
  SendAcks(acks);
  return next;
}

absl::StatusOr<StreamTable::Next> StreamTable::WaitNext(const TaskID& task, int64_t timeout_ms) {
  const absl::Time deadline = timeout_ms < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(timeout_ms);
  std::vector<Ack> acks;
  Next next;
  {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto it = streams_.find(task);
      if (it == streams_.end()) return absl::NotFoundError("no stream of task " + task.Hex() + " is consumed here");
      next = TakeNextLocked(task, it->second, &acks);
      if (next.kind != Next::Kind::kWait) break;
      if (shutdown_) return absl::CancelledError("the runtime is shutting down");
      if (changed_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
        return absl::DeadlineExceededError("no item of the stream within " + std::to_string(timeout_ms) + " ms");
      }
    }
  }
  SendAcks(acks);
  return next;
}

void StreamTable::NotifyNext(const TaskID& task, std::function<void()> ready) {
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(task);
    if (it != streams_.end() && !HasNextLocked(it->second) && !shutdown_) {
      it->second.ready.push_back(std::move(ready));
      return;
    }
  }
  ready();
}

void StreamTable::Shutdown() {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    for (auto& [task, s] : streams_) {
      for (auto& callback : s.ready) ready.push_back(std::move(callback));
      s.ready.clear();
    }
    changed_.SignalAll();
  }
  RunAll(std::move(ready));
}

void StreamTable::SendAcks(const std::vector<Ack>& acks) {
  for (const Ack& ack : acks) hooks_.consumed(ack.worker, ack.task, ack.attempt, ack.consumed);
}

bool StreamTable::Contains(const TaskID& task) const {
  absl::MutexLock lock(&mu_);
  return streams_.contains(task);
}

size_t StreamTable::Size() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace manta::core
