// CoreWorker: the part of Manta inside every driver and worker process
// (ARCHITECTURE.md §1, §4, §5).
//
// It is handed its loop, its peers' clients and its store connection
// (CoreWorkerParts; CoreWorkerProcess builds the real ones) and owns the process's
// ownership table (ReferenceCounter), its in-process memory store, the task
// manager and the normal and actor task submitters. Parts with one job each:
// ObjectReader (Get and Wait, with recovery of lost copies), ObjectFreer (deleting
// the copies of freed objects), ActorFollower (the state of the actors this
// process calls), and, in a worker, ReplyBatcher (the replies to pushed tasks).
// A worker serves pushed tasks on the thread that calls RunTaskExecutionLoop();
// when the GCS pushes it an actor's creation task it becomes that actor's process
// for good.
//
// Threading: the public methods are thread-safe and called from user threads. The
// loop runs RPC callbacks, lease replies and handlers; task execution in workers
// runs on the thread in RunTaskExecutionLoop(). The reference counter, memory
// store, task manager, submitters and the parts above are thread-safe; everything
// else belongs to the loop. The task path skips the loop because it is
// latency-bound (task_channel.h): a submitting thread pushes to the leased
// worker's socket itself, the worker's execution thread reads pushes and writes
// results itself, and a thread waiting in Get/Wait reads the results of this
// process's tasks itself. Actor calls travel the same way, straight to the
// actor's worker. In an actor with max_concurrency > 1 the execution thread hands
// calls to a pool of that many threads, which run them and send their replies
// themselves. Each thread running a task has its own TaskContext
// (task_context.h); the actor-creation, named-actor and placement group calls wait
// on the loop for the GCS (one round trip; a placement group wait as long as asked).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "protos/core_worker.pb.h"
#include "protos/node_manager.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/loop_call.h"
#include "src/common/id.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/actor_call_order.h"
#include "src/core_worker/actor_follower.h"
#include "src/core_worker/core_worker_parts.h"
#include "src/core_worker/core_worker_types.h"
#include "src/core_worker/driver_output.h"
#include "src/core_worker/memory_releaser.h"
#include "src/core_worker/metrics_reporter.h"
#include "src/core_worker/actor_task_submitter.h"
#include "src/core_worker/actor_thread_pool.h"
#include "src/core_worker/async_actor_loop.h"
#include "src/core_worker/normal_task_submitter.h"
#include "src/core_worker/placement_group_calls.h"
#include "src/core_worker/reference_counter.h"
#include "src/core_worker/reply_batcher.h"
#include "src/core_worker/task_event_reporter.h"
#include "src/core_worker/object_freer.h"
#include "src/core_worker/primary_mover.h"
#include "src/core_worker/object_reader.h"
#include "src/core_worker/rpc_clients.h"
#include "src/task_channel/task_channel.h"
#include "src/core_worker/task_cancels.h"
#include "src/core_worker/task_canceller.h"
#include "src/core_worker/task_context.h"
#include "src/core_worker/stream_producers.h"
#include "src/core_worker/stream_table.h"
#include "src/core_worker/task_manager.h"

namespace manta::gcs {
class GcsSubscriber;
}

namespace manta::core {

class CoreWorker {
 public:
  // `options` has the job id, the raylet's address and the node's ip filled in.
  // Starts following the GCS (on the loop).
  CoreWorker(CoreWorkerOptions options, CoreWorkerParts parts);
  ~CoreWorker();
  CoreWorker(const CoreWorker&) = delete;
  CoreWorker& operator=(const CoreWorker&) = delete;

  // Returns leases and marks the job finished (driver) on the loop, then calls
  // `drain_rpcs` (which cancels what is in flight and lets the loop run the
  // callbacks), then answers every caller still waiting here. Idempotent; the
  // destructor runs it with no drain.
  void Shutdown(const std::function<void()>& drain_rpcs = {});

