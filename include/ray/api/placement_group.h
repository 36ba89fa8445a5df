// ray::PlacementGroup: a set of resource bundles reserved together on the cluster's
// nodes, so that the tasks and actors placed in them are scheduled as a gang
// (Ray-compatible). Created by ray::CreatePlacementGroup (ray/api.h):
//
//   std::vector<std::unordered_map<std::string, double>> bundles{{{"CPU", 1}}, {{"CPU", 1}}};
//   ray::PlacementGroupCreationOptions options{"workers", bundles, ray::PlacementStrategy::SPREAD};
//   ray::PlacementGroup group = ray::CreatePlacementGroup(options);
//   if (!group.Wait(60)) { ... not placed within a minute ... }
//   auto ref = ray::Task(Work).SetPlacementGroup(group, 0).Remote();     // in bundle 0
//   auto actor = ray::Actor(A::Create).SetPlacementGroup(group, -1).Remote();  // any bundle
//   ray::RemovePlacementGroup(group.GetID());
//
// States of a group: PENDING (registered, not placed yet: waiting for resources, or
// infeasible until nodes join), CREATED (every bundle reserved), RESCHEDULING (a node
// holding some of its bundles died; they are being placed again), REMOVED (by
// ray::RemovePlacementGroup or the end of the job that created it: its actors are
// killed, its tasks fail with RayException, its resources are free again).
//
// A PlacementGroup object is a value: its id, the options it was created with, and
// the state it had when the object was made (GetState does not follow the group;
// ray::GetPlacementGroupById reads the current state). Copyable; one object may be
// used from one thread at a time, different objects from any threads.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ray {

// How the bundles of a group are spread over nodes (values as Ray's).
enum class PlacementStrategy {
  PACK = 0,           // on as few nodes as possible (best effort)
  SPREAD = 1,         // on as many nodes as possible (best effort)
  STRICT_PACK = 2,    // all on one node, or the group stays PENDING
  STRICT_SPREAD = 3,  // each on a node of its own, or the group stays PENDING
  UNRECOGNIZED = -1,  // not a strategy: CreatePlacementGroup refuses it
};

enum class PlacementGroupState {
  PENDING = 0,
  CREATED = 1,
  REMOVED = 2,
  RESCHEDULING = 3,
  UNRECOGNIZED = -1,  // not known (a PlacementGroup built without a state)
};

// What a group is made of. An aggregate, fields in Ray's order:
//   ray::PlacementGroupCreationOptions options{name, bundles, ray::PlacementStrategy::PACK};
struct PlacementGroupCreationOptions {
  // Empty: unnamed. Otherwise unique, among groups not REMOVED, in the job's namespace
  // (ray::GetNamespace()); ray::GetPlacementGroup(name) finds it.
  std::string name;
  // One map per bundle: resource name -> quantity (e.g. {{"CPU", 2}, {"GPU", 1}}).
  // Every bundle needs a positive quantity; quantities are finite and not negative.
  std::vector<std::unordered_map<std::string, double>> bundles;
  PlacementStrategy strategy = PlacementStrategy::PACK;
};

class PlacementGroup {
 public:
  // An empty group (Empty() is true): what the lookups return when nothing is found.
  PlacementGroup() = default;
  // `id`: the group's binary id (18 bytes). Built by the API; programs get groups
  // from ray::CreatePlacementGroup and the lookups.
  PlacementGroup(std::string id, PlacementGroupCreationOptions options,
                 PlacementGroupState state = PlacementGroupState::UNRECOGNIZED)
      : id_(std::move(id)), options_(std::move(options)), state_(state) {}

  // The binary id (18 bytes; empty for an empty group), as RemovePlacementGroup and
  // GetPlacementGroupById take it.
  std::string GetID() const { return id_; }
  std::string GetName() const { return options_.name; }
  std::vector<std::unordered_map<std::string, double>> GetBundles() const { return options_.bundles; }
  ray::PlacementStrategy GetStrategy() const { return options_.strategy; }
  // The state when this object was made (PENDING from CreatePlacementGroup on a
  // cluster), not now: ray::GetPlacementGroupById(id).GetState() reads it again.
  PlacementGroupState GetState() const { return state_; }
  bool Empty() const { return id_.empty(); }

  // Blocks until the group is CREATED (returns true) or `timeout_seconds` pass
  // (returns false; a negative timeout counts as 0: just look). Throws RayException
  // when the group is REMOVED, was never created, is empty, or before ray::Init().
  // A GCS restart during the wait is ridden out. Any thread.
  bool Wait(int timeout_seconds);

  // Replaces how Wait waits: Wait(t) returns callback(GetID(), t). (Ray's spelling.)
  void SetWaitCallbak(std::function<bool(const std::string&, int)> callback) { callback_ = std::move(callback); }

 private:
  std::string id_;
  PlacementGroupCreationOptions options_;
  PlacementGroupState state_ = PlacementGroupState::UNRECOGNIZED;
  std::function<bool(const std::string&, int)> callback_;
};

namespace internal {
// The placement of a task or actor (TaskOptions / ActorCreationOptions, in
// ray/api/ray_runtime.h): bundle `bundle_index` of group `group_id`, -1 = any bundle.
// An empty group_id: in no group.
struct PlacementOptions {
  std::string group_id;
  int bundle_index = -1;
};

// The placement in bundle `bundle_index` of the group `group_id` of `num_bundles`
// bundles, checked. Throws RayException naming `caller` for an empty group id, and
// for an index < -1 or >= num_bundles (naming both).
PlacementOptions CheckedPlacement(const std::string& group_id, size_t num_bundles, int bundle_index,
                                  const char* caller);

// What SetPlacementGroup of ray::Task and ray::Actor recorded; checked by Remote.
class PlacementRequest {
 public:
  void Set(const PlacementGroup& group, int bundle_index) {
    set_ = true;
    group_id_ = group.GetID();
    num_bundles_ = group.GetBundles().size();
    bundle_index_ = bundle_index;
  }
  // When a placement was set: writes it, checked, to `out` (throws as CheckedPlacement).
  void Apply(PlacementOptions* out, const char* caller) const {
    if (set_) *out = CheckedPlacement(group_id_, num_bundles_, bundle_index_, caller);
  }

 private:
  bool set_ = false;
  std::string group_id_;
  size_t num_bundles_ = 0;
  int bundle_index_ = -1;
};
}  // namespace internal

}  // namespace ray
