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

std::string_view PackedTask::parent_task_id() const {
  // The wire form: (tag varint, then for a length-delimited field its length varint
  // and bytes). Fields are written in number order, so the scan stops at the first
  // past parent_task_id.
  constexpr uint32_t kParentField = rpc::TaskSpec::kParentTaskIdFieldNumber;
  const std::string_view b = bytes();
  size_t at = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && at < b.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(b[at++]);
      *v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  uint64_t tag = 0, value = 0;
  while (at < b.size() && varint(&tag) && (tag >> 3) <= kParentField) {
    switch (tag & 7) {
      case 0:  // varint
        if (!varint(&value)) return {};
        break;
      case 1:  // fixed64
        at += 8;
        break;
      case 5:  // fixed32
        at += 4;
        break;
      case 2:  // length-delimited
        if (!varint(&value) || value > b.size() - at) return {};
        if ((tag >> 3) == kParentField) return b.substr(at, value);
        at += value;
        break;
      default:
        return {};
    }
  }
  return {};
}

PackedTaskPtr PackedTask::NextAttempt() const {
  rpc::TaskSpec spec = Unpack();
  spec.set_attempt_number(attempt_number_ + 1);
  return Pack(spec);
}

}  // namespace manta::core
