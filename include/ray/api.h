// The Manta public API: the one header a program includes. Source-compatible with
// Ray's C++ API.
//
//   #include <ray/api.h>
//
//   int Plus(int a, int b) { return a + b; }
//   RAY_REMOTE(Plus);
//
//   int main(int argc, char** argv) {
//     ray::RayConfig config;
//     ray::Init(config, argc, argv);
//     ray::ObjectRef<int> sum = ray::Task(Plus).Remote(1, ray::Put(2));
//     int three = *sum.Get();  // or *ray::Get(sum)
//     ray::Shutdown();
//   }
//
// Futures: every ObjectRef<T> is pending, ready or failed (ray/api/object_ref.h);
// Get blocks until it is not pending and returns the value or throws the error.
//
// Threads: ray::Init and ray::Shutdown are called by one thread, while no other
// thread uses the API. Between them every other function, ObjectRef and TaskCaller
// may be used from any thread.
//
// Errors: every function here throws ray::internal::RayException (or a subclass,
// ray/api/ray_exception.h) — in particular RayException when called before Init.
//
// Actors: ray::Actor(factory).Remote(args...) creates one and returns its
// ray::ActorHandle<T> (ray/api/actor_creator.h, actor_handle.h); handle.Task(&T::M)
// calls it (ray/api/actor_task_caller.h).
//
// Placement groups: ray::CreatePlacementGroup reserves bundles of resources that
// tasks and actors then run in (SetPlacementGroup; ray/api/placement_group.h).
//
// Runtime environments: ray::RuntimeEnv (ray/api/runtime_env.h) sets env_vars and a
// working_dir for the workers of the job (RayConfig::runtime_env), of a task
// (ray::Task(f).SetRuntimeEnv(env)) or of an actor (ray::Actor(f).SetRuntimeEnv(env)).
//
// Coroutines (Manta): `co_await ref` inside a ray::Coroutine<T> waits without a
// thread; ray::RunAsync / ray::Spawn run coroutines, ray::WhenAll / WhenAny /
// WaitAsync combine awaits (ray/api/coroutine.h).
//
// Worker processes: the cluster runs tasks by starting this same program again as a
// worker; its call to ray::Init() then serves tasks and never returns. Keep work
// that must happen only once (reading input, printing results) after ray::Init().
#pragma once

#include <boost/optional.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ray/api/actor_creator.h"
#include "ray/api/actor_handle.h"
#include "ray/api/actor_task_caller.h"
#include "ray/api/coroutine.h"
#include "ray/api/function_manager.h"
#include "ray/api/logging.h"
#include "ray/api/object_ref.h"
#include "ray/api/object_view.h"
#include "ray/api/placement_group.h"
#include "ray/api/ray_config.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/returns.h"
#include "ray/api/runtime_env.h"
#include "ray/api/serializer.h"
#include "ray/api/task_caller.h"
#include "ray/api/task_options.h"
#include "ray/api/wait_result.h"

namespace ray {

// Connects this process to a cluster as a driver (see RayConfig for where the
// cluster comes from), or, in a worker process, serves tasks and never returns.
// Does nothing when already initialized (as Ray).
// With argc/argv, flags override the config: --ray_address=, --ray_redis_password=,
// --ray_code_search_path= (':'-separated), --ray_job_namespace=, --ray_logs_dir=,
// --ray_head_args= (space-separated); other arguments are ignored. The native
// runtime also uses argv to start workers from this program's binary.
// Throws RayException when the cluster cannot be reached or started. A program may
// Init again after Shutdown.
void Init(RayConfig& config, int argc, char** argv);
void Init(RayConfig& config);
void Init();

// Whether Init succeeded and Shutdown has not been called since.
bool IsInitialized();

// Disconnects (and stops a private cluster Init started). Pending work is
// abandoned; threads blocked in Get/Wait are woken with a RayException. ObjectRefs
// that outlive Shutdown become inert. A no-op when not initialized.
void Shutdown();

// Stores a copy of `obj` in the object store. The returned ref is ready at once.
template <typename T>
ObjectRef<T> Put(const T& obj) {
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::Put");
  // `write` reads obj in place; RayRuntime::Put calls it before returning.
  internal::SerializedValue value = internal::SerializeBorrowed(obj);
  return ObjectRef<T>(runtime->Put(std::move(value)), internal::AdoptReference{});
}

// Blocks until the object is ready and returns a fresh copy of its value. Throws the
// object's error if it failed (RayTaskException when its task threw, ...), and
// RayException for a nil ref or bytes that do not decode as T.
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& object) {
  return internal::GetObject<T>(object.ID(), -1, "ray::Get");
}

// As above, giving up after `timeout_ms` (-1 = forever) with RayTimeoutException.
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& object, int timeout_ms) {
  return internal::GetObject<T>(object.ID(), timeout_ms, "ray::Get");
}


