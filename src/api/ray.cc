// ray::Init / ray::Shutdown, the process-wide runtime slot behind GetRayRuntime(),
// the non-template parts of ray::Get and ray::Wait, and the placement group
// functions (checking what they are given before a runtime sees it).
#include "ray/api.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "src/api/runtime_factory.h"

namespace ray {
namespace internal {
namespace {

// The slot is never destroyed: ObjectRefs in static storage may be destroyed after
// main returns, and a runtime still installed then is simply left alone.
struct RuntimeSlot {
  std::mutex mu;
  std::unique_ptr<RayRuntime> runtime;  // guarded by mu
};
RuntimeSlot& Slot() {
  static RuntimeSlot* const slot = new RuntimeSlot();
  return *slot;
}
// Readable without the lock by every API call on every thread.
std::atomic<RayRuntime*> g_runtime{nullptr};
std::atomic<uint64_t> g_epoch{0};

// Serializes whole Init and Shutdown calls (building a runtime can take seconds).
std::mutex& InitMutex() {
  static std::mutex* const mu = new std::mutex();
  return *mu;
}

// The value of flag `name` given as --name=value, --name value, or with one dash;
// the last occurrence wins.
std::optional<std::string> FindFlag(int argc, char** argv, const std::string& name) {
  std::optional<std::string> value;
  for (int i = 1; i < argc && argv != nullptr; ++i) {
    std::string arg = argv[i] == nullptr ? "" : argv[i];
    for (const std::string& prefix : {"--" + name, "-" + name}) {
      if (arg == prefix && i + 1 < argc && argv[i + 1] != nullptr) {
        value = argv[i + 1];
      } else if (arg.rfind(prefix + "=", 0) == 0) {
        value = arg.substr(prefix.size() + 1);
      }
    }
  }
  return value;
}

std::vector<std::string> SplitNonEmpty(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

bool IsWorkerProcess() {
  const char* mode = std::getenv("MANTA_WORKER_MODE");
  return mode != nullptr && std::string(mode) == "1";
}

}  // namespace

RayConfig ResolveRayConfig(const RayConfig& config, int argc, char** argv) {
  RayConfig resolved = config;
  if (auto v = FindFlag(argc, argv, "ray_address")) resolved.address = *v;
  if (auto v = FindFlag(argc, argv, "ray_redis_password")) resolved.redis_password_ = *v;
  if (auto v = FindFlag(argc, argv, "ray_code_search_path")) resolved.code_search_path = SplitNonEmpty(*v, ':');
  if (auto v = FindFlag(argc, argv, "ray_job_namespace")) resolved.ray_namespace = *v;
  if (auto v = FindFlag(argc, argv, "ray_logs_dir")) resolved.logs_dir = *v;
  if (auto v = FindFlag(argc, argv, "ray_head_args")) resolved.head_args = SplitNonEmpty(*v, ' ');
  if (resolved.address.empty()) {
    const char* env = std::getenv("RAY_ADDRESS");
    if (env != nullptr) resolved.address = env;
  }
  return resolved;
}

RayRuntime* GetRayRuntime() { return g_runtime.load(std::memory_order_acquire); }

uint64_t GetRayRuntimeEpoch() { return g_epoch.load(std::memory_order_acquire); }

void InstallRayRuntime(std::unique_ptr<RayRuntime> runtime) {
  RuntimeSlot& slot = Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.runtime != nullptr) {
    throw RayException("ray::Init: already initialized; call ray::Shutdown() before initializing again");
  }
  slot.runtime = std::move(runtime);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
  g_runtime.store(slot.runtime.get(), std::memory_order_release);
}

std::unique_ptr<RayRuntime> UninstallRayRuntime() {
  RuntimeSlot& slot = Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
  g_runtime.store(nullptr, std::memory_order_release);
  return std::move(slot.runtime);
}

void CheckNoNilIds(const std::vector<std::string>& ids, const char* caller) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty()) {
      throw RayException(std::string(caller) + ": ObjectRef #" + std::to_string(i + 1) +
                         " of the list is nil (default-constructed or moved from)");
    }
  }
}

void CheckResultCount(size_t actual, size_t expected, const char* caller) {
  if (actual != expected) {
    throw RayException(std::string(caller) + ": the runtime returned " + std::to_string(actual) +
                       " results for " + std::to_string(expected) + " objects");
  }
}

