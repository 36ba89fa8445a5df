// The plain types of the core worker's interface (core_worker.h): how it is
// configured, what the API hands it (arguments, actor options) and what it hands
// back (values, task outputs). Split from core_worker.h to keep headers small.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protos/common.pb.h"
#include "src/common/config.h"
#include "src/common/rpc/auth.h"
#include "src/common/id.h"
#include "src/core_worker/memory_store.h"

namespace manta::core {

struct CoreWorkerOptions {
  bool is_driver = true;
  // Worker: from the MANTA_WORKER_* environment. Driver: job id assigned by the GCS.
  JobID job_id;
  WorkerID worker_id;
  std::string startup_token;  // workers: MANTA_WORKER_STARTUP_TOKEN
  // The address other processes reach this one at. Empty (drivers): the address of
  // the raylet it joins, so a driver on a node of a cluster bound to other machines
  // is reachable as that node is.
  std::string node_ip_address = "127.0.0.1";
  // Where this process listens (its gRPC service, a worker's task channel); empty =
  // node_ip_address. "0.0.0.0" = every interface.
  std::string bind_address;
  std::string gcs_address;
  // Driver: empty = the raylet of the node on this machine, found through the GCS
  // (local_node.h). Worker: given by its raylet.
  std::string raylet_address;
  // Driver: how the raylets start this job's workers.
  rpc::JobConfig job_config;
  std::string driver_entrypoint;
  // Driver: print what the job's workers print (their stdout and stderr), each line
  // prefixed with the worker's pid and node (RayConfig::log_to_driver).
  bool log_to_driver = false;
  Config config;
  // What this process joins the cluster with (the token; TLS material when on).
  // Installed process-wide when the core worker connects (src/common/rpc/auth.h).
  rpc::Credentials credentials;
};

// A readable object value: bytes (in the memory store or mapped from the node's
// object store, kept alive by `holder`), or an error.
struct ObjectValue {
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> holder;
  // Set for error values (the exception to throw); data is then empty.
  StoredObjectPtr error;
};

// One argument as the API hands it to SubmitTask.
struct TaskArgInput {
  bool by_ref = false;
  ObjectID ref;                       // by_ref
  std::string data;                   // by value: serialized bytes
  std::vector<ObjectID> nested_ids;   // refs serialized inside `data`
};

// The most objects one task may return (TaskSpec.num_returns).
inline constexpr int kMaxNumReturns = 1 << 20;

// One value a task function returned, serialized lazily.
struct ReturnValue {
  size_t size = 0;
  std::function<void(char* dst)> write;
  std::vector<ObjectID> contained_ids;
};

// What a task function produced: its values (one per return), or an error.
struct TaskOutput {
  std::vector<ReturnValue> values;
  // The function returns several values (ray::Returns<T>), as many as it chose.
  bool multiple = false;
  bool failed = false;
  rpc::ErrorInfo error;
  // An actor's method called ray::ExitActor(): the actor ends after this call.
  bool exit_actor = false;
  // A creation task: the actor is async (its class has coroutine methods): its calls
  // run concurrently on one thread (AsyncActorLoop).
  bool async_actor = false;
  // An async actor's coroutine call, set instead of the fields above: the core worker
  // calls it on the actor's loop thread with `post` (runs a function later on that
  // thread; the call's coroutine resumes through it) and `done` (called once, on that
  // thread, with the call's output when the coroutine finished).
  using Post = std::function<void(std::function<void()>)>;
  std::function<void(Post post, std::function<void(TaskOutput)> done)> start;
};

// Where a task or actor runs (TaskSpec.placement): in bundle `bundle_index` of
// placement group `group`, or in any of its bundles (-1). A nil group: in none.
struct Placement {
  PlacementGroupID group;
  int bundle_index = -1;
};

// A streaming task (ray::Generator, stream_table.h): its items' back-pressure (<= 0:
// none).
struct StreamOptions {
  bool streaming = false;
  int64_t backpressure_num_objects = 0;
};

// What ray::Task(f) asks for (ARCHITECTURE.md §5).
struct TaskOptions {
  std::string name;  // empty: none
  // Empty: one CPU.
  std::map<std::string, double> resources;
  int max_retries = -1;  // -1: Config::task_max_retries
  // The task's merged, canonical runtime env (src/common/runtime_env.h); empty: none.
  // Only workers started for it run the task.
  std::string runtime_env;
  Placement placement;
  int num_returns = 1;  // ray::Returns<T>: the objects the task returns
  StreamOptions stream;
};

// What ray::Actor(factory) asks for (ARCHITECTURE.md §6).
struct ActorCreationOptions {
  std::string name;           // empty: unnamed
  std::string ray_namespace;  // empty: the job's namespace
  bool detached = false;
  int max_restarts = 0;  // -1: unlimited
  int max_concurrency = 1;
  // Empty: none, to be placed or while it lives (in a placement group's bundle: one
  // of the bundle's CPUs to place it there, none held while it lives).
  std::map<std::string, double> resources;
  std::string class_name;
  // The actor's merged, canonical runtime env (src/common/runtime_env.h); empty: none.
  std::string runtime_env;
  Placement placement;
};

// A new actor: its id, and the object its handles count references on (carrying
// one local reference for the caller's first handle).
struct CreatedActor {
  ActorID actor_id;
  ObjectID handle_object;
};

// Runs a task (worker side). Must not throw; user exceptions become `failed`.
using TaskExecutor = std::function<TaskOutput(const rpc::TaskSpec& spec, const std::vector<ObjectValue>& args)>;

}  // namespace manta::core
