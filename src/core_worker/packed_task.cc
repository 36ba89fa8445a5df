#include "src/core_worker/packed_task.h"

#include <glog/logging.h>

namespace manta::core {

PackedTask::PackedTask(const rpc::TaskSpec& spec)
    : task_id_(TaskID::FromBinary(spec.task_id())), attempt_number_(spec.attempt_number()),
      max_retries_(spec.max_retries()), num_returns_(spec.num_returns()), type_(spec.type()) {
  spec.SerializeToString(&bytes_);
}

PackedTaskPtr PackedTask::Pack(const rpc::TaskSpec& spec) { return std::make_shared<const PackedTask>(spec); }

rpc::TaskSpec PackedTask::Unpack() const {
  rpc::TaskSpec spec;
  // The bytes are our own serialization of a valid message.
  CHECK(spec.ParseFromString(bytes_)) << "packed spec of task " << task_id_.Hex() << " does not parse";
  return spec;
}

PackedTaskPtr PackedTask::NextAttempt() const {
  rpc::TaskSpec spec = Unpack();
  spec.set_attempt_number(attempt_number_ + 1);
  return Pack(spec);
}

}  // namespace manta::core