std::vector<bool> WaitForIds(const std::vector<std::string>& ids, int num_objects, int timeout_ms,
                             bool fetch_local) {
  RayRuntime* runtime = RequireRuntime("ray::Wait");
  if (num_objects < 1 || static_cast<size_t>(num_objects) > ids.size()) {
    throw RayException("ray::Wait: num_objects is " + std::to_string(num_objects) +
                       " but must be between 1 and the number of objects (" + std::to_string(ids.size()) + ")");
  }
  if (timeout_ms < -1) {
    throw RayException("ray::Wait: timeout_ms is " + std::to_string(timeout_ms) +
                       "; pass -1 to wait without a timeout, or a value >= 0");
  }
  // The runtime sees each object once; duplicates share its answer.
  std::vector<std::string> distinct;
  std::unordered_map<std::string, size_t> position;
  std::vector<size_t> slot_of(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, inserted] = position.emplace(ids[i], distinct.size());
    if (inserted) distinct.push_back(ids[i]);
    slot_of[i] = it->second;
  }
  const int num_distinct = std::min(num_objects, static_cast<int>(distinct.size()));
  std::vector<bool> ready = runtime->Wait(distinct, num_distinct, timeout_ms, fetch_local);
  CheckResultCount(ready.size(), distinct.size(), "ray::Wait");
  std::vector<bool> flags(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) flags[i] = ready[slot_of[i]];
  return flags;
}

void WaitForVoidObject(const std::string& id, int64_t timeout_ms, const char* caller) {
  RayRuntime* runtime = RequireRuntime(caller);
  if (id.empty()) throw RayException(std::string(caller) + ": the ObjectRef is nil (default-constructed or moved from)");
  runtime->Get({id}, timeout_ms);  // throws the object's error, if any
}

}  // namespace internal

void Init(RayConfig& config, int argc, char** argv) {
  std::lock_guard<std::mutex> init_lock(internal::InitMutex());
  if (internal::GetRayRuntime() != nullptr) return;  // as Ray: initialized already
  RayConfig resolved = internal::ResolveRayConfig(config, argc, argv);
  std::unique_ptr<internal::RayRuntime> runtime;
  // A worker started by the cluster always serves tasks, whatever the program's config.
  if (resolved.local_mode && !internal::IsWorkerProcess()) {
    runtime = internal::CreateLocalModeRuntime(resolved);
  } else {
    runtime = internal::CreateNativeRuntime(resolved, argc, argv);
  }
  internal::InstallRayRuntime(std::move(runtime));
}

void Init(RayConfig& config) { Init(config, 0, nullptr); }

void Init() {
  RayConfig config;
  Init(config, 0, nullptr);
}

bool IsInitialized() { return internal::GetRayRuntime() != nullptr; }

void Shutdown() {
  std::lock_guard<std::mutex> init_lock(internal::InitMutex());
  // Destroyed outside the slot's lock: a runtime's destructor may wait for its
  // threads, which may still read the slot.
  std::unique_ptr<internal::RayRuntime> runtime = internal::UninstallRayRuntime();
  runtime.reset();
}

std::string GetNamespace() { return internal::RequireRuntime("ray::GetNamespace")->GetNamespace(); }

void ExitActor() {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::ExitActor");
  if (runtime->CurrentActorId().empty()) {
    throw internal::RayException("ray::ExitActor: this process does not run an actor; call it in an actor's method");
  }
  throw internal::RayIntentionalSystemExitException("ray::ExitActor() was called");
}

bool WasCurrentActorRestarted() {
  internal::RayRuntime* runtime = internal::GetRayRuntime();
  return runtime != nullptr && runtime->WasCurrentActorRestarted();
}

bool IsCancelled() {
  internal::RayRuntime* runtime = internal::GetRayRuntime();
  return runtime != nullptr && runtime->IsCancelled();
}

namespace internal {
void CancelById(const std::string& object_id, bool force, bool recursive) {
  RayRuntime* runtime = RequireRuntime("ray::Cancel");
  if (object_id.empty()) throw RayException("ray::Cancel: the ObjectRef is nil (default-constructed or moved from)");
  runtime->Cancel(object_id, force, recursive);
}

std::string GetNamedActorId(const std::string& name, const std::string& ray_namespace) {
  RayRuntime* runtime = RequireRuntime("ray::GetActor");
  if (name.empty()) throw RayException("ray::GetActor: the actor name is empty");
  return runtime->GetNamedActor(name, ray_namespace);
}

void ThrowMethodNotRegistered(const std::string& method_type) {
  throw RayFunctionNotFound("ActorHandle::Task(f).Remote(): the member function (of type " + method_type +
                            ") is not registered as an actor method; register it with RAY_REMOTE(&Class::Method) "
                            "at namespace scope in a .cc file linked into this program");
}

void ThrowNilActorHandle(const char* caller) {
  throw RayException(std::string(caller) + ": the ActorHandle is empty (default-constructed)");
}
}  // namespace internal

void Get(const ObjectRef<void>& object) { internal::WaitForVoidObject(object.ID(), -1, "ray::Get"); }

void Get(const ObjectRef<void>& object, int timeout_ms) {
  internal::WaitForVoidObject(object.ID(), timeout_ms, "ray::Get");
}

void Get(const std::vector<ObjectRef<void>>& objects) { Get(objects, -1); }

void Get(const std::vector<ObjectRef<void>>& objects, int timeout_ms) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::Get");
  runtime->Get(internal::IdsOf(objects, "ray::Get"), timeout_ms);  // throws the first error, if any
}

// ---------------------------------------------------------------- placement groups

