// StreamProducers: the worker's side of streaming tasks it runs (ARCHITECTURE.md §5,
// "Streaming"): per running generator, the items it yielded and, with back-pressure,
// how many of them its owner said were consumed.
//
// A generator that yields item `produced` while `backpressure` of its items are
// unconsumed pauses: Yielded keeps its `resume` and runs it once the owner's count
// (Consumed) lets it go on, or when the task is cancelled (Wake). Counts are per
// attempt: an owner's count for another attempt of the task is ignored.
//
// Threading: thread-safe (one absl::Mutex); `resume` runs outside it, on the thread
// that let the generator go on, and must only hand work on (coroutine.h's ResumeOn).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "src/common/id.h"

namespace manta::core {

class StreamProducers {
 public:
  // The index the next item of attempt `attempt` of `task` gets (registering it at
  // its first item).
  int64_t NextIndex(const TaskID& task, int attempt);
  // Item `index` was sent. True: the generator may go on now; false: it pauses, and
  // `resume` runs once it may go on.
  bool MayGoOn(const TaskID& task, int64_t index, int64_t backpressure, std::function<void()> resume);
  // The owner's count of consumed items of attempt `attempt` of `task`.
  void Consumed(const TaskID& task, int attempt, int64_t consumed);
  // Lets a paused generator of `task` go on, and never pause again (its task was
  // cancelled).
  void Wake(const TaskID& task);
  // The task ended: forgets it.
  void Finished(const TaskID& task);
  size_t Size() const;

 private:
  struct Producer {
    int attempt = 0;
    int64_t produced = 0;
    int64_t consumed = 0;
    int64_t backpressure = 0;
    std::function<void()> resume;  // while paused
    bool unpaused = false;         // Wake: never pauses again
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TaskID, Producer, IdHash> producers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
