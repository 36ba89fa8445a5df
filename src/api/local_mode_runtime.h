// LocalModeRuntime: the RayRuntime of RayConfig::local_mode — everything in this
// process, no daemons.
//
// Objects live in an in-process table (id → pending / ready bytes / error), counted
// like in a cluster: one reference per live ObjectRef, one per pending task using
// the object as an argument, one per object whose value contains a ref to it. An
// object is freed when its count reaches zero, so a test can check that dropping
// every ref empties the table (NumObjects()).
//
// Tasks run asynchronously on a small thread pool. A task waits (off the pool) for
// its by-ref arguments; if one of them failed, the task is not run and its result is
// that same error. An exception thrown by the function becomes a RayTaskException
// "<function> raised <C++ type>: <what>" for every Get of the result. A pool thread
// that blocks in Get/Wait (a task waiting on a task it submitted) lets the pool grow
// by one thread while tasks are queued, so nested tasks cannot starve the pool.
// Task options (resources, retries) are accepted and ignored.
//
// Runtime envs: the job's (RayConfig::runtime_env) is applied to this process while
// the runtime lives — env_vars set, the current directory changed to working_dir —
// since the driver's process is the only worker; the destructor puts back what it
// replaced. The constructor throws RayRuntimeEnvException when the env cannot be
// applied (working_dir not a directory, a field other than env_vars/working_dir). A
// task or actor whose own SetRuntimeEnv would run it in an env other than the job's
// cannot be honoured in one process: Remote throws RayRuntimeEnvException.
//
// Actors live in this process too: an instance made by the registered factory, with
// a queue of calls run in submission order on the pool, one at a time (or up to
// max_concurrency at once, the pool growing so that each has a thread), never
// before the factory returned. An async actor (coroutine methods) has a thread of its
// own instead, its loop (ActorLoop): its calls start there in order, up to
// max_concurrency at once (1,000 by default), and a coroutine call that awaits lets
// the others run meanwhile, as on a cluster. Names are unique per
// namespace; Kill, Kill(false) with restarts (the factory runs again),
// ray::ExitActor(), WasCurrentActorRestarted and handles going out of scope behave as
// on a cluster; resources and lifetimes are accepted and have no effect here.
//
// ray::Cancel and ray::IsCancelled work as on a cluster (a task not started never
// runs; a running one sees IsCancelled and its result is the cancelled error;
// recursive reaches the tasks it submitted), but for force, which cannot kill a
// thread: the results fail at once and the task, left to run, is ignored.
//
// Placement groups (LocalPlacementGroups) are checked as on a cluster and CREATED at
// once; they reserve nothing. A task or actor placed in a group that is removed or
// unknown fails as on a cluster: the task's result is a RayException naming the
// group, the actor is dead (its calls throw RayActorException). Removing a group
// kills its actors and fails its tasks that have not started; running ones finish.
//
// Threading: every method is thread-safe (one absl::Mutex). The destructor (called
// by ray::Shutdown) drops queued tasks, wakes threads blocked in Get/Wait with a
// RayException and waits until they have left, then joins the pool after the
// running tasks finish.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ray/api/function_manager.h"
#include "ray/api/ray_config.h"
#include "ray/api/ray_runtime.h"
#include "src/api/actor_loop.h"
#include "src/api/exception_util.h"
#include "src/api/local_placement_groups.h"

namespace ray {
namespace internal {

class LocalModeRuntime : public RayRuntime {
 public:
  // Pool size: config.num_cpus when > 0, else the machine's cores (2 to 8).
  explicit LocalModeRuntime(const ray::RayConfig& config);
  ~LocalModeRuntime() override;
  LocalModeRuntime(const LocalModeRuntime&) = delete;
  LocalModeRuntime& operator=(const LocalModeRuntime&) = delete;