namespace internal {
namespace {

constexpr size_t kPlacementGroupIdBytes = 18;

// Throws RayException naming `caller` unless `id` is a binary placement group id.
void CheckPlacementGroupId(const std::string& id, const char* caller) {
  if (id.size() == kPlacementGroupIdBytes) return;
  throw RayException(std::string(caller) + ": malformed placement group id (" + std::to_string(id.size()) +
                     " bytes; pass the 18-byte binary id of PlacementGroup::GetID(), not its hex)");
}

// Throws RayException naming what is wrong with `options` (and which bundle).
void CheckPlacementGroupOptions(const PlacementGroupCreationOptions& options) {
  const std::string caller = "ray::CreatePlacementGroup";
  const int strategy = static_cast<int>(options.strategy);
  if (strategy < static_cast<int>(PlacementStrategy::PACK) ||
      strategy > static_cast<int>(PlacementStrategy::STRICT_SPREAD)) {
    throw RayException(caller + ": the strategy is " +
                       (options.strategy == PlacementStrategy::UNRECOGNIZED ? "UNRECOGNIZED"
                                                                             : "out of range (" +
                                                                                   std::to_string(strategy) + ")") +
                       "; use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
  }
  if (options.bundles.empty()) throw RayException(caller + ": the bundle list is empty; a group needs a bundle");
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    const std::string bundle = "bundle " + std::to_string(i);
    bool positive = false;
    for (const auto& [name, quantity] : options.bundles[i]) {
      if (name.empty()) throw RayException(caller + ": " + bundle + " names a resource with an empty name");
      if (!std::isfinite(quantity) || quantity < 0) {
        throw RayException(caller + ": " + bundle + " asks for " + std::to_string(quantity) + " of '" + name +
                           "'; quantities must be finite and not negative");
      }
      positive = positive || quantity > 0;
    }
    if (!positive) {
      throw RayException(caller + ": " + bundle + " is empty (no resource with a positive quantity)");
    }
  }
}

PlacementGroup ToPlacementGroup(PlacementGroupInfo info) {
  return PlacementGroup(std::move(info.id), std::move(info.options), info.state);
}

}  // namespace

PlacementOptions CheckedPlacement(const std::string& group_id, size_t num_bundles, int bundle_index,
                                  const char* caller) {
  if (group_id.empty()) {
    throw RayException(std::string(caller) +
                       ": the placement group is empty (default-constructed, or a lookup that found nothing)");
  }
  if (bundle_index < -1 || bundle_index >= static_cast<int64_t>(num_bundles)) {
    throw RayException(std::string(caller) + ": bundle_index " + std::to_string(bundle_index) +
                       " is out of range for placement group " + HexId(group_id) + ", which has " +
                       std::to_string(num_bundles) + " bundle(s): pass 0 to " + std::to_string(num_bundles) +
                       " - 1, or -1 for any bundle");
  }
  return PlacementOptions{group_id, bundle_index};
}

}  // namespace internal

bool PlacementGroup::Wait(int timeout_seconds) {
  if (callback_) return callback_(id_, timeout_seconds);
  internal::RayRuntime* runtime = internal::RequireRuntime("PlacementGroup::Wait");
  if (id_.empty()) {
    throw internal::RayException("PlacementGroup::Wait: the placement group is empty (default-constructed, or a "
                                 "lookup that found nothing)");
  }
  return runtime->WaitPlacementGroupReady(id_, static_cast<int64_t>(std::max(timeout_seconds, 0)) * 1000);
}

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& create_options) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::CreatePlacementGroup");
  internal::CheckPlacementGroupOptions(create_options);
  return internal::ToPlacementGroup(runtime->CreatePlacementGroup(create_options));
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::RemovePlacementGroup");
  internal::CheckPlacementGroupId(placement_group_id, "ray::RemovePlacementGroup");
  runtime->RemovePlacementGroup(placement_group_id);
}

PlacementGroup GetPlacementGroupById(const std::string& id) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::GetPlacementGroupById");
  internal::CheckPlacementGroupId(id, "ray::GetPlacementGroupById");
  std::optional<internal::PlacementGroupInfo> found = runtime->GetPlacementGroupById(id);
  return found ? internal::ToPlacementGroup(std::move(*found)) : PlacementGroup();
}

PlacementGroup GetPlacementGroup(const std::string& name) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::GetPlacementGroup");
  if (name.empty()) throw internal::RayException("ray::GetPlacementGroup: the placement group name is empty");
  std::optional<internal::PlacementGroupInfo> found = runtime->GetPlacementGroupByName(name);
  return found ? internal::ToPlacementGroup(std::move(*found)) : PlacementGroup();
}

std::vector<PlacementGroup> GetAllPlacementGroups() {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::GetAllPlacementGroups");
  std::vector<PlacementGroup> groups;
  for (internal::PlacementGroupInfo& info : runtime->GetAllPlacementGroups()) {
    groups.push_back(internal::ToPlacementGroup(std::move(info)));
  }
  return groups;
}

}  // namespace ray
