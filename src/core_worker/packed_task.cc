#include "src/core_worker/packed_task.h"

#include <glog/logging.h>

#include <new>

namespace manta::core {

PackedTask::PackedTask(const rpc::TaskSpec& spec, uint32_t size)
    : attempt_number_(spec.attempt_number()), max_retries_(spec.max_retries()), num_returns_(spec.num_returns()),
      type_(spec.type()), size_(size), task_id_(TaskID::FromBinary(spec.task_id())) {}

PackedTaskPtr PackedTask::Pack(const rpc::TaskSpec& spec) {
  static_assert(alignof(PackedTask) <= alignof(std::max_align_t));
  const size_t size = spec.ByteSizeLong();
  void* block = ::operator new(sizeof(PackedTask) + size);
  auto* task = new (block) PackedTask(spec, static_cast<uint32_t>(size));
  spec.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(task + 1));
  return PackedTaskPtr(task);
}

void PackedTask::Destroy(PackedTask* task) {
  task->~PackedTask();
  ::operator delete(static_cast<void*>(task));
}

rpc::TaskSpec PackedTask::Unpack() const {
  rpc::TaskSpec spec;
  // The bytes are our own serialization of a valid message.
  CHECK(spec.ParseFromArray(bytes().data(), static_cast<int>(size_)))
      << "packed spec of task " << task_id_.Hex() << " does not parse";
  return spec;
}

PackedTaskPtr PackedTask::NextAttempt() const {
  rpc::TaskSpec spec = Unpack();
  spec.set_attempt_number(attempt_number_ + 1);
  return Pack(spec);
}

}  // namespace manta::core