  // --- Objects (any thread) -------------------------------------------------
  // Stores a value this process owns. The id carries one local reference.
  absl::StatusOr<ObjectID> Put(size_t size, const std::function<void(char*)>& write,
                               const std::vector<ObjectID>& contained_ids);
  // Waits for every object (timeout -1 = forever). DeadlineExceeded on timeout.
  absl::StatusOr<std::vector<ObjectValue>> Get(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
    return reader_->Get(ids, timeout_ms);
  }
  // Calls `ready` once Get of `id` would not wait (ObjectReader::NotifyWhenReady).
  void NotifyWhenReady(const ObjectID& id, std::function<void()> ready) {
    reader_->NotifyWhenReady(id, std::move(ready));
  }
  // Ready flags once `num_objects` are ready or the timeout passes.
  std::vector<bool> Wait(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms,
                         bool fetch_local = false) {
    return reader_->Wait(ids, num_objects, timeout_ms, fetch_local);
  }

  // --- Tasks (any thread) ---------------------------------------------------
  // Submits a normal task; returns the ids of its options.num_returns return objects,
  // each carrying one local reference. With a placement group (options.placement) the
  // task runs in that bundle; when the group is removed (or was never created) its
  // result is a PLACEMENT_GROUP_REMOVED error.
  absl::StatusOr<std::vector<ObjectID>> SubmitTask(const std::string& function_name,
                                                   std::vector<TaskArgInput> args, const TaskOptions& options);

  // --- Actors (any thread) --------------------------------------------------
  // Creates an actor running the factory registered as `factory_name`. Returns once
  // the GCS registered it (one round trip; the factory runs later); calls made before
  // it is up wait for it. A name already taken in the namespace is ALREADY_EXISTS.
  absl::StatusOr<CreatedActor> CreateActor(const std::string& factory_name, std::vector<TaskArgInput> args,
                                           const ActorCreationOptions& options);
  // Calls `method_name` of the actor; returns the result's id carrying one local
  // reference. `handle_object` (when the caller's handle counts references) is kept
  // alive until the call is done.
  absl::StatusOr<ObjectID> SubmitActorTask(const ActorID& actor_id, const std::string& method_name,
                                           std::vector<TaskArgInput> args, const std::string& name, int max_retries,
                                           const std::optional<ObjectID>& handle_object,
                                           const StreamOptions& stream = {});
  // ray::Cancel of the task that returns `id` (semantics: ray/api.h, task_canceller.h).
  // INVALID_ARGUMENT for a Put object, an actor creation, or force on an actor call;
  // NOT_FOUND for an object unknown here. IsCancelled: ray::IsCancelled.
  absl::Status CancelTask(const ObjectID& id, bool force, bool recursive);
  bool IsCancelled() const;
  // Streams (core_worker_streams.cc, stream_table.h). Worker side, in a streaming
  // task: sends `item` to the caller as the next item; true when the generator may go
  // on, false when back-pressure pauses it (`resume` then runs once it may).
  // FAILED_PRECONDITION outside a streaming task.
  absl::StatusOr<bool> StreamYield(ReturnValue item, std::function<void()> resume);
  // Caller side, for the stream whose task returns `end_id`: the next item (its id
  // carries a local reference for the caller), waiting at most `timeout_ms`
  // (StreamTable::WaitNext); NotifyStreamNext runs `ready` once that would not wait.
  absl::StatusOr<StreamTable::Next> StreamNext(const ObjectID& end_id, int64_t timeout_ms);
  void NotifyStreamNext(const ObjectID& end_id, std::function<void()> ready);
  // Kills the actor (ray::ActorHandle::Kill). NOT_FOUND for an unknown actor.
  absl::Status KillActor(const ActorID& actor_id, bool no_restart);
  // A live actor by name in `ray_namespace` (empty: the job's); nullopt when none.
  absl::StatusOr<std::optional<rpc::ActorTableData>> GetNamedActor(const std::string& name,
                                                                   const std::string& ray_namespace);

  // --- Placement groups (any thread; each waits for the GCS, ARCHITECTURE.md §7) ---
  PlacementGroupCalls& placement_groups() { return *placement_groups_; }

  // The job's namespace (a fresh anonymous one unless RayConfig::ray_namespace).
  const std::string& ray_namespace() const { return options_.job_config.ray_namespace(); }
  bool default_actor_detached() const { return options_.job_config.default_actor_detached(); }
  // Worker side: the actor this process runs (nil if none), and whether this run of
  // it is a restart.
  ActorID CurrentActorId() const;
  bool WasCurrentActorRestarted() const;
  // An actor's state as last reported here (tests).
  std::optional<rpc::ActorTableData::ActorState> ActorState(const ActorID& actor_id) const;

