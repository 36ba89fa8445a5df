// What the task events say about a task (ARCHITECTURE.md §18): its "kind" — the
// type, function, name, actor, resources and placement group it shares with the
// other calls of the same function — described once per batch of events.
#pragma once

#include <string>

#include "absl/hash/hash.h"
#include "protos/gcs.pb.h"

namespace manta {

inline const std::string& ActorIdOf(const rpc::TaskSpec& spec) {
  return spec.type() == rpc::ACTOR_TASK ? spec.actor_task().actor_id() : spec.actor_creation().actor_id();
}

inline size_t TaskKindHash(const rpc::TaskSpec& spec) {
  size_t h = absl::HashOf(static_cast<int>(spec.type()), spec.function_name(), spec.name(), ActorIdOf(spec),
                          spec.placement().placement_group_id(), spec.placement().bundle_index());
  for (const rpc::ResourceQuantity& r : spec.required_resources()) h = absl::HashOf(h, r.name(), r.quantity());
  return h;
}

inline bool SameTaskKind(const rpc::TaskKind& kind, const rpc::TaskSpec& spec) {
  if (kind.type() != spec.type() || kind.function_name() != spec.function_name() || kind.name() != spec.name() ||
      kind.actor_id() != ActorIdOf(spec) || kind.placement_group_id() != spec.placement().placement_group_id() ||
      kind.bundle_index() != spec.placement().bundle_index() ||
      kind.required_resources_size() != spec.required_resources_size()) {
    return false;
  }
  for (int i = 0; i < kind.required_resources_size(); ++i) {
    if (kind.required_resources(i).name() != spec.required_resources(i).name() ||
        kind.required_resources(i).quantity() != spec.required_resources(i).quantity()) {
      return false;
    }
  }
  return true;
}

inline rpc::TaskKind TaskKindOf(const rpc::TaskSpec& spec) {
  rpc::TaskKind kind;
  kind.set_type(spec.type());
  kind.set_function_name(spec.function_name());
  kind.set_name(spec.name());
  kind.set_actor_id(ActorIdOf(spec));
  *kind.mutable_required_resources() = spec.required_resources();
  kind.set_placement_group_id(spec.placement().placement_group_id());
  kind.set_bundle_index(spec.placement().bundle_index());
  return kind;
}

}  // namespace manta