namespace internal {
// Non-template helpers of the functions below (src/api/ray.cc).
// Throws RayException naming `caller` if an id is empty (a nil ObjectRef).
void CheckNoNilIds(const std::vector<std::string>& ids, const char* caller);
// Throws RayException if a runtime returned `actual` results for `expected` ids.
void CheckResultCount(size_t actual, size_t expected, const char* caller);
// ray::Wait on ids: validates the arguments, waits on the distinct ids, and returns
// one ready flag per entry of `ids`.
std::vector<bool> WaitForIds(const std::vector<std::string>& ids, int num_objects, int timeout_ms,
                             bool fetch_local);

// The ids of `objects`, checking none is nil (RayException naming `caller`).
template <typename T>
std::vector<std::string> IdsOf(const std::vector<ObjectRef<T>>& objects, const char* caller) {
  std::vector<std::string> ids;
  ids.reserve(objects.size());
  for (const ObjectRef<T>& object : objects) ids.push_back(object.ID());
  CheckNoNilIds(ids, caller);
  return ids;
}

template <typename T>
std::vector<std::shared_ptr<T>> GetObjectsById(const std::vector<std::string>& ids, int64_t timeout_ms) {
  RayRuntime* runtime = RequireRuntime("ray::Get");
  CheckNoNilIds(ids, "ray::Get");
  std::vector<ObjectData> data = runtime->Get(ids, timeout_ms);
  CheckResultCount(data.size(), ids.size(), "ray::Get");
  std::vector<std::shared_ptr<T>> values;
  values.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    values.push_back(DecodeShared<T>(data[i], ids[i], [&] { return "ray::Get of object " + HexId(ids[i]); }));
  }
  return values;
}

template <typename T>
std::vector<std::shared_ptr<T>> GetObjects(const std::vector<ObjectRef<T>>& objects, int64_t timeout_ms) {
  return GetObjectsById<T>(IdsOf(objects, "ray::Get"), timeout_ms);
}
}  // namespace internal

// Blocks until every object is ready; returns their values in order. Throws the
// error of the first failed object (in list order), as Get of one object does.
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& objects) {
  return internal::GetObjects(objects, -1);
}
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& objects, int timeout_ms) {
  return internal::GetObjects(objects, timeout_ms);
}

// The same for objects named by their ids (ObjectRef<T>::ID() of refs still alive
// in this process): Ray's ray::Get<T>(ids). Throws RayException for an empty id.
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<std::string>& ids) {
  return internal::GetObjectsById<T>(ids, -1);
}

// Waits until void tasks finished; throws the error of the first failed one.
void Get(const ObjectRef<void>& object);
void Get(const ObjectRef<void>& object, int timeout_ms);
void Get(const std::vector<ObjectRef<void>>& objects);
void Get(const std::vector<ObjectRef<void>>& objects, int timeout_ms);

// Waits until `num_objects` of `objects` are ready (a value or an error) or
// `timeout_ms` passes (-1 = forever; 0 = just look), then splits the list into
// ready and unready refs, both in list order. At most `num_objects` distinct objects
// are reported ready; a ref listed twice lands twice in the same list.
// Throws RayException unless 1 <= num_objects <= objects.size() and
// timeout_ms >= -1, and for nil refs. Never throws RayTimeoutException: on timeout
// the not-yet-ready refs are simply in `unready`.
// fetch_local (a Manta addition with Ray Python's name and default): when true, an
// object made on another node counts as ready once a copy has been pulled to this
// node, so reading it next does not wait for a transfer; when false, Wait only
// watches for the objects to be made, and moves no data.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& objects, int num_objects, int timeout_ms,
                   bool fetch_local = true) {
  std::vector<bool> ready =
      internal::WaitForIds(internal::IdsOf(objects, "ray::Wait"), num_objects, timeout_ms, fetch_local);
  WaitResult<T> result;
  for (size_t i = 0; i < objects.size(); ++i) {
    (ready[i] ? result.ready : result.unready).push_back(objects[i]);
  }
  return result;
}

namespace internal {
void CancelById(const std::string& object_id, bool force, bool recursive);
}  // namespace internal

