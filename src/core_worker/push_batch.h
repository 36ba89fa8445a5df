// PushBatch and PushProgress: what the task submitters (normal and actor) share about
// one push over the task channel (ARCHITECTURE.md §5 step 5, §6).
//
// A PushBatch collects queued specs into one PushTaskRequest, up to a number of tasks
// and of bytes; a spec that alone is over the byte limit can never be sent and is
// refused (kTooBig) so the caller fails it. PushProgress then follows the push's
// replies: results arrive in one or more replies, the last one marked done; tasks
// still without a result at that point, or when the push fails, are handed back for
// retry or failure.
//
// Threading: a PushBatch belongs to the thread building it; a PushProgress is used
// under its submitter's mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "protos/core_worker.pb.h"
#include "src/common/id.h"

namespace manta::core {

class PushProgress {
 public:
  struct Task {
    TaskID task_id;
    int attempt = 0;
  };
  void Add(const TaskID& task_id, int attempt) { tasks_.push_back({task_id, attempt}); }
  size_t size() const { return tasks_.size(); }
  int64_t unanswered() const { return static_cast<int64_t>(tasks_.size()) - answered_; }

  // A reply arrived (status OK). Returns how many of the push's tasks it answered;
  // when it is the last reply, `*without_result` gets the tasks it never answered.
  int64_t OnReply(const rpc::PushTaskReply& reply, std::vector<Task>* without_result) {
    const int64_t n = std::min<int64_t>(reply.results_size(), unanswered());
    answered_ += n;
    if (reply.done() && unanswered() > 0) {
      without_result->insert(without_result->end(), tasks_.begin() + answered_, tasks_.end());
      answered_ = static_cast<int64_t>(tasks_.size());
    }
    return n;
  }
  // The push failed: the tasks that had no result yet (afterwards none is left).
  std::vector<Task> TakeUnanswered() {
    std::vector<Task> out(tasks_.begin() + answered_, tasks_.end());
    answered_ = static_cast<int64_t>(tasks_.size());
    return out;
  }

 private:
  // Results come back in push order, so the first `answered_` tasks are answered.
  std::vector<Task> tasks_;
  int64_t answered_ = 0;
};

// The error of a task too big for any push (`what` names it for the message).
inline rpc::ErrorInfo TooBigForAPush(const rpc::TaskSpec& spec, const std::string& what, int64_t max_bytes) {
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_CANCELLED);
  error.set_message(what + " is " + std::to_string(spec.ByteSizeLong()) +
                    " bytes with its inline arguments, over the limit of " + std::to_string(max_bytes) +
                    " for one push");
  return error;
}

class PushBatch {
 public:
  enum class Added { kAdded, kFull, kTooBig };

  PushBatch(const std::string& intended_worker_id, int64_t max_tasks, int64_t max_bytes)
      : max_tasks_(max_tasks), max_bytes_(max_bytes), progress_(std::make_shared<PushProgress>()) {
    request_.set_intended_worker_id(intended_worker_id);
  }

  // kAdded: `spec` moved into the push (it is left empty). kFull: the push is full;
  // `spec` waits for the next one. kTooBig: `spec` alone is over the byte limit.
  Added TryAdd(rpc::TaskSpec& spec) {
    const Added added = Check(spec, 0);
    if (added == Added::kAdded) request_.add_tasks()->Swap(&spec);
    return added;
  }
  // The same for a spec that stays where it is (shared with the task manager): the
  // push gets a copy, with `caller` as its caller_address (an owner's specs leave
  // it out: it is the same for all of them).
  Added TryAddCopy(const rpc::TaskSpec& spec, const rpc::Address& caller) {
    // The field's tag and length, then the address.
    const int64_t caller_bytes = 2 + static_cast<int64_t>(caller.ByteSizeLong());
    const Added added = Check(spec, caller_bytes);
    if (added == Added::kAdded) {
      rpc::TaskSpec* task = request_.add_tasks();
      *task = spec;
      *task->mutable_caller_address() = caller;
    }
    return added;
  }
  bool empty() const { return request_.tasks_size() == 0; }
  int64_t size() const { return request_.tasks_size(); }
  int64_t max_bytes() const { return max_bytes_; }
  rpc::PushTaskRequest TakeRequest() { return std::move(request_); }
  const std::shared_ptr<PushProgress>& progress() const { return progress_; }

 private:
  // Whether `spec` (with `extra_bytes` more) fits; when it does, it is counted in
  // (the caller adds it).
  Added Check(const rpc::TaskSpec& spec, int64_t extra_bytes) {
    const int64_t size = static_cast<int64_t>(spec.ByteSizeLong()) + extra_bytes;
    if (size > max_bytes_) return Added::kTooBig;
    if (request_.tasks_size() >= max_tasks_) return Added::kFull;
    if (request_.tasks_size() > 0 && bytes_ + size > max_bytes_) return Added::kFull;
    bytes_ += size;
    progress_->Add(TaskID::FromBinary(spec.task_id()), spec.attempt_number());
    return Added::kAdded;
  }

  const int64_t max_tasks_;
  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  rpc::PushTaskRequest request_;
  std::shared_ptr<PushProgress> progress_;
};

}  // namespace manta::core
