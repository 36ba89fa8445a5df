// PushBatch and PushProgress: what the task submitters (normal and actor) share about
// one push over the task channel (ARCHITECTURE.md §5 step 5, §6).
//
// A PushBatch collects queued specs into one serialized PushTaskRequest, up to a
// number of tasks and of bytes; a spec that alone is over the byte limit can never be
// sent and is refused (kTooBig) so the caller fails it. PushProgress then follows the push's
// replies: results arrive in one or more replies, the last one marked done; tasks
// still without a result at that point, or when the push fails, are handed back for
// retry or failure.
//
// Threading: a PushBatch belongs to the thread building it; a PushProgress is used
// under its submitter's mutex.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "protos/core_worker.pb.h"
#include "src/common/id.h"
#include "src/core_worker/packed_task.h"
#include "src/task_channel/task_channel.h"

namespace manta::core {

class PushProgress {
 public:
  struct Task {
    TaskID task_id;
    int attempt = 0;
  };
  void Add(const TaskID& task_id, int attempt) {
    tasks_.push_back({task_id, attempt});
    answered_flags_.push_back(false);
  }
  size_t size() const { return tasks_.size(); }
  int64_t unanswered() const { return static_cast<int64_t>(tasks_.size()) - answered_; }

  // A reply arrived (status OK). Returns how many of the push's tasks it answered
  // (results are matched by task id: a threaded actor answers out of order); when it
  // is the last reply, `*without_result` gets the tasks it never answered.
  int64_t OnReply(const rpc::PushTaskReply& reply, std::vector<Task>* without_result) {
    int64_t n = 0;
    for (const rpc::TaskResult& result : reply.results()) {
      const int64_t i = Find(result.task_id());
      if (i < 0) continue;
      answered_flags_[i] = true;
      ++answered_;
      ++n;
    }
    if (reply.done() && unanswered() > 0) {
      std::vector<Task> rest = TakeUnanswered();
      without_result->insert(without_result->end(), rest.begin(), rest.end());
    }
    return n;
  }
  // Whether attempt `attempt` of `task_id` is in the push without a result yet.
  bool Unanswered(const TaskID& task_id, int attempt) const {
    for (size_t i = first_unanswered_; i < tasks_.size(); ++i) {
      if (!answered_flags_[i] && tasks_[i].task_id == task_id && tasks_[i].attempt == attempt) return true;
    }
    return false;
  }
  // The tasks without a result yet, in push order.
  std::vector<Task> UnansweredTasks() const {
    std::vector<Task> out;
    for (size_t i = first_unanswered_; i < tasks_.size(); ++i) {
      if (!answered_flags_[i]) out.push_back(tasks_[i]);
    }
    return out;
  }
  // The push failed: the tasks that had no result yet (afterwards none is left).
  std::vector<Task> TakeUnanswered() {
    std::vector<Task> out;
    for (size_t i = first_unanswered_; i < tasks_.size(); ++i) {
      if (!answered_flags_[i]) out.push_back(tasks_[i]);
      answered_flags_[i] = true;
    }
    answered_ = static_cast<int64_t>(tasks_.size());
    first_unanswered_ = tasks_.size();
    return out;
  }

 private:
  // The index of the unanswered task `task_id` (binary), or -1. Results mostly come
  // in push order: the search starts at the first unanswered task.
  int64_t Find(const std::string& task_id) {
    while (first_unanswered_ < tasks_.size() && answered_flags_[first_unanswered_]) ++first_unanswered_;
    if (task_id.size() != TaskID::kSize) return -1;
    for (size_t i = first_unanswered_; i < tasks_.size(); ++i) {
      if (!answered_flags_[i] && std::memcmp(tasks_[i].task_id.Data(), task_id.data(), TaskID::kSize) == 0) {
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  }

  std::vector<Task> tasks_;
  std::vector<bool> answered_flags_;
  size_t first_unanswered_ = 0;  // every task before it is answered
  int64_t answered_ = 0;
};

// The error of a task too big for any push (`what` names it for the message).
inline rpc::ErrorInfo TooBigForAPush(int64_t spec_bytes, const std::string& what, int64_t max_bytes) {
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_CANCELLED);
  error.set_message(what + " is " + std::to_string(spec_bytes) +
                    " bytes with its inline arguments, over the limit of " + std::to_string(max_bytes) +
                    " for one push");
  return error;
}

// TaskSpec.caller_address (field 4) holding `caller`, serialized: appended to a spec's
// bytes it sets that field (an owner's packed specs leave it out, it is the same for
// all of them).
inline std::string CallerAddressField(const rpc::Address& caller) {
  std::string field;
  const std::string address = caller.SerializeAsString();
  AppendLengthDelimitedHeader(4, address.size(), &field);
  field += address;
  return field;
}

// The request is built in its wire form as tasks are added (the task channel sends
// the bytes and appends the push_id): a packed spec goes in as a copy of its bytes.
class PushBatch {
 public:
  enum class Added { kAdded, kFull, kTooBig };

  PushBatch(const std::string& intended_worker_id, int64_t max_tasks, int64_t max_bytes)
      : max_tasks_(max_tasks), max_bytes_(max_bytes), progress_(std::make_shared<PushProgress>()) {
    AppendLengthDelimitedHeader(1, intended_worker_id.size(), &request_);  // PushTaskRequest.intended_worker_id
    request_ += intended_worker_id;
  }

  // kAdded: `spec` is in the push. kFull: the push is full; `spec` waits for the next
  // one. kTooBig: `spec` alone is over the byte limit.
  Added TryAdd(const rpc::TaskSpec& spec) {
    const size_t size = spec.ByteSizeLong();
    const Added added = Check(TaskID::FromBinary(spec.task_id()), spec.attempt_number(), static_cast<int64_t>(size));
    if (added == Added::kAdded) {
      AppendLengthDelimitedHeader(2, size, &request_);  // PushTaskRequest.tasks
      const size_t offset = request_.size();
      request_.resize(offset + size);
      spec.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(request_.data() + offset));
    }
    return added;
  }
  // The same for a packed spec, with `caller_field` (CallerAddressField) appended.
  Added TryAddPacked(const PackedTask& task, const std::string& caller_field) {
    const size_t size = task.bytes().size() + caller_field.size();
    const Added added = Check(task.task_id(), task.attempt_number(), static_cast<int64_t>(size));
    if (added == Added::kAdded) {
      AppendLengthDelimitedHeader(2, size, &request_);
      request_ += task.bytes();
      request_ += caller_field;
    }
    return added;
  }
  bool empty() const { return size() == 0; }
  int64_t size() const { return static_cast<int64_t>(progress_->size()); }
  int64_t max_bytes() const { return max_bytes_; }
  // The serialized PushTaskRequest (no push_id).
  std::string TakeRequest() { return std::move(request_); }
  const std::shared_ptr<PushProgress>& progress() const { return progress_; }

 private:
  // Whether a spec of `size` bytes fits; when it does, it is counted in (the caller
  // adds it).
  Added Check(const TaskID& task_id, int attempt, int64_t size) {
    if (size > max_bytes_) return Added::kTooBig;
    if (this->size() >= max_tasks_) return Added::kFull;
    if (!empty() && bytes_ + size > max_bytes_) return Added::kFull;
    bytes_ += size;
    progress_->Add(task_id, attempt);
    return Added::kAdded;
  }

  const int64_t max_tasks_;
  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  std::string request_;
  std::shared_ptr<PushProgress> progress_;
};

}  // namespace manta::core
