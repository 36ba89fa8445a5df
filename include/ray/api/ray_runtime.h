// The seam between the public API templates (ray/api.h) and a runtime.
//
// The templates serialize values with msgpack and talk to the process's runtime only
// through RayRuntime. Two runtimes implement it: the native one (src/api, a core
// worker connected to a cluster) and the local-mode one (everything in-process).
// Object ids cross this seam as binary strings (28 bytes); owner addresses as
// opaque serialized strings. Every method is thread-safe and may be called from any
// user thread. Methods throw the exceptions of ray/api/ray_exception.h.
//
// This header is internal to Manta's API: user code never includes it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ray/api/placement_group.h"

namespace ray {
namespace internal {

// Read-only bytes of an object, kept alive (a heap copy or a mapping of the node's
// shared-memory store) for as long as `holder` is.
struct ObjectData {
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> holder;
  // Added for the task-argument deserializer: the id of the object these bytes are,
  // set by the executing runtime for arguments passed by reference (even when the
  // owner inlined their value); empty for arguments passed by value. Refs found
  // inside the bytes are registered as contained in this object. Get may leave it
  // empty.
  std::string object_id;
};

// A value serialized lazily: `write(dst)` fills exactly `size` bytes, so the runtime
// can place large values straight into shared memory without an intermediate copy.
// `contained_ids` are the ObjectRefs serialized inside the value (nested refs).
//
// Lifetime of `write` (the API templates guarantee this; runtimes rely on it):
// - for Put, `write` reads the caller's value in place: call it before Put returns;
// - for a task argument passed by value, `write` owns a copy of the bytes: it may be
//   called any number of times, on any thread, for as long as the value is kept;
// - for a RemoteFunction's result, `write` owns the result: same as for arguments.
// `write` throws RayException if the value no longer has `size` bytes (it changed
// on another thread while being serialized).
struct SerializedValue {
  size_t size = 0;
  std::function<void(char* dst)> write;
  std::vector<std::string> contained_ids;
  // A function returning ray::Returns<T>: one value per return (size, write and
  // contained_ids above are then unused).
  std::vector<SerializedValue> parts;
  bool multiple = false;
};

// One argument of a remote call: a value, or a reference resolved by the runtime
// (the executing function then receives the referenced object's value).
struct TaskArgument {
  bool by_ref = false;
  std::string object_id;  // when by_ref
  SerializedValue value;  // otherwise
};

struct TaskOptions {
  std::string name;
  // Resource name → quantity. Empty means the default of 1 CPU.
  std::unordered_map<std::string, double> resources;
  // Retries when the worker or node dies; -1 = the runtime default (3 for tasks, 0
  // for actor calls).
  int max_retries = -1;
  // RuntimeEnv::Serialize() of the task's own runtime env; empty when none was set.
  // The runtime merges it over the parent's env (ray/api/runtime_env.h).
  std::string serialized_runtime_env;
  // The placement group bundle the task runs in (SetPlacementGroup, checked against
  // the group's bundles); empty group_id: none.
  PlacementOptions placement;
  // How many objects the task returns (SetNumReturns, for ray::Returns<T>).
  int num_returns = 1;
  // The function returns ray::Generator<T>: the task streams its items
  // (ray/api/generator.h); its one return is the stream's end.
  bool streaming = false;
  // With streaming, > 0: the task pauses while this many of its items are
  // unconsumed (Ray's _generator_backpressure_num_objects); <= 0: never.
  int64_t backpressure_num_objects = -1;
};

// What StreamNext found.
struct StreamNextResult {
  enum class Kind { kItem, kEnd };
  Kind kind = Kind::kEnd;
  // kItem: the item's id, carrying one local reference (adopted by the ObjectRef),
  // or, once, after the items of a stream that failed, the end's id (its Get throws).
  std::string id;
};

// What ray::Actor(factory) was told (ray/api/actor_creator.h).
struct ActorCreationOptions {
  std::string name;           // empty: unnamed
  std::string ray_namespace;  // empty: the job's namespace
  // Resource name → quantity held while the actor lives. Empty: one CPU to place
  // it, none held.
  std::unordered_map<std::string, double> resources;
  int max_restarts = 0;  // -1: unlimited
  int max_concurrency = 1;
  // -1: the job's default (RayConfig::default_actor_lifetime); 0: no; 1: yes.
  int detached = -1;
  // The C++ type of the actor, for listings and messages.
  std::string class_name;
  // As TaskOptions::serialized_runtime_env, for the actor's process.
  std::string serialized_runtime_env;
  // As TaskOptions::placement: the bundle the actor lives in.
  PlacementOptions placement;
};

// A placement group as a runtime reports it: its binary id (18 bytes), what it was
// created with, and its state now.
struct PlacementGroupInfo {
  std::string id;
  PlacementGroupCreationOptions options;
  PlacementGroupState state = PlacementGroupState::UNRECOGNIZED;
};

// A new actor: its id (16 bytes) and the id of the object its handles count
// references on (carrying one local reference, which the first handle adopts).
struct CreatedActor {
  std::string actor_id;
  std::string handle_object_id;
};

// Runs a registered function: deserializes `args` (one per parameter), calls the
// function, and serializes its result. Throws whatever the user function throws;
// the executing runtime turns that into a RayTaskException for the caller.
// Details (ray/api/function_manager.h): a wrong number of args or bytes that do not
// decode as the parameter type throw RayException; refs inside an argument are
// registered (RegisterBorrowedRef) with outer id = that ObjectData's `object_id`;
// a void function's result is msgpack nil (1 byte, 0xc0). Call it on any thread
// while the runtime is installed (refs built while decoding need GetRayRuntime()).
using RemoteFunction = std::function<SerializedValue(const std::vector<ObjectData>& args)>;

class RayRuntime {
 public:
  virtual ~RayRuntime() = default;

