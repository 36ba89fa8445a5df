// Small helpers shared by the core worker's parts: address conversion between the
// wire form (rpc::Address) and core::Address, "ip:port" strings, error values, and
// a spec's placement.
#pragma once

#include <memory>
#include <string>

#include "protos/common.pb.h"
#include "src/core_worker/core_worker_types.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/reference_counter.h"

namespace manta::core {

inline rpc::Address ToRpc(const Address& a) {
  rpc::Address out;
  out.set_node_id(a.node_id.Binary());
  out.set_ip_address(a.ip);
  out.set_port(a.port);
  out.set_worker_id(a.worker_id.Binary());
  return out;
}

// Malformed ids (wrong sizes from a peer) become nil ids.
inline Address FromRpc(const rpc::Address& a) {
  Address out;
  if (auto n = NodeID::FromBinaryChecked(a.node_id()); n.ok()) out.node_id = *n;
  out.ip = a.ip_address();
  out.port = a.port();
  if (auto w = WorkerID::FromBinaryChecked(a.worker_id()); w.ok()) out.worker_id = *w;
  return out;
}

inline std::string HostPort(const Address& a) { return a.ip + ":" + std::to_string(a.port); }
inline std::string HostPort(const rpc::Address& a) { return a.ip_address() + ":" + std::to_string(a.port()); }

// An error value: every Get of the object throws the exception matching `type`.
inline StoredObjectPtr MakeErrorObject(rpc::ErrorType type, const std::string& message,
                                       const std::string& exception_type = "") {
  auto obj = std::make_shared<StoredObject>();
  obj->error = absl::InternalError(message);
  obj->error_type = type;
  if (!exception_type.empty()) obj->SetExceptionType(exception_type);
  return obj;
}

inline StoredObjectPtr MakeErrorObject(const rpc::ErrorInfo& info) {
  return MakeErrorObject(info.type(), info.message(), info.exception_type());
}

// The value async waiters get when an object is freed before they had it.
inline StoredObjectPtr FreedObject(const ObjectID& id) {
  return MakeErrorObject(rpc::OBJECT_LOST, "object " + id.Hex() + " was freed by its owner (no reference to it is left)");
}

inline rpc::ErrorInfo ToErrorInfo(const StoredObject& obj) {
  rpc::ErrorInfo info;
  info.set_type(static_cast<rpc::ErrorType>(obj.error_type));
  info.set_message(std::string(obj.error.message()));
  info.set_exception_type(obj.exception_type());
  return info;
}

// Sets spec.placement (TaskSpec.placement) from `placement`; nothing for a nil group.
inline void SetPlacement(rpc::TaskSpec* spec, const Placement& placement) {
  if (placement.group.IsNil()) return;
  spec->mutable_placement()->set_placement_group_id(placement.group.Binary());
  spec->mutable_placement()->set_bundle_index(placement.bundle_index);
}

}  // namespace manta::core
