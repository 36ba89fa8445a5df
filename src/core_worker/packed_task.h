// PackedTask: a task's spec as its owner keeps it while the task is pending and while
// its lineage is kept (ARCHITECTURE.md §5 steps 2-5).
//
// The spec is serialized once, at submission, while it is hot in the submitting
// thread's cache; the few fields the owner reads for every task are decoded beside
// the bytes, in the same heap block. A small task's rpc::TaskSpec takes about 650
// bytes of heap in a dozen blocks; packed it takes about 195 in one. With a million
// tasks in flight that is most of the owner's memory, and every block is a cache miss
// when it is freed. Pushes carry the bytes as they are (PushBatch::TryAddPacked),
// with no copy of the message; the rare paths that need the whole spec (a retry, a
// rebuild, arguments to resolve again, an error message naming the function) decode
// it with Unpack.
//
// Immutable once made; shared through PackedTaskPtr, an intrusive reference-counted
// pointer to const (the task manager, the submitter's queue and the lineage hold one
// copy per attempt). Any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "protos/common.pb.h"
#include "src/common/id.h"

namespace manta::core {

class PackedTask;

// Shared ownership of a PackedTask (like std::shared_ptr<const PackedTask>, with the
// count inside the task's own block).
class PackedTaskPtr {
 public:
  PackedTaskPtr() = default;
  PackedTaskPtr(std::nullptr_t) {}  // NOLINT: converts like a pointer
  PackedTaskPtr(const PackedTaskPtr& other) : task_(other.task_) { Ref(); }
  PackedTaskPtr(PackedTaskPtr&& other) noexcept : task_(std::exchange(other.task_, nullptr)) {}
  PackedTaskPtr& operator=(PackedTaskPtr other) noexcept {
    std::swap(task_, other.task_);
    return *this;
  }
  ~PackedTaskPtr() { Unref(); }

  const PackedTask& operator*() const { return *task_; }
  const PackedTask* operator->() const { return task_; }
  explicit operator bool() const { return task_ != nullptr; }

 private:
  friend class PackedTask;
  explicit PackedTaskPtr(PackedTask* task) : task_(task) {}  // takes the first reference
  inline void Ref() const;
  inline void Unref();
  PackedTask* task_ = nullptr;
};

class PackedTask {
 public:
  static PackedTaskPtr Pack(const rpc::TaskSpec& spec);

  // The spec as it was packed.
  rpc::TaskSpec Unpack() const;
  // The same task, attempt_number one higher.
  PackedTaskPtr NextAttempt() const;

  const TaskID& task_id() const { return task_id_; }
  int attempt_number() const { return attempt_number_; }
  int max_retries() const { return max_retries_; }
  int num_returns() const { return num_returns_; }
  rpc::TaskType type() const { return type_; }
  // The serialized rpc::TaskSpec.
  std::string_view bytes() const { return {reinterpret_cast<const char*>(this + 1), size_}; }
  // Decodes the spec for it: for messages, not for the task path.
  std::string function_name() const { return Unpack().function_name(); }
  // The parent task's id bytes (found in the bytes' first fields: a few ns), empty
  // when the spec has none.
  std::string_view parent_task_id() const;

  PackedTask(const PackedTask&) = delete;
  PackedTask& operator=(const PackedTask&) = delete;

 private:
  friend class PackedTaskPtr;
  // Task events (task_event_buffer.h): what the owner recorded of this attempt, kept
  // here, with no lock, until the attempt ends and its row is written; written by
  // whichever thread records it.
  friend class TaskEventBuffer;
  mutable std::atomic<int64_t> event_submitted_us_{0};   // PENDING_ARGS_AVAIL
  mutable std::atomic<int64_t> event_dispatched_us_{0};  // PENDING_NODE_ASSIGNMENT
  mutable std::atomic<int64_t> event_sent_us_{0};        // SUBMITTED_TO_WORKER
  mutable std::atomic<int32_t> event_kind_{-1};          // in the buffer's table of kinds
  // 0; 1: reported in flight (its later states are rows of their own); 2: ended.
  mutable std::atomic<uint8_t> event_state_{0};

  PackedTask(const rpc::TaskSpec& spec, uint32_t size);
  // Frees the block (the bytes follow the object in it).
  static void Destroy(PackedTask* task);

  mutable std::atomic<int32_t> refs_{1};
  int32_t attempt_number_;
  int32_t max_retries_;
  int32_t num_returns_;
  rpc::TaskType type_;
  uint32_t size_;
  TaskID task_id_;
};

inline void PackedTaskPtr::Ref() const {
  if (task_ != nullptr) task_->refs_.fetch_add(1, std::memory_order_relaxed);
}

inline void PackedTaskPtr::Unref() {
  if (task_ != nullptr && task_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) PackedTask::Destroy(task_);
}

}  // namespace manta::core