  std::string Put(SerializedValue value) override;
  std::vector<ObjectData> Get(const std::vector<std::string>& ids, int64_t timeout_ms) override;
  // One process: every object is local, so fetch_local changes nothing.
  std::vector<bool> Wait(const std::vector<std::string>& ids, int num_objects, int64_t timeout_ms,
                         bool fetch_local) override;
  std::vector<std::string> SubmitTask(const std::string& function_name, std::vector<TaskArgument> args,
                                      const TaskOptions& options) override;
  void AddLocalReference(const std::string& id) override;
  void RemoveLocalReference(const std::string& id) override;
  CreatedActor CreateActor(const std::string& factory_name, std::vector<TaskArgument> args,
                           const ActorCreationOptions& options) override;
  std::string SubmitActorTask(const std::string& actor_id, const std::string& handle_object_id,
                              const std::string& method_name, std::vector<TaskArgument> args,
                              const TaskOptions& options) override;
  void KillActor(const std::string& actor_id, bool no_restart) override;
  std::string GetNamedActor(const std::string& name, const std::string& ray_namespace) override;
  std::string GetNamespace() override { return namespace_; }
  PlacementGroupInfo CreatePlacementGroup(const PlacementGroupCreationOptions& options) override;
  void RemovePlacementGroup(const std::string& group_id) override;
  bool WaitPlacementGroupReady(const std::string& group_id, int64_t timeout_ms) override;
  std::optional<PlacementGroupInfo> GetPlacementGroupById(const std::string& group_id) override;
  std::optional<PlacementGroupInfo> GetPlacementGroupByName(const std::string& name) override;
  std::vector<PlacementGroupInfo> GetAllPlacementGroups() override;
  std::string CurrentActorId() override;
  bool WasCurrentActorRestarted() override;
  std::string GetOwnerAddress(const std::string& id) override;
  void RegisterBorrowedRef(const std::string& id, const std::string& owner_address,
                           const std::string& outer_id) override;
  bool IsLocalMode() const override { return true; }
  // As on a cluster, but force cannot kill the thread: a forced cancel of a running
  // task fails its results at once and the task's result, when it returns, is dropped.
  void Cancel(const std::string& object_id, bool force, bool recursive) override;
  bool IsCancelled() override;
  void NotifyWhenReady(const std::string& object_id, std::function<void()> ready) override;
  // Streams as on a cluster (local_mode_streams.cc); a generator paused by
  // back-pressure keeps its pool thread meanwhile.
  bool StreamYield(SerializedValue item, std::function<void()> resume) override;
  StreamNextResult StreamNext(const std::string& end_id, int64_t timeout_ms) override;
  void NotifyStreamNext(const std::string& end_id, std::function<void()> ready) override;

  // The bytes of a serialized value.
  static std::shared_ptr<const std::string> Materialize(const SerializedValue& value);

  // Objects in the table (pending, ready or failed). For tests.
  size_t NumObjects() const;
  // The reference count of `id`, or -1 when it is not in the table. For tests.
  int64_t ReferenceCount(const std::string& id) const;
  // Threads in the pool (grows when pool threads block). For tests.
  size_t NumThreads() const;
  // Callers inside Get or Wait right now. For tests.
  int NumActiveCalls() const;

  // What GetOwnerAddress returns for every object: this process owns them all.
  static constexpr const char* kOwnerAddress = "local-mode";

 private:
  struct Object {
    enum class State { kPending, kReady, kFailed };
    State state = State::kPending;
    std::shared_ptr<const std::string> bytes;  // when ready
    ErrorKind error_kind = ErrorKind::kOther;  // when failed
    std::string error_message;                 // when failed
    int64_t references = 0;
    std::vector<std::string> contained_ids;  // each holds one reference
  };
  struct Actor;
  struct Task {
    enum class Kind { kFunction, kActorCreation, kActorCall };
    Kind kind = Kind::kFunction;
    std::string function_name;
    std::vector<TaskArgument> args;
    std::vector<std::string> return_ids;  // in order; empty for an actor's creation
    size_t unresolved = 0;                // by-ref arguments still pending
    std::vector<std::string> held_ids;  // references held until the task is done
    std::shared_ptr<Actor> actor;         // for actor creations and calls
    PlacementOptions placement;           // of a function task
    // ray::Cancel: set under mu_, read by the running task without it (IsCancelled).
    std::atomic<bool> cancelled{false};
    bool streaming = false;  // a generator: its items go to streams_[return_ids[0]]
    bool started = false;  // a pool thread took it up
    bool ended = false;    // its returns are complete (a cancel may end it first)
    std::vector<std::weak_ptr<Task>> children;  // the tasks it submitted (recursive cancels)
  };
  struct Actor {
    enum class State { kCreating, kAlive, kDead };
    std::string id;
    std::string name;
    std::string ray_namespace;
    std::string class_name;
    std::string factory_name;
    std::vector<TaskArgument> factory_args;  // kept for restarts
    std::vector<std::string> factory_held;   // references the arguments hold
    int max_restarts = 0;
    int restarts = 0;
    int max_concurrency = 1;
    std::string placement_group_id;  // empty: in no group
    State state = State::kCreating;
    std::shared_ptr<void> instance;
    bool restarted = false;  // the instance came from a restart
    std::string death_message;
    std::deque<std::shared_ptr<Task>> calls;  // in order; a creation first while kCreating
    int running = 0;
    ActorLoop* loop = nullptr;  // an async actor's (in actor_loops_); its calls run there
    std::string Describe() const;
  };