  // Stores a value owned by this process; returns its object id. The returned id
  // already carries one local reference, which the ObjectRef built from it adopts
  // (see AdoptLocalReference semantics in ObjectRef).
  virtual std::string Put(SerializedValue value) = 0;

  // Waits for every object (`timeout_ms` -1 = forever) and returns their bytes in
  // order. Throws the exception matching an object's error value, and
  // RayTimeoutException (a RayException) when the timeout passes first.
  virtual std::vector<ObjectData> Get(const std::vector<std::string>& ids, int64_t timeout_ms) = 0;

  // Waits until `num_objects` of `ids` are ready (value or error) or the timeout
  // passes (-1 = forever). Returns one flag per id: ready or not.
  // With `fetch_local`, an object is ready once its value can be read on this node
  // without a transfer (Ray's fetch_local): remote copies of ready objects are pulled.
  virtual std::vector<bool> Wait(const std::vector<std::string>& ids, int num_objects, int64_t timeout_ms,
                                 bool fetch_local) = 0;

  // Submits a task running the function registered as `function_name`. Returns the
  // ids of its `options.num_returns` return objects, in order, each of which (like
  // Put) already carries one local reference.
  // The caller may drop its ObjectRefs to by-ref arguments (and to refs contained in
  // value arguments) as soon as this returns: the runtime keeps those objects alive
  // until the task is done.
  virtual std::vector<std::string> SubmitTask(const std::string& function_name, std::vector<TaskArgument> args,
                                              const TaskOptions& options) = 0;

  // Creates an actor running the factory registered as `factory_name` (arguments as
  // for SubmitTask). Returns at once; calls made meanwhile wait for the actor.
  // Throws RayException when the name is taken in the namespace.
  virtual CreatedActor CreateActor(const std::string& factory_name, std::vector<TaskArgument> args,
                                   const ActorCreationOptions& options) = 0;
  // Calls the method registered as `method_name` on the actor; returns the id of
  // its result (carrying one local reference). `handle_object_id` (may be empty) is
  // the caller's handle reference, kept alive until the call is done.
  virtual std::string SubmitActorTask(const std::string& actor_id, const std::string& handle_object_id,
                                      const std::string& method_name, std::vector<TaskArgument> args,
                                      const TaskOptions& options) = 0;
  // Kills the actor; with no_restart it stays DEAD. Throws for an unknown actor.
  virtual void KillActor(const std::string& actor_id, bool no_restart) = 0;
  // The id of the live actor named `name` in `ray_namespace` (empty: the job's), or
  // empty when there is none.
  virtual std::string GetNamedActor(const std::string& name, const std::string& ray_namespace) = 0;
  // The job's namespace.
  virtual std::string GetNamespace() = 0;

