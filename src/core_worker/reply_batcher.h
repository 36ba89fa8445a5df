// ReplyBatcher: a worker's replies to the pushes of its owners, sent in batches
// (ARCHITECTURE.md §5 step 6).
//
// The results of a push's tasks go into one PushTaskReply per (connection, push);
// Flush() writes every queued reply, one write per connection, in the order they
// were queued (an owner relies on a push's results arriving before its last reply).
// The execution thread flushes when it runs out of input; FlushSoon() has the loop
// flush within `batch_ms` (task_reply_batch_ms), so a slow task does not hold back
// the results before it. Thread-safe: a threaded actor's pool threads add and flush too.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/event_loop.h"
#include "src/task_channel/task_channel.h"

namespace manta::core {

class ReplyBatcher {
 public:
  ReplyBatcher(EventLoop& loop, TaskChannelServer& server, int64_t batch_ms)
      : loop_(loop), server_(server), batch_ms_(batch_ms) {}

  // Runs `fill` on the reply to (connection, push_id): the last one queued when it is
  // that push's, else a new one. `fill` runs under the batcher's lock (what it reads
  // and writes for the push is guarded by it too).
  void Add(int64_t connection, uint64_t push_id, absl::FunctionRef<void(rpc::PushTaskReply&)> fill);
  // Sends the queued replies now, from this thread.
  void Flush();
  // Has the loop send them within batch_ms (once per batch).
  void FlushSoon();

 private:
  struct Unsent {
    int64_t connection;
    rpc::PushTaskReply reply;
  };
  EventLoop& loop_;
  TaskChannelServer& server_;
  const int64_t batch_ms_;
  const int pid_ = static_cast<int>(getpid());  // in every reply (task events)
  absl::Mutex mu_;
  std::vector<Unsent> unsent_ ABSL_GUARDED_BY(mu_);
  bool flush_posted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::core