  struct TaskError {
    ErrorKind kind;
    std::string message;
  };
  // A streaming task's items not yet handed out, by its end id (return_ids[0]).
  struct Stream {
    std::deque<std::string> items;  // each holds one reference until handed out
    int64_t consumed = 0;
    int64_t produced = 0;
    int64_t backpressure = 0;
    bool error_given = false;
    bool unpaused = false;         // cancelled, or the consumer left: never pauses again
    std::function<void()> resume;  // the paused generator
    std::vector<std::function<void()>> ready;  // NotifyStreamNext
  };

  std::string NewObjectId(bool is_put) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a reference to every known id (unknown ones are logged and skipped);
  // returns the known ids, whose references the caller must release later.
  std::vector<std::string> AddKnownReferencesLocked(const std::vector<std::string>& ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveReferencesLocked(std::vector<std::string> ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores a result (bytes, or an error when `bytes` is null) and wakes waiters.
  void CompleteLocked(const std::string& id, std::shared_ptr<const std::string> bytes,
                      std::vector<std::string> contained_ids, ErrorKind kind, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueLocked(std::shared_ptr<Task> task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task whose arguments are resolved: to the pool, or its actor's queue.
  void ReadyLocked(std::shared_ptr<Task> task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds references on the task's arguments and counts the pending ones; false (with
  // the result failed) when an argument is unknown.
  bool PrepareArgumentsLocked(const std::shared_ptr<Task>& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the actor's calls that may run now to the pool; fails them once it is dead.
  void PumpActorLocked(Actor& actor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillActorLocked(Actor& actor, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Task> CreationTaskLocked(const std::shared_ptr<Actor>& actor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an actor's task ran: its new state, and the next calls.
  void FinishActorTaskLocked(Task& task, const std::optional<TaskError>& error, bool exit_actor,
                             std::shared_ptr<void> instance) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits on mu_ until `done` or the deadline; a pool thread counts as blocked.
  // Returns false on timeout. Throws RayException when the runtime shuts down.
  bool AwaitLocked(const std::function<bool()>& done, int64_t timeout_ms, const char* caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Object* FindLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Object& FindOrThrowLocked(const std::string& id, const char* caller) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Counts a Get/Wait caller while alive; construct and destroy with mu_ held.
  class ActiveCall {
   public:
    explicit ActiveCall(LocalModeRuntime* runtime) ABSL_EXCLUSIVE_LOCKS_REQUIRED(runtime->mu_)
        : runtime_(runtime) {
      ++runtime_->active_calls_;
    }
    ~ActiveCall() { --runtime_->active_calls_; }

   private:
    LocalModeRuntime* runtime_;
  };


  void ThreadMain();
  // Running a task (local_mode_execution.cc). Execute runs it to its end on this
  // thread; RunOnActorLoop, on an async actor's loop, starts a coroutine call there
  // (its end comes when the coroutine's does) or runs any other call as Execute.
  void Execute(Task& task);
  void RunOnActorLoop(const std::shared_ptr<Task>& task);
  // Before a task runs: false when it was cancelled first (then it is done with).
  bool BeginLocked(Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Its by-ref arguments into `args`, its actor's instance, and the error that keeps
  // it from running, if any.
  std::optional<TaskError> Prepare(const Task& task, std::vector<ObjectData>* args, std::shared_ptr<void>* instance);
  // After it ran: its returns (`bytes`, from `result`) or its error, the references
  // it held, its actor's next calls. `result` must outlive this (its refs).
  void Finish(Task& task, const std::optional<TaskError>& error,
              const std::vector<std::shared_ptr<const std::string>>& bytes, const SerializedValue& result,
              bool exit_actor, std::shared_ptr<void> instance);
  // Marks the calling thread as running `task` while alive (IsCancelled, co_yield,
  // the tasks it submits, CurrentActorId).
  class TaskScope {
   public:
    TaskScope(const LocalModeRuntime* runtime, Task* task);
    ~TaskScope();
    TaskScope(const TaskScope&) = delete;
    TaskScope& operator=(const TaskScope&) = delete;

   private:
    Task* previous_task_;
    const LocalModeRuntime* previous_runtime_;
    const std::string* previous_actor_;
    bool previous_restarted_;
  };
  // Cancels (local_mode_futures.cc): the task is marked, and unless it runs (and
  // `force` is not set) its returns fail now; with `recursive` its children too.
  void CancelLocked(const std::shared_ptr<Task>& task, bool force, bool recursive) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Streams (local_mode_streams.cc): a streaming task was submitted; its end object
  // completed (its waiters go on) or was freed (its items are released); its task
  // was cancelled (a paused generator goes on).
  void AddStreamLocked(Task& task, const TaskOptions& options) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StreamEndedLocked(const std::string& end_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the items never handed out, whose references the caller releases.
  std::vector<std::string> ReleaseStreamLocked(const std::string& end_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpauseStreamLocked(const Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool StreamHasNextLocked(const std::string& end_id, const Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task is submitted: findable by its returns, and a child of the task this thread runs.
  void TrackLocked(const std::shared_ptr<Task>& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Its returns are complete: no longer findable.
  void UntrackLocked(Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The task this thread runs (null: none), and whose it is; the actor whose call (or
  // factory) it is: its id, and whether its instance came from a restart.
  static thread_local Task* tls_task_;
  static thread_local const LocalModeRuntime* tls_task_runtime_;
  static thread_local const std::string* tls_actor_id_;
  static thread_local bool tls_actor_restarted_;
  // The error of a function task whose placement group cannot hold it (any more).
  std::optional<TaskError> PlacementErrorLocked(const std::string& function_name, const PlacementOptions& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills the by-ref entries of `args`; the error of a failed argument, if any.
  std::optional<TaskError> ResolveArgumentsLocked(const Task& task, std::vector<ObjectData>* args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every return of `task` with `kind` and `message`.
  // Does nothing when they are complete already (ended).
  void FailReturnsLocked(Task& task, ErrorKind kind, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the task (no lock held); `bytes` gets one value per return (`result`'s parts
  // for ray::Returns).
  std::optional<TaskError> Run(const Task& task, std::vector<ObjectData>& args, SerializedValue* result,
                               std::vector<std::shared_ptr<const std::string>>* bytes,
                               std::shared_ptr<void>* instance, bool* exit_actor);
  // Inside catch (...): the task's error for the exception in flight (or the actor's
  // exit, for ray::ExitActor); `actor` describes the actor, if any.
  static TaskError ErrorOfCurrentException(const std::string& function_name, const std::string* actor,
                                           bool* exit_actor);
  // Starts a coroutine call of an async actor on its loop (RunOnActorLoop).
  void StartCoroutineCall(const std::shared_ptr<Task>& task, const ActorCoroutineMethod& method,
                          std::vector<ObjectData> args, std::shared_ptr<void> instance);

  // Applies runtime_env_ to this process, remembering what it replaces (constructor).
  void ApplyRuntimeEnvToProcess();
  // Puts back what ApplyRuntimeEnvToProcess replaced (destructor).
  void RestoreProcessEnv();
  // Throws unless a task or actor with `own` env (TaskOptions::serialized_runtime_env)
  // runs in the job's env.
  void CheckSameRuntimeEnv(const std::string& own, const std::string& what) const;

  const size_t base_threads_;
  const std::string id_prefix_;  // random, distinguishes runtimes' ids
  const std::string namespace_;
  // The job's canonical runtime env ("" = none), and what applying it replaced:
  // variables (nullopt: unset before) and the previous current directory.
  const std::string runtime_env_;
  std::vector<std::pair<std::string, std::optional<std::string>>> replaced_env_vars_;
  std::string replaced_cwd_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // an object completed, or shutdown
  absl::CondVar work_;     // a task was queued, or shutdown
  uint64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::shared_ptr<Actor>> actors_ ABSL_GUARDED_BY(mu_);
  // namespace + '\0' + name -> actor id, for live named actors.
  std::unordered_map<std::string, std::string> named_actors_ ABSL_GUARDED_BY(mu_);
  // Handle object id -> actor id: when the object goes, no handle is left.
  std::unordered_map<std::string, std::string> handle_objects_ ABSL_GUARDED_BY(mu_);
  LocalPlacementGroups placement_groups_ ABSL_GUARDED_BY(mu_);
  uint64_t next_actor_ ABSL_GUARDED_BY(mu_) = 0;
  // Tasks waiting for an argument, by the argument's id.
  std::unordered_map<std::string, std::vector<std::shared_ptr<Task>>> waiting_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Task>> queue_ ABSL_GUARDED_BY(mu_);
  // NotifyWhenReady's callbacks, by pending object (run, under mu_, when it completes).
  std::unordered_map<std::string, std::vector<std::function<void()>>> ready_callbacks_ ABSL_GUARDED_BY(mu_);
  // Function tasks and actor calls whose returns are not complete, by return id.
  std::unordered_map<std::string, std::weak_ptr<Task>> tasks_by_return_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  // Async actors' loops; a dead actor's ends once its calls did, and goes at the next
  // CreateActor (or in the destructor).
  std::vector<std::unique_ptr<ActorLoop>> actor_loops_ ABSL_GUARDED_BY(mu_);
  size_t idle_threads_ ABSL_GUARDED_BY(mu_) = 0;
  size_t blocked_threads_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Callers inside Get/Wait; the destructor wakes them and waits until they left.
  int active_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace ray