  // Placement groups (ray/api/placement_group.h). Ids are binary (18 bytes); the API
  // has checked their size, the options and the names (ray::CreatePlacementGroup).
  // Registers a group in the job's namespace and returns at once with its id and
  // state (PENDING until placed). Throws RayException when the name is taken there.
  virtual PlacementGroupInfo CreatePlacementGroup(const PlacementGroupCreationOptions& options) = 0;
  // Removes the group; a removed group is fine. Throws RayException for an id never
  // created.
  virtual void RemovePlacementGroup(const std::string& group_id) = 0;
  // True once the group is CREATED, false when `timeout_ms` (>= 0) passes first.
  // Throws RayException when it is removed or unknown.
  virtual bool WaitPlacementGroupReady(const std::string& group_id, int64_t timeout_ms) = 0;
  // The group with this id, or the group not REMOVED named `name` in the job's
  // namespace; nullopt when there is none.
  virtual std::optional<PlacementGroupInfo> GetPlacementGroupById(const std::string& group_id) = 0;
  virtual std::optional<PlacementGroupInfo> GetPlacementGroupByName(const std::string& name) = 0;
  // Every group, removed ones included.
  virtual std::vector<PlacementGroupInfo> GetAllPlacementGroups() = 0;
  // In an actor's process: the actor's id (empty elsewhere), and whether this run
  // of it is a restart.
  virtual std::string CurrentActorId() = 0;
  virtual bool WasCurrentActorRestarted() = 0;

  // ray::Cancel of the task returning `object_id` (ray/api.h has the semantics).
  // Throws RayException for a Put object, an actor's creation, force on an actor
  // call, or an object unknown here.
  virtual void Cancel(const std::string& object_id, bool force, bool recursive) = 0;
  // Whether the task the calling thread runs was cancelled; false elsewhere.
  virtual bool IsCancelled() = 0;

  // Calls `ready` once the object is ready here: Get would return its value (an
  // object stored on another node has been pulled to this one) or throw its error
  // without waiting. Returns at once; `ready` may run before it returns, on this
  // thread, or later on a runtime thread, possibly while the runtime holds locks: it
  // must only hand work to another thread, never call the runtime or block. An id
  // unknown here is ready at once (Get says why). At Shutdown every pending `ready`
  // runs. Must not throw. (For co_await, ray/api/coroutine.h.)
  virtual void NotifyWhenReady(const std::string& object_id, std::function<void()> ready) = 0;

  // Streams (ray/api/generator.h). In a task or actor method returning
  // ray::Generator<T>: sends `item` to the caller as the stream's next item. True
  // when the generator may go on now; false when back-pressure pauses it: `resume`
  // then runs (under the same rules as NotifyWhenReady's `ready`) once it may go on,
  // or its task is cancelled. Throws RayException elsewhere.
  virtual bool StreamYield(SerializedValue item, std::function<void()> resume) = 0;
  // The caller of a streaming task whose end object is `end_id`: its next item,
  // waiting for it at most `timeout_ms` (-1: for ever; RayTimeoutException after it).
  // kEnd once every item (and a failure's error) was handed out. Copies of one
  // generator share the stream: each item goes to one of them.
  virtual StreamNextResult StreamNext(const std::string& end_id, int64_t timeout_ms) = 0;
  // Runs `ready` once StreamNext of `end_id` would not wait (as NotifyWhenReady).
  virtual void NotifyStreamNext(const std::string& end_id, std::function<void()> ready) = 0;

  // ObjectRef copies: one local reference per live ObjectRef in this process.
  // Must not throw (they run in destructors); unknown ids are ignored.
  virtual void AddLocalReference(const std::string& id) = 0;
  virtual void RemoveLocalReference(const std::string& id) = 0;

  // The owner of an object known to this process (serialized into nested refs).
  // Empty when unknown.
  virtual std::string GetOwnerAddress(const std::string& id) = 0;
  // A ref was deserialized: record it as borrowed from `owner_address` (unless this
  // process owns it). `outer_id`, when not empty, is the object it was found in.
  virtual void RegisterBorrowedRef(const std::string& id, const std::string& owner_address,
                                   const std::string& outer_id) = 0;

  // True for the local (single-process) runtime.
  virtual bool IsLocalMode() const = 0;
};

// The runtime of this process, or null before ray::Init() and after ray::Shutdown().
// Safe to call from any thread.
RayRuntime* GetRayRuntime();

// Added for ObjectRef: a number that changes at every ray::Init and ray::Shutdown.
// An ObjectRef remembers the epoch in which it took its local reference and gives
// the reference back only to a runtime of the same epoch, so refs that outlive
// Shutdown (or a later Init) do nothing when destroyed. Safe from any thread.
uint64_t GetRayRuntimeEpoch();

}  // namespace internal
}  // namespace ray
