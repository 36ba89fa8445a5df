#include "src/core_worker/reply_batcher.h"

#include <glog/logging.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace manta::core {

void ReplyBatcher::Add(int64_t connection, uint64_t push_id, absl::FunctionRef<void(rpc::PushTaskReply&)> fill) {
  absl::MutexLock lock(&mu_);
  if (unsent_.empty() || unsent_.back().connection != connection || unsent_.back().reply.push_id() != push_id) {
    unsent_.push_back(Unsent{connection, {}});
    unsent_.back().reply.set_push_id(push_id);
    unsent_.back().reply.set_worker_pid(pid_);
  }
  fill(unsent_.back().reply);
}

void ReplyBatcher::Flush() {
  absl::MutexLock lock(&mu_);
  flush_posted_ = false;
  if (unsent_.empty()) return;
  // One write per connection; sent under the mutex so replies never overtake each
  // other.
  std::vector<std::pair<int64_t, std::string>> writes;
  for (const Unsent& unsent : unsent_) {
    if (writes.empty() || writes.back().first != unsent.connection) writes.emplace_back(unsent.connection, "");
    AppendFrame(FrameKind::kReply, unsent.reply, &writes.back().second);
  }
  unsent_.clear();
  for (const auto& [connection, bytes] : writes) {
    if (!server_.Send(connection, bytes)) VLOG(1) << "the owner behind task channel " << connection << " is gone";
  }
}

void ReplyBatcher::FlushSoon() {
  {
    absl::MutexLock lock(&mu_);
    if (flush_posted_) return;
    flush_posted_ = true;
  }
  loop_.PostAfter("CoreWorker.ReportResults", batch_ms_, [this] { Flush(); });
}

}  // namespace manta::core
