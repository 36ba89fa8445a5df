// PackedTask: a task's spec as its owner keeps it while the task is pending and while
// its lineage is kept (ARCHITECTURE.md §5 steps 2-5).
//
// The spec is serialized once, at submission, while it is hot in the submitting
// thread's cache; the few fields the owner reads for every task are decoded beside
// the bytes. A small task's rpc::TaskSpec takes about 650 bytes of heap in a dozen
// blocks, its wire form about 110 bytes in one: with a million tasks in flight that
// is most of the owner's memory, and every block is a cache miss when it is freed.
// Pushes carry the bytes as they are (PushBatch::TryAddPacked), with no copy of the
// message; the rare paths that need the whole spec (a retry, a rebuild, arguments to
// resolve again, an error message naming the function) decode it with Unpack.
//
// Immutable once made; shared by pointer to const (the task manager, the submitter's
// queue and the lineage hold one copy per attempt). Any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "protos/common.pb.h"
#include "src/common/id.h"

namespace manta::core {

class PackedTask;
using PackedTaskPtr = std::shared_ptr<const PackedTask>;

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
  const std::string& bytes() const { return bytes_; }
  // Decodes the spec for it: for messages, not for the task path.
  std::string function_name() const { return Unpack().function_name(); }

  // Use Pack (public for make_shared).
  explicit PackedTask(const rpc::TaskSpec& spec);

 private:
  TaskID task_id_;
  int32_t attempt_number_;
  int32_t max_retries_;
  int32_t num_returns_;
  rpc::TaskType type_;
  std::string bytes_;
};

}  // namespace manta::core