  // --- References (any thread) ----------------------------------------------
  void AddLocalReference(const ObjectID& id) { reference_counter_->AddLocalReference(id); }
  void RemoveLocalReference(const ObjectID& id) { reference_counter_->RemoveLocalReference(id); }
  // Serialized rpc::Address of the owner, empty if unknown.
  std::string GetOwnerAddress(const ObjectID& id) const;
  void RegisterBorrowedRef(const ObjectID& id, const std::string& owner_address,
                           std::optional<ObjectID> outer_id);

  // --- Worker mode ----------------------------------------------------------
  // Serves pushed tasks on the calling thread until Exit is requested or the raylet
  // goes away; then stops a threaded actor's pool (the calls that have not started
  // are dropped; the running ones get actor_exit_timeout_ms to finish), sends the
  // last replies and returns true. False when calls were still running then: the
  // process must leave at once (_exit) without destroying this CoreWorker, which
  // they use. REQUIRES: a worker (not a driver).
  bool RunTaskExecutionLoop(TaskExecutor executor);

  // --- Introspection (tests, debugging) -------------------------------------
  const JobID& job_id() const { return options_.job_id; }
  const WorkerID& worker_id() const { return options_.worker_id; }
  const rpc::Address& address() const { return rpc_address_; }
  bool is_driver() const { return options_.is_driver; }
  ReferenceCounter& reference_counter() { return *reference_counter_; }
  MemoryStore& memory_store() { return memory_store_; }
  size_t NumPendingTasks() const { return task_manager_->NumPending(); }
  // Finished tasks whose specs are kept to rebuild their returns (lineage).
  size_t NumLineage() const { return task_manager_->NumLineage(); }
  const std::string& gcs_address() const { return options_.gcs_address; }

  // RPC handlers (loop thread).
  using SendReplyFn = std::function<void(absl::Status)>;
  void HandleGetObjectStatus(const rpc::GetObjectStatusRequest& q, rpc::GetObjectStatusReply* r, SendReplyFn s);
  void HandleWaitForRefRemoved(const rpc::WaitForRefRemovedRequest& request, rpc::WaitForRefRemovedReply* reply,
                               SendReplyFn send_reply);
  void HandleAddObjectLocation(const rpc::AddObjectLocationRequest& q, rpc::AddObjectLocationReply* r, SendReplyFn s);
  void HandleExit(const rpc::ExitRequest& request, rpc::ExitReply* reply, SendReplyFn send_reply);
  void HandleListObjects(const rpc::ListObjectsRequest& request, rpc::ListObjectsReply* reply, SendReplyFn send_reply);
  void HandleCancelTask(const rpc::CancelTaskRequest& request, rpc::CancelTaskReply* reply, SendReplyFn send_reply);
  void HandleRemoteCancelTask(const rpc::RemoteCancelTaskRequest& request, rpc::RemoteCancelTaskReply* reply,
                              SendReplyFn send_reply);
  void HandleStreamConsumed(const rpc::StreamConsumedRequest& request, rpc::StreamConsumedReply* reply,
                            SendReplyFn send_reply);

 private:
  class BorrowerClient;