// Cancels the task (or actor call) whose result `object` is, as Ray's ray.cancel:
// - queued, or waiting for its arguments, a worker or its actor: it never runs, and
//   every Get of its results throws RayTaskCancelledException at once;
// - running: it is asked to stop. It sees ray::IsCancelled() return true and may
//   return early; whatever it returns, its results are the cancelled error. With
//   `force` (normal tasks only, not actor calls) its worker process is killed at
//   once; the task is not retried;
// - `recursive`: the tasks it submitted (and theirs) are cancelled too;
// - finished: nothing happens (its result stays).
// Any process holding the ref may cancel (a borrower asks the owner). Returns once
// the cancel is under way, not when the task has stopped. Throws RayException for a
// nil ref, a ref made by ray::Put, an actor's creation (kill the actor instead) and
// force on an actor call.
template <typename T>
void Cancel(const ObjectRef<T>& object, bool force = false, bool recursive = true) {
  internal::CancelById(object.ID(), force, recursive);
}
// Cancels a streaming task (ray/api/generator.h): its generator stops at its next
// co_yield, which throws RayTaskCancelledException.
template <typename T>
void Cancel(const ObjectRefGenerator<T>& stream, bool force = false, bool recursive = true) {
  internal::CancelById(stream.Completed().ID(), force, recursive);
}

// In a task or actor call: whether it was cancelled (ray::Cancel), so that it can
// stop early (Ray's is_canceled). False on threads running no task (a driver, or a
// thread the task started itself).
bool IsCancelled();

// A caller for the remote function `func` (registered with RAY_REMOTE); see
// ray/api/task_caller.h for the options and the argument rules of Remote.
template <typename F>
internal::TaskCaller<F> Task(F func) {
  return internal::TaskCaller<F>(func);
}

// A creator of actors made by `factory` (a free or static function returning T*,
// registered with RAY_REMOTE); see ray/api/actor_creator.h.
template <typename F>
internal::ActorCreator<F> Actor(F factory) {
  return internal::ActorCreator<F>(factory);
}

namespace internal {
// The live actor named `name` in `ray_namespace` (empty: the job's); empty id when
// none. Throws RayException for an empty name or before Init.
std::string GetNamedActorId(const std::string& name, const std::string& ray_namespace);
}  // namespace internal

// A handle of the live (not DEAD) actor named `actor_name` in the job's namespace, or
// in `ray_namespace`; empty when there is none. The handle does not keep the actor
// alive (named actors are not counted). Throws RayException for an empty name.
template <typename T>
boost::optional<ActorHandle<T>> GetActor(const std::string& actor_name) {
  if (actor_name.empty()) return boost::none;  // as Ray: no actor has an empty name
  std::string id = internal::GetNamedActorId(actor_name, "");
  if (id.empty()) return boost::none;
  return ActorHandle<T>(std::move(id), ObjectRef<void>());
}
template <typename T>
boost::optional<ActorHandle<T>> GetActor(const std::string& actor_name, const std::string& ray_namespace) {
  if (actor_name.empty()) return boost::none;
  std::string id = internal::GetNamedActorId(actor_name, ray_namespace);
  if (id.empty()) return boost::none;
  return ActorHandle<T>(std::move(id), ObjectRef<void>());
}

// The namespace of this job (RayConfig::ray_namespace, or a fresh anonymous one),
// the same in the driver, its tasks and its actors.
std::string GetNamespace();

// --- Placement groups (ray/api/placement_group.h) ---------------------------------
// Registers a group of options.bundles placed by options.strategy, named
// options.name (if not empty) in the job's namespace, and returns it at once in
// state PENDING (in local mode CREATED: there is only this process to place it in);
// PlacementGroup::Wait tells when it is CREATED. Throws RayException, naming the
// problem (and the bundle index), for no bundles, a bundle with no positive
// quantity, a negative or non-finite quantity, or strategy UNRECOGNIZED; and when
// the name is taken by a group (not REMOVED) of the namespace.
PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& create_options);

// Removes the group with this id (PlacementGroup::GetID()): its actors are killed,
// its pending and later tasks fail with RayException, its resources are free again.
// Removing a removed group does nothing. Throws RayException for a malformed id (not
// 18 bytes) or one never created.
void RemovePlacementGroup(const std::string& placement_group_id);

// The group with this id, with its current state; an empty PlacementGroup
// (GetID() empty) when there is none. Throws RayException for a malformed id.
PlacementGroup GetPlacementGroupById(const std::string& id);

// The group named `name` in the job's namespace that is not REMOVED, with its
// current state; an empty PlacementGroup when there is none. Throws RayException for
// an empty name.
PlacementGroup GetPlacementGroup(const std::string& name);

// Every placement group of the cluster (in local mode: of this runtime), removed
// ones included, with their current states.
std::vector<PlacementGroup> GetAllPlacementGroups();

// Called in an actor's method: ends the actor. It never returns: it throws
// RayIntentionalSystemExitException (as Ray does), which must leave the method, so do
// not catch it (a catch of RayException or `...` around the call would); the
// method's caller then gets RayActorException, as do all later calls, and the actor
// is not restarted. Throws RayException outside an actor.
[[noreturn]] void ExitActor();

// In an actor: whether this run of it is a restart (its process died before and the
// factory ran again). False outside actors.
bool WasCurrentActorRestarted();

}  // namespace ray
