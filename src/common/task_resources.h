// The resources of a task spec (a list of ResourceQuantity, see protos/common.proto)
// as the map lease requests and scheduling use, and the other way.
#pragma once

#include <google/protobuf/map.h>

#include <string>

#include "protos/common.pb.h"

namespace manta {

inline google::protobuf::Map<std::string, double> ResourceMapOf(const rpc::TaskSpec& spec) {
  google::protobuf::Map<std::string, double> resources;
  for (const rpc::ResourceQuantity& r : spec.required_resources()) resources[r.name()] = r.quantity();
  return resources;
}

// Sets `name` to `quantity` in the spec's resources (replacing an earlier quantity).
inline void SetRequiredResource(rpc::TaskSpec* spec, const std::string& name, double quantity) {
  for (rpc::ResourceQuantity& r : *spec->mutable_required_resources()) {
    if (r.name() == name) {
      r.set_quantity(quantity);
      return;
    }
  }
  rpc::ResourceQuantity* r = spec->add_required_resources();
  r->set_name(name);
  r->set_quantity(quantity);
}

}  // namespace manta