  // The reference counter, the task manager and the timers that keep memory in check
  // and watch the node's raylet.
  // Task events: the reporter (and a driver's own task).
  void MakeTaskEvents();
  void MakeOwnership();
  // Get and Wait (object_reader.h).
  void MakeReader();
  void MakeSubmitters();
  // The streams this process consumes (owner side of streaming tasks).
  void MakeStreams();
  // A streaming task was submitted: its stream is consumed here.
  void AddStream(const rpc::TaskSpec& spec);
  // Follows the node table and the actors this process calls (GCS pubsub).
  void StartFollowingTheGcs();
  // The task the calling thread runs (its TaskContext), or the process's root task.
  TaskID CurrentTaskId() const;
  // Adds the arguments to `spec`, collecting the ids whose submitted-task references
  // the task holds. INVALID_ARGUMENT for a ref unknown here.
  absl::Status AddArgs(rpc::TaskSpec* spec, std::vector<TaskArgInput>& args, std::vector<ObjectID>* arg_ids);
  // A spec with the fields every task has (ids, one return, and the caller but for
  // normal tasks, whose pushes carry it).
  rpc::TaskSpec NewTaskSpec(rpc::TaskType type, const TaskID& task_id, const TaskID& parent,
                            const std::string& function_name) const;
  // Records a task (normal or actor call) this process owns the return of, and
  // submits it; returns the return's id carrying one local reference.
  ObjectID SubmitOwnedTask(rpc::TaskSpec spec, std::vector<ObjectID> arg_ids);
  // A resolved task goes to its submitter (by type); `submitted_us` as below.
  void Dispatch(rpc::TaskSpec spec, PackedTaskPtr packed, int64_t submitted_us = 0);
  // A task that cannot run because an argument failed with `error`.
  void FailBeforeDispatch(const rpc::TaskSpec& spec, const rpc::ErrorInfo& error);
  // Actors: what the GCS says of an actor this process follows.
  void OnActorState(const rpc::ActorTableData& actor);
  void SendCreateActor(const rpc::TaskSpec& spec);
  // Nodes (core_worker_nodes.cc): a node the GCS declared dead fails every call
  // waiting on it. Loop thread.
  void OnNodeInfo(const rpc::NodeInfo& node);
  void OnNodeDraining(const rpc::NodeInfo& node);
  void RefreshNodes();
  // Whether the GCS declared `node_id` dead. Any thread.
  bool IsNodeDead(const std::string& node_id) const;
  // This process's own node is gone (declared dead, or its raylet exited): every
  // pending task fails with NODE_DIED and `why`, and so does every later one.
  void OnLocalNodeLost(const std::string& why);
  // The error of a task that cannot run because the local node is lost.
  rpc::ErrorInfo LocalNodeLostError() const;
  // The actor could not be created (`why`): tell the GCS so every caller learns it.
  void FailActorCreation(const ActorID& actor_id, const std::string& why);
  // Worker side: an actor call of `spec` may run (its caller's order is kept).
  bool AcceptActorCall(const rpc::TaskSpec& spec, std::string* why);
  void BeginActorCreation(const rpc::TaskSpec& spec);
  void OnActorCreated(const rpc::TaskSpec& spec);
  // Runs one call of a threaded actor on its pool, replying when it finishes.
  void RunOnActorPool(const rpc::TaskSpec& spec, const TaskChannelServer::Push& push,
                      const TaskExecutor& executor, const std::shared_ptr<int>& remaining);
  // Runs one call of an async actor on its loop, replying when it finishes; a
  // coroutine call is started (StartAsyncCall) and finishes when its coroutine does.
  void RunOnAsyncLoop(const rpc::TaskSpec& spec, const TaskChannelServer::Push& push,
                      const TaskExecutor& executor, const std::shared_ptr<int>& remaining);
  void StartAsyncCall(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                      const std::shared_ptr<const rpc::PushTaskRequest>& holder, TaskOutput::Post post,
                      std::function<void(rpc::TaskResult)> reply);
  // The actor called ray::ExitActor(): tell the GCS, then leave the execution loop.
  void ExitCurrentActor(const std::string& method);
  // The next child / put index of that task (per task with a context, else per process).
  uint64_t NextTaskIndex();
  uint64_t NextPutIndex();
  // Resolves owned by-ref arguments of `spec` (`packed`, decoded), then submits.
  // `submitted_us`: the submission not yet recorded (SubmitTime; 0: none), recorded
  // with the dispatch, or alone before a wait or failure (RecordSubmitted).
  void ResolveAndSubmit(rpc::TaskSpec spec, PackedTaskPtr packed, int64_t submitted_us = 0);
  // Owner: `id` has no readable value (`cause`); `stale` is the value whose copy
  // could not be read (null: none). Runs the task that made it again, unless the
  // value changed meanwhile. When that is impossible its value becomes an
  // OBJECT_LOST error; returns false.
  bool RecoverObject(const ObjectID& id, const StoredObjectPtr& stale, const std::string& cause);
  // The reference counter dropped `id` for good (OnObjectFreed), or only its value
  // (FreeValue: out of scope, the entry kept for lineage).
  void OnObjectFreed(const ObjectID& id);
  void FreeValue(const ObjectID& id);
  // A copy of `id` now exists at `raylet_address` (beyond its primary copy): the
  // owner deletes it with the object. Owner side: remembers it (or deletes it at
  // once if the object is already freed). Borrower side: tells the owner.
  void RecordCopy(const ObjectID& id, const NodeID& node_id, const std::string& raylet_address);

  // Worker side of a cancel (core_worker_cancel.cc): the task runs here (its flag
  // set), came and has not started (it never will), or neither (kept: it never starts).
  enum class CancelHere { kRunning, kNotStarted, kNotSeen };
  CancelHere CancelLocally(const TaskID& task_id) ABSL_LOCKS_EXCLUDED(exec_mu_);
  // The owner takes back attempt `attempt` of a normal task it queued here: false
  // when it runs now (left alone), else it never starts here.
  bool StealLocally(const TaskID& task_id, int attempt) ABSL_LOCKS_EXCLUDED(exec_mu_);
  // The result of a task cancelled before it started.
  static rpc::TaskResult CancelledResult(const rpc::TaskSpec& spec);
  // The result of an attempt taken back by its owner (not run).
  static rpc::TaskResult StolenResult(const rpc::TaskSpec& spec);

  // Worker-mode execution.
  void RunPush(const TaskChannelServer::Push& push, const TaskExecutor& executor);
  // Runs task `index` of `push` on this (the execution) thread.
  rpc::TaskResult RunHere(const rpc::TaskSpec& spec, int index, const TaskChannelServer::Push& push,
                          const TaskExecutor& executor);
  rpc::TaskResult ExecuteTask(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                              const std::shared_ptr<const rpc::PushTaskRequest>& holder);
  // ExecuteTask's parts: the refs the task receives are held while it runs; the
  // executor runs on its resolved arguments (released when RunExecutor returns);
  // FinishTask stores the returns and reports the refs still held as borrowed.
  using HeldRefs = std::vector<std::pair<ObjectID, Address>>;
  HeldRefs HoldReceivedRefs(const rpc::TaskSpec& spec);
  TaskOutput RunExecutor(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                         const std::shared_ptr<const rpc::PushTaskRequest>& holder);
  rpc::TaskResult FinishTask(const rpc::TaskSpec& spec, TaskOutput output, const HeldRefs& held);
  // ExecuteTask, timed (run_us, start_unix_us) and shown RUNNING in the task events meanwhile.
  rpc::TaskResult ExecuteTimed(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                               const std::shared_ptr<const rpc::PushTaskRequest>& holder);
  absl::Status ResolveArgs(const rpc::TaskSpec& spec, const std::shared_ptr<const rpc::PushTaskRequest>& holder,
                           std::vector<ObjectValue>* args, rpc::ErrorInfo* error);
  // The task's results: one ReturnObject per return, each holding the error when it failed.
  void StoreReturns(const rpc::TaskSpec& spec, TaskOutput output, rpc::TaskResult* result);
  void StoreReturn(const rpc::TaskSpec& spec, const ObjectID& return_id, ReturnValue value,
                   rpc::ReturnObject* out);

  CoreWorkerOptions options_;
  EventLoop& loop_;
  gcs::GcsServicesInterface& gcs_;
  RayletClientPool& raylets_;
  CoreWorkerClientPool& workers_;
  TaskChannelPool& channels_;
  // Workers: where owners push tasks (read by the execution thread).
  TaskChannelServer* const channel_server_;
  object_store::ObjectStoreClientInterface& store_;
  const Address self_;
  const NodeID node_id_;
  rpc::Address rpc_address_;
  TaskID root_task_id_;

  // Task events (null when task_events_enabled is off); task_events_ is its buffer.
  std::unique_ptr<TaskEventReporter> task_event_reporter_;
  std::unique_ptr<MetricsReporter> metrics_reporter_;  // null without a raylet
  // A driver's workers' output, on its terminal (null unless log_to_driver).
  std::unique_ptr<DriverOutput> driver_output_;
  TaskEventBuffer* task_events_ = nullptr;

  std::unique_ptr<BorrowerClient> borrower_client_;
  std::unique_ptr<ReferenceCounter> reference_counter_;
  MemoryStore memory_store_;
  std::unique_ptr<TaskManager> task_manager_;
  std::unique_ptr<NormalTaskSubmitter> submitter_;
  std::unique_ptr<ActorTaskSubmitter> actor_submitter_;
  std::unique_ptr<TaskCanceller> canceller_;
  std::unique_ptr<PlacementGroupCalls> placement_groups_;
  std::unique_ptr<StreamTable> streams_;  // owner: the streams of the tasks it submitted
  std::atomic<bool> any_stream_{false};   // streams_ was ever used (freed objects skip it)
  StreamProducers producers_;             // worker: the generators it runs
  // Follows the actors this process calls (GCS_ACTOR_CHANNEL, one key per actor),
  // and node deaths (GCS_NODE_INFO_CHANNEL).
  std::unique_ptr<gcs::GcsSubscriber> subscriber_;
  std::unique_ptr<ActorFollower> actors_;
  // Nodes the GCS declared dead (binary ids).
  mutable absl::Mutex nodes_mu_;
  absl::flat_hash_set<std::string> dead_nodes_ ABSL_GUARDED_BY(nodes_mu_);
  std::string local_node_lost_ ABSL_GUARDED_BY(nodes_mu_);  // why, once lost
  std::atomic<bool> node_lost_{false};
  std::unique_ptr<Timer> raylet_watch_timer_;  // the store connection closes with the raylet
  mutable absl::Mutex actors_mu_;
  // Owner: the handle object of each actor it created, and the factory arguments
  // it keeps alive (for restarts) until the actor is DEAD.
  absl::flat_hash_map<ObjectID, ActorID> handle_objects_ ABSL_GUARDED_BY(actors_mu_);
  absl::flat_hash_map<ActorID, std::vector<ObjectID>> creation_args_ ABSL_GUARDED_BY(actors_mu_);

  std::atomic<uint64_t> task_counter_{0};  // children and puts of threads without a TaskContext
  std::atomic<uint64_t> put_counter_{0};
  std::atomic<bool> shut_down_{false};
  ObjectFreer freer_;  // deletes the plasma copies of freed objects
  std::unique_ptr<PrimaryMover> mover_;  // our primary copies off draining nodes
  std::unique_ptr<ObjectReader> reader_;  // Get and Wait
  // Gives the heap back to the OS once a burst of freed objects is over (a loop
  // timer checks; the timer goes before the releaser).
  MemoryReleaser memory_releaser_;
  std::unique_ptr<Timer> release_timer_;

  std::unique_ptr<ReplyBatcher> replies_;  // worker mode: the replies to pushed tasks

  // Worker mode, actors: the actor this worker runs, its calls' order per caller, and
  // the pool of a threaded actor (max_concurrency > 1).
  ActorID actor_id_ ABSL_GUARDED_BY(actors_mu_);  // set by the creation task
  bool actor_restarted_ ABSL_GUARDED_BY(actors_mu_) = false;
  std::atomic<bool> exit_actor_requested_{false};  // ray::ExitActor(): leave once answered
  ActorCallOrder call_order_;  // execution thread
  // Set (under exec_mu_) by the execution thread, which alone reads it unlocked;
  // stopped, never destroyed, when the execution loop ends.
  std::unique_ptr<ActorThreadPool> actor_pool_;
  // An async actor's loop instead (its creation task said so: created_async_actor_).
  std::unique_ptr<AsyncActorLoop> async_loop_;
  bool created_async_actor_ = false;  // execution thread

  // Worker mode: exit requests and what the execution thread is doing.
  absl::Mutex exec_mu_;
  bool exit_requested_ ABSL_GUARDED_BY(exec_mu_) = false;
  // The push the execution thread works on, and its task running now (user code, or
  // resolving its arguments); null when none. Cancels look there.
  const rpc::PushTaskRequest* current_push_ ABSL_GUARDED_BY(exec_mu_) = nullptr;
  int current_index_ ABSL_GUARDED_BY(exec_mu_) = -1;
  TaskContext* running_context_ ABSL_GUARDED_BY(exec_mu_) = nullptr;
  void SetCurrentPush(const rpc::PushTaskRequest* request) ABSL_LOCKS_EXCLUDED(exec_mu_);
  void SetRunningTask(TaskContext* context, int index) ABSL_LOCKS_EXCLUDED(exec_mu_);
  // Cancels owners sent for tasks not running on the execution thread.
  TaskCancels cancels_;
  bool RunsTasksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(exec_mu_);
  bool RunsTasks() ABSL_LOCKS_EXCLUDED(exec_mu_);  // a task or an actor call runs now
};

}  // namespace manta::core
