#include "src/core_worker/core_worker.h"

#include <glog/logging.h>

#include <unistd.h>

#include <chrono>
#include <thread>

#include "src/common/logging.h"
#include "src/common/status_util.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/object_state.h"
#include "src/gcs/gcs_client.h"
#include "src/gcs/gcs_subscriber.h"
#include "src/object_store/store_client.h"
#include "src/common/task_resources.h"

namespace manta::core {

// The owner's channel to borrowers: WaitForRefRemoved over gRPC.
class CoreWorker::BorrowerClient final : public BorrowerClientInterface {
 public:
  explicit BorrowerClient(CoreWorkerClientPool& pool) : pool_(pool) {}
  void WaitForRefRemoved(const Address& borrower, const ObjectID& id, const Address& owner,
                         std::optional<ObjectID> contained_in,
                         std::function<void(absl::Status, std::vector<BorrowedRef>)> done) override {
    rpc::WaitForRefRemovedRequest request;
    if (contained_in) request.set_contained_in_id(contained_in->Binary());
    request.mutable_ref()->set_object_id(id.Binary());
    *request.mutable_ref()->mutable_owner_address() = ToRpc(owner);
    request.set_intended_worker_id(borrower.worker_id.Binary());
    pool_.Get(HostPort(borrower), borrower.node_id.Binary())
        ->WaitForRefRemoved(request, [done](const absl::Status& s, rpc::WaitForRefRemovedReply&& reply) {
          std::vector<BorrowedRef> subs;
          for (const auto& b : reply.sub_borrowers()) {
            auto sub_id = ObjectID::FromBinaryChecked(b.ref().object_id());
            if (sub_id.ok()) subs.push_back(BorrowedRef{*sub_id, FromRpc(b.borrower())});
          }
          done(s, std::move(subs));
        });
  }

 private:
  CoreWorkerClientPool& pool_;
};

// Checks of the memory releaser after which a worker idle since its last task gives
// its heap back (0 for drivers, whose heap is the program's).
int64_t IdleTrimChecks(const CoreWorkerOptions& options) {
  const Config& config = options.config;
  if (options.is_driver || config.worker_idle_trim_ms <= 0) return 0;
  return std::max<int64_t>(1, (config.worker_idle_trim_ms + config.free_memory_check_ms - 1) /
                                  std::max<int64_t>(1, config.free_memory_check_ms));
}

CoreWorker::CoreWorker(CoreWorkerOptions options, CoreWorkerParts parts)
    : options_(std::move(options)),
      loop_(parts.loop),
      gcs_(parts.gcs),
      raylets_(parts.raylets),
      workers_(parts.workers),
      channels_(parts.channels),
      channel_server_(parts.channel_server),
      store_(parts.store),
      self_(parts.self),
      node_id_(parts.self.node_id),
      freer_(parts.loop, parts.store, parts.raylets, options_.raylet_address),
      memory_releaser_(options_.config.free_memory_min_frees, IdleTrimChecks(options_), &MemoryReleaser::TrimHeap) {
  options_.worker_id = self_.worker_id;
  rpc_address_ = ToRpc(self_);
  if (channel_server_ != nullptr) {
    rpc_address_.set_task_port(channel_server_->port());
    replies_ = std::make_unique<ReplyBatcher>(loop_, *channel_server_, options_.config.task_reply_batch_ms);
  }
  root_task_id_ = TaskID::ForDriver(options_.job_id);
  MakeTaskEvents();
  if (!options_.raylet_address.empty()) {
    metrics_reporter_ =
        std::make_unique<MetricsReporter>(loop_, options_.raylet_address, options_.worker_id, options_.config);
  }
  MakeOwnership();
  MakeReader();
  MakeSubmitters();
  MakeStreams();
  StartFollowingTheGcs();
}

CoreWorker::~CoreWorker() { Shutdown(); }

void CoreWorker::MakeTaskEvents() {
  if (!options_.config.task_events_enabled) return;
  TaskEventSource source;
  source.job_id = options_.job_id;
  source.self = TaskExecutorInfo{options_.worker_id, node_id_, static_cast<int>(getpid())};
  source.is_driver = options_.is_driver;
  task_event_reporter_ = std::make_unique<TaskEventReporter>(loop_, gcs_, std::move(source), options_.config);
  task_events_ = &task_event_reporter_->buffer();
  if (options_.is_driver && !options_.job_id.IsNil()) {
    task_event_reporter_->BeginDriverTask(root_task_id_, options_.job_id, program_invocation_short_name);
  }
}

void CoreWorker::MakeOwnership() {
  const Config& config = options_.config;
  borrower_client_ = std::make_unique<BorrowerClient>(workers_);
  reference_counter_ = std::make_unique<ReferenceCounter>(self_, borrower_client_.get());
  reference_counter_->SetOnObjectFreed([this](const ObjectID& id) { OnObjectFreed(id); });
  reference_counter_->SetOnObjectOutOfScope([this](const ObjectID& id) { FreeValue(id); });
  release_timer_ = loop_.RunEvery("CoreWorker.ReleaseMemory", config.free_memory_check_ms,
                                  [this] { memory_releaser_.Check(/*idle=*/!RunsTasks()); });
  raylet_watch_timer_ = loop_.RunEvery("CoreWorker.WatchRaylet", config.raylet_watch_ms, [this] {
    if (store_.PeerClosed()) {
      OnLocalNodeLost("the raylet of this node (" + options_.raylet_address +
                      ") is gone: the node died or was declared dead");
    }
  });
  task_manager_ = std::make_unique<TaskManager>(
      memory_store_, *reference_counter_,
      [this](const PackedTaskPtr& task) {
        loop_.Post("CoreWorker.Resubmit", [this, task] {
          ResolveAndSubmit(task->Unpack(), task, SubmitTime(task_events_));
        });
      },
      config.max_lineage_bytes);
  task_manager_->SetTaskEvents(task_events_);
  // A batch of moved primaries: 64 objects, pulled and pinned, each given the pull's time.
  mover_ = std::make_unique<PrimaryMover>(memory_store_, *reference_counter_, raylets_, freer_, rpc_address_,
                                          4 * config.object_manager_pull_timeout_ms);
  task_manager_->SetOnUnreferencedResult([this](const ObjectID& id, const StoredObjectPtr& value) {
    if (!value->plasma_raylet_address().empty()) freer_.Queue(value->plasma_raylet_address(), {id});
  });
  if (task_event_reporter_ != nullptr) {
    task_event_reporter_->SetInFlight([this](bool all) { task_manager_->ReportInFlight(all); });
  }
}

void CoreWorker::MakeReader() {
  ObjectReader::Hooks hooks;
  hooks.recover = [this](const ObjectID& id, const StoredObjectPtr& stale, const std::string& cause) {
    return RecoverObject(id, stale, cause);
  };
  hooks.record_copy = [this](const ObjectID& id, const NodeID& node_id, const std::string& raylet_address) {
    RecordCopy(id, node_id, raylet_address);
  };
  hooks.is_node_dead = [this](const std::string& node_id) { return IsNodeDead(node_id); };
  reader_ = std::make_unique<ObjectReader>(
      ObjectReader::Parts{loop_, options_.config, memory_store_, *reference_counter_, store_, raylets_, workers_,
                          channels_, freer_},
      std::move(hooks), options_.is_driver, options_.worker_id, options_.raylet_address, node_id_, this);
}

void CoreWorker::MakeSubmitters() {
  const Config& config = options_.config;
  SubmitterOptions submitter_options;
  submitter_options.job_id = options_.job_id;
  submitter_options.self = rpc_address_;
  submitter_options.local_raylet_address = options_.raylet_address;
  submitter_options.max_tasks_in_flight_per_worker = config.max_tasks_in_flight_per_worker;
  submitter_options.max_tasks_per_push = config.max_tasks_per_push;
  submitter_options.max_push_bytes = config.grpc_max_message_bytes / 2;
  submitter_options.lease_idle_ms = config.worker_lease_idle_ms;
  submitter_options.max_pending_lease_requests_per_key = config.max_pending_lease_requests_per_key;
  submitter_options.lease_retry_delay_ms = config.lease_retry_delay_ms;
  submitter_options.max_consecutive_lease_failures = config.max_consecutive_lease_failures;
  submitter_options.pipeline_target_us = config.task_pipeline_target_us;
  submitter_options.steal_after_ms = config.task_steal_after_ms;
  submitter_ = std::make_unique<NormalTaskSubmitter>(loop_, submitter_options, raylets_, channels_, *task_manager_);
  submitter_->SetStealer([this](const rpc::Address& worker, const TaskID& task, int attempt,
                                std::function<void(bool taken)> done) {
    rpc::CancelTaskRequest request;
    request.set_intended_worker_id(worker.worker_id());
    request.set_task_id(task.Binary());
    request.set_steal(true);
    request.set_attempt_number(attempt);
    workers_.Get(HostPort(worker), worker.node_id())
        ->CancelTask(request, [done = std::move(done)](const absl::Status& s, rpc::CancelTaskReply&& reply) {
          done(s.ok() && !reply.running());
        });
  });
  ActorSubmitterOptions actor_options;
  actor_options.self = rpc_address_;
  actor_options.max_tasks_per_push = config.max_tasks_per_push;
  actor_options.max_push_bytes = config.grpc_max_message_bytes / 2;
  actor_submitter_ = std::make_unique<ActorTaskSubmitter>(loop_, actor_options, channels_, *task_manager_,
                                                          [this](const ActorID& id) { actors_->Refresh(id); });
  canceller_ = std::make_unique<TaskCanceller>(loop_, *task_manager_, *submitter_, *actor_submitter_, workers_);
  placement_groups_ = std::make_unique<PlacementGroupCalls>(loop_, gcs_, options_.config, options_.job_id,
                                                            options_.job_config.ray_namespace());
}

void CoreWorker::StartFollowingTheGcs() {
  if (options_.is_driver && options_.log_to_driver && !options_.job_id.IsNil()) {
    driver_output_ = std::make_unique<DriverOutput>(loop_, gcs_, options_.job_id, self_.worker_id, options_.config);
  }
  subscriber_ = std::make_unique<gcs::GcsSubscriber>(
      loop_, gcs_, std::vector<rpc::ChannelType>{rpc::GCS_NODE_INFO_CHANNEL}, options_.config.gcs_pubsub_poll_timeout_ms,
      [this](const rpc::PubMessage& m) {
        if (m.has_actor_message()) OnActorState(m.actor_message());
        if (m.has_node_info_message()) OnNodeInfo(m.node_info_message());
        if (m.has_worker_log_message() && driver_output_ != nullptr) driver_output_->OnBatch(m.worker_log_message());
      },
      [this] {
        // The GCS restarted: messages may have been lost; read every followed actor
        // and the node table again.
        actors_->RefreshAll();
        RefreshNodes();
      });
  actors_ = std::make_unique<ActorFollower>(loop_, gcs_, *subscriber_, options_.gcs_address,
                                            options_.config.actor_state_retry_ms, [this](const rpc::ActorTableData& actor) { OnActorState(actor); });
  loop_.Post("CoreWorker.StartSubscriber", [this] {
    subscriber_->Start();
    if (driver_output_ != nullptr) {
      subscriber_->SubscribeKey(rpc::WORKER_LOG_CHANNEL, options_.job_id.Binary(), [this](absl::Status s) {
        if (!s.ok()) LOG(WARNING) << "workers' output will not be shown here: " << s;
        driver_output_->Followed(s.ok());
      });
    }
  });
}

void CoreWorker::Shutdown(const std::function<void()>& drain_rpcs) {
  if (shut_down_.exchange(true)) return;
  // A driver that submitted nothing has no workers whose last lines could be missing.
  if (driver_output_ != nullptr && task_counter_.load() > 0) driver_output_->Flush();
  actors_->Stop();
  {
    absl::MutexLock lock(&exec_mu_);
    exit_requested_ = true;
  }
  if (channel_server_ != nullptr) channel_server_->Wake();
  RunOnLoopAndWait(
      loop_,
      [this](std::function<void(absl::Status)> done) {
        submitter_->Shutdown();
        actor_submitter_->Shutdown();
        // The last task events go before the job is marked finished.
        auto finish_job = [this, done] {
          if (options_.is_driver && !options_.job_id.IsNil()) {
            gcs_.AsyncMarkJobFinished(options_.job_id.Binary(),
                                      [done](const absl::Status& s, rpc::MarkJobFinishedReply&&) { done(s); });
          } else {
            done(absl::OkStatus());
          }
        };
        auto flush_task_events = [this, finish_job] {
          if (task_event_reporter_ == nullptr) return finish_job();
          task_event_reporter_->FinishAndFlush(finish_job);
        };
        if (metrics_reporter_ == nullptr) return flush_task_events();
        metrics_reporter_->FinishAndFlush(flush_task_events);
      },
      2000)
      .IgnoreError();
  if (metrics_reporter_ != nullptr) {  // (before the others: its callback may still call the GCS)
    metrics_reporter_->CancelAll();
    DrainCallbacks(loop_, [this] { return metrics_reporter_->InFlight(); }, 1000);
  }
  if (drain_rpcs) drain_rpcs();
  // Calls held by our server (owners waiting for us to drop borrowed refs, borrowers
  // waiting for values) are answered now: the server cannot stop before they are.
  reference_counter_->AnswerWaitersAtShutdown();
  streams_->Shutdown();
  memory_store_.ResolveAllAsyncWaiters([](const ObjectID& id) {
    return MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " is shutting down");
  });
}

TaskID CoreWorker::CurrentTaskId() const {
  const TaskContext* context = ScopedTaskContext::Current(this);
  return context != nullptr ? context->task_id : root_task_id_;
}

uint64_t CoreWorker::NextTaskIndex() {
  TaskContext* context = ScopedTaskContext::Current(this);
  return context != nullptr ? context->next_task_index++ : task_counter_.fetch_add(1);
}

uint64_t CoreWorker::NextPutIndex() {
  TaskContext* context = ScopedTaskContext::Current(this);
  return context != nullptr ? context->next_put_index++ : put_counter_.fetch_add(1);
}

std::string CoreWorker::GetOwnerAddress(const ObjectID& id) const {
  auto owner = reference_counter_->GetOwner(id);
  if (!owner.ok()) return "";
  return ToRpc(*owner).SerializeAsString();
}

void CoreWorker::RegisterBorrowedRef(const ObjectID& id, const std::string& owner_address,
                                     std::optional<ObjectID> outer_id) {
  rpc::Address owner;
  if (!owner.ParseFromString(owner_address)) {
    LOG(WARNING) << "a deserialized ref to " << id.Hex() << " carries a malformed owner address";
    return;
  }
  reference_counter_->AddBorrowedObject(id, FromRpc(owner), outer_id);
}

// ---------------------------------------------------------------------------
// Tasks (owner side)

absl::Status CoreWorker::AddArgs(rpc::TaskSpec* spec, std::vector<TaskArgInput>& args,
                                 std::vector<ObjectID>* arg_ids) {
  for (TaskArgInput& in : args) {
    rpc::TaskArg* arg = spec->add_args();
    if (in.by_ref) {
      auto owner = reference_counter_->GetOwner(in.ref);
      if (!owner.ok()) {
        return absl::InvalidArgumentError("argument ObjectRef " + in.ref.Hex() +
                                          " is unknown to this process (was it created by another driver?)");
      }
      arg->set_is_ref(true);
      arg->mutable_ref()->set_object_id(in.ref.Binary());
      *arg->mutable_ref()->mutable_owner_address() = ToRpc(*owner);
      arg_ids->push_back(in.ref);
    } else {
      arg->set_data(std::move(in.data));
      for (const ObjectID& nested : in.nested_ids) {
        auto owner = reference_counter_->GetOwner(nested);
        if (!owner.ok()) continue;
        rpc::ObjectReference* ref = arg->add_nested_refs();
        ref->set_object_id(nested.Binary());
        *ref->mutable_owner_address() = ToRpc(*owner);
        arg_ids->push_back(nested);
      }
    }
  }
  return absl::OkStatus();
}

rpc::TaskSpec CoreWorker::NewTaskSpec(rpc::TaskType type, const TaskID& task_id, const TaskID& parent,
                                      const std::string& function_name) const {
  rpc::TaskSpec spec;
  spec.set_type(type);
  spec.set_task_id(task_id.Binary());
  spec.set_job_id(options_.job_id.Binary());
  spec.set_parent_task_id(parent.Binary());
  // Normal tasks leave the caller out: the submitter adds it to each push (one
  // address copy less per pending task and per kept lineage record).
  if (type != rpc::NORMAL_TASK) *spec.mutable_caller_address() = rpc_address_;
  spec.set_function_name(function_name);
  spec.set_num_returns(1);
  return spec;
}

ObjectID CoreWorker::SubmitOwnedTask(rpc::TaskSpec spec, std::vector<ObjectID> arg_ids) {
  const TaskID task_id = TaskID::FromBinary(spec.task_id());
  ObjectID return_id = ObjectID::FromIndex(task_id, 1);
  // The task holds its arguments once (through its first return's record).
  reference_counter_->AddOwnedTaskReturn(return_id, arg_ids);
  for (int i = 2; i <= spec.num_returns(); ++i) reference_counter_->AddOwnedTaskReturn(ObjectID::FromIndex(task_id, i), {});
  // Packed once, while hot; shared by the task manager and the submitter.
  const int64_t submitted_us = SubmitTime(task_events_);
  PackedTaskPtr packed = PackedTask::Pack(spec);
  if (spec.streaming()) AddStream(spec);
  task_manager_->AddPendingTask(packed, std::move(arg_ids));
  // On this thread: when a worker (or the actor) has room the task goes to its socket now.
  ResolveAndSubmit(std::move(spec), std::move(packed), submitted_us);
  return return_id;
}

absl::StatusOr<std::vector<ObjectID>> CoreWorker::SubmitTask(const std::string& function_name,
                                                             std::vector<TaskArgInput> args,
                                                             const TaskOptions& options) {
  if (options.num_returns < 1 || options.num_returns > kMaxNumReturns) {
    return absl::InvalidArgumentError("a task returns 1 to " + std::to_string(kMaxNumReturns) + " objects, not " +
                                      std::to_string(options.num_returns));
  }
  TaskID parent = CurrentTaskId();
  TaskID task_id = TaskID::ForNormalTask(options_.job_id, parent, NextTaskIndex());
  rpc::TaskSpec spec = NewTaskSpec(rpc::NORMAL_TASK, task_id, parent, function_name);
  spec.set_max_retries(options.max_retries < 0 ? static_cast<int>(options_.config.task_max_retries)
                                               : options.max_retries);
  if (!options.name.empty()) spec.set_name(options.name);
  for (const auto& [resource, quantity] : options.resources) SetRequiredResource(&spec, resource, quantity);
  if (!options.runtime_env.empty()) spec.set_runtime_env(options.runtime_env);
  SetPlacement(&spec, options.placement);
  std::vector<ObjectID> arg_ids;
  MANTA_RETURN_IF_ERROR(AddArgs(&spec, args, &arg_ids));
  spec.set_num_returns(options.num_returns);
  spec.set_streaming(options.stream.streaming);
  spec.set_backpressure_num_objects(options.stream.backpressure_num_objects);
  std::vector<ObjectID> returns{SubmitOwnedTask(std::move(spec), std::move(arg_ids))};
  for (int i = 2; i <= options.num_returns; ++i) returns.push_back(ObjectID::FromIndex(task_id, i));
  return returns;
}

void CoreWorker::ResolveAndSubmit(rpc::TaskSpec spec, PackedTaskPtr packed, int64_t submitted_us) {
  // Inlined values go into `spec` and a new packed copy, which the task manager
  // keeps from then on: a retry, or a rebuild from lineage, carries the values too,
  // so it never needs them again once they are freed.
  bool inlined = false;
  for (int i = 0; i < spec.args_size(); ++i) {
    const rpc::TaskArg& arg = spec.args(i);
    if (!arg.is_ref() || !arg.data().empty() || arg.ref().object_id().empty()) continue;
    ObjectID id = ObjectID::FromBinary(arg.ref().object_id());
    if (!reference_counter_->IsOwnedByUs(id)) continue;  // the worker asks the owner
    StoredObjectPtr value = memory_store_.GetIfExists(id);
    if (!value) {
      // Pending (its task runs): wait below. Otherwise its value was freed while only
      // lineage kept it (a task being run again needs it again): rebuild it first.
      RecoverObject(id, nullptr, "needed again as an argument of " + spec.function_name());
      value = memory_store_.GetIfExists(id);  // arrived meanwhile, or an error if it cannot be rebuilt
    }
    if (!value) {
      // Wait for this dependency, then look at the spec again (only the packed copy
      // waits: a tree of pending tasks holds no decoded specs).
      RecordSubmitted(task_events_, spec, *packed, &submitted_us);
      memory_store_.GetAsync(id, [this, packed](StoredObjectPtr) {
        loop_.Post("CoreWorker.DependencyReady", [this, packed] {
          rpc::TaskSpec spec = packed->Unpack();
          // Cancelled (or failed) meanwhile: it does not run. (An actor's creation is
          // not a pending task.)
          if (spec.type() != rpc::ACTOR_CREATION_TASK && !task_manager_->ShouldRun(packed->task_id())) {
            if (spec.type() == rpc::ACTOR_TASK) {
              actor_submitter_->Drop(ActorID::FromBinary(spec.actor_task().actor_id()),
                                     spec.actor_task().sequence_number());
            }
            return;
          }
          ResolveAndSubmit(std::move(spec), packed);
        });
      });
      return;
    }
    if (!value->error.ok()) {
      // A failed dependency fails the task with the same error.
      RecordSubmitted(task_events_, spec, *packed, &submitted_us);
      FailBeforeDispatch(spec, ToErrorInfo(*value));
      return;
    }
    if (!value->in_plasma) {
      rpc::TaskArg* resolved = spec.mutable_args(i);
      resolved->set_data(value->data);
      resolved->set_metadata(value->metadata);
      inlined = true;
    }
  }
  // (An actor call too: its submitter sends the packed bytes.)
  if (inlined) {
    packed = PackedTask::Pack(spec);
    task_manager_->ArgumentsInlined(packed);  // (its task events' stamps too)
  }
  Dispatch(std::move(spec), std::move(packed), submitted_us);
}

void CoreWorker::Dispatch(rpc::TaskSpec spec, PackedTaskPtr packed, int64_t submitted_us) {
  if (node_lost_.load(std::memory_order_relaxed)) {
    RecordSubmitted(task_events_, spec, *packed, &submitted_us);
    return FailBeforeDispatch(spec, LocalNodeLostError());
  }
  if (task_events_ != nullptr) {
    if (submitted_us != 0) {
      task_events_->Dispatched(spec, *packed, submitted_us);
    } else {
      task_events_->Reached(*packed, rpc::PENDING_NODE_ASSIGNMENT);
    }
  }
  switch (spec.type()) {
    case rpc::ACTOR_TASK:
      actor_submitter_->Resolved(std::move(spec), std::move(packed), submitted_us);
      return;
    case rpc::ACTOR_CREATION_TASK:
      SendCreateActor(spec);
      return;
    default:
      submitter_->Submit(spec, std::move(packed), submitted_us);
  }
}

void CoreWorker::FailBeforeDispatch(const rpc::TaskSpec& spec, const rpc::ErrorInfo& error) {
  if (spec.type() == rpc::ACTOR_CREATION_TASK) {
    FailActorCreation(ActorID::FromBinary(spec.actor_creation().actor_id()),
                      "an argument of its factory " + spec.function_name() + " failed: " + error.message());
    return;
  }
  if (spec.type() == rpc::ACTOR_TASK) {
    actor_submitter_->Drop(ActorID::FromBinary(spec.actor_task().actor_id()), spec.actor_task().sequence_number());
  }
  task_manager_->FailTask(TaskID::FromBinary(spec.task_id()), error);
}

// ---------------------------------------------------------------------------
// RPC handlers

void CoreWorker::HandleGetObjectStatus(const rpc::GetObjectStatusRequest& request, rpc::GetObjectStatusReply* reply,
                                       std::function<void(absl::Status)> send_reply) {
  auto id = ObjectID::FromBinaryChecked(request.object_id());
  if (!id.ok()) return send_reply(id.status());
  if (!reference_counter_->IsOwnedByUs(*id)) {
    reply->set_status(rpc::GetObjectStatusReply::OUT_OF_SCOPE);
    return send_reply(absl::OkStatus());
  }
  ObjectID object_id = *id;
  if (!request.lost_at().empty()) {
    // A borrower could not fetch the copy we told it about: rebuild the object,
    // unless it was rebuilt elsewhere meanwhile.
    StoredObjectPtr current = memory_store_.GetIfExists(object_id);
    if (current && current->in_plasma && current->plasma_raylet_address() == request.lost_at()) {
      RecoverObject(object_id, current, "a borrower could not fetch its copy from " + request.lost_at());
    }
  }
  memory_store_.GetAsync(*id, [this, object_id, reply, send_reply](StoredObjectPtr value) {
    if (!value->error.ok()) {
      reply->set_status(rpc::GetObjectStatusReply::FAILED);
      *reply->mutable_error() = ToErrorInfo(*value);
    } else {
      reply->set_status(rpc::GetObjectStatusReply::CREATED);
      reply->set_size_bytes(value->size_bytes);
      if (value->in_plasma) {
        // The primary first, then the other copies known here (a reader that cannot
        // reach the primary pulls from one of them).
        reply->add_node_ids(value->plasma_node().Binary());
        reply->add_raylet_addresses(value->plasma_raylet_address());
        for (const std::string& copy : freer_.CopiesOf(object_id)) {
          if (copy == value->plasma_raylet_address()) continue;
          reply->add_node_ids("");
          reply->add_raylet_addresses(copy);
        }
      } else {
        reply->set_data(value->data);
        reply->set_metadata(value->metadata);
      }
    }
    send_reply(absl::OkStatus());
  });
  // Freed between the ownership check and the registration: answer now.
  if (!reference_counter_->IsOwnedByUs(object_id)) {
    memory_store_.ResolveAsyncWaiters(object_id, [&object_id] { return FreedObject(object_id); });
  }
}

void CoreWorker::HandleWaitForRefRemoved(const rpc::WaitForRefRemovedRequest& request,
                                         rpc::WaitForRefRemovedReply* reply,
                                         std::function<void(absl::Status)> send_reply) {
  auto id = ObjectID::FromBinaryChecked(request.ref().object_id());
  if (!id.ok()) return send_reply(id.status());
  std::optional<ObjectID> contained_in;
  if (auto outer = ObjectID::FromBinaryChecked(request.contained_in_id()); outer.ok()) contained_in = *outer;
  std::optional<Address> owner;
  if (request.ref().has_owner_address()) owner = FromRpc(request.ref().owner_address());
  reference_counter_->HandleWaitForRefRemoved(*id, [this, reply, send_reply](std::vector<BorrowedRef> subs) {
    for (const BorrowedRef& b : subs) {
      rpc::BorrowedRefReport* report = reply->add_sub_borrowers();
      report->mutable_ref()->set_object_id(b.object_id.Binary());
      *report->mutable_borrower() = ToRpc(b.borrower);
    }
    send_reply(absl::OkStatus());
  }, contained_in, owner);
}

void CoreWorker::SetCurrentPush(const rpc::PushTaskRequest* request) {
  absl::MutexLock lock(&exec_mu_);
  current_push_ = request;
  current_index_ = -1;
}

void CoreWorker::SetRunningTask(TaskContext* context, int index) {
  absl::MutexLock lock(&exec_mu_);
  running_context_ = context;
  if (context != nullptr) current_index_ = index;
}

bool CoreWorker::RunsTasksLocked() {
  return running_context_ != nullptr || current_push_ != nullptr || (actor_pool_ && actor_pool_->NumBusy() > 0) ||
         (async_loop_ && async_loop_->NumBusy() > 0);
}

bool CoreWorker::RunsTasks() {
  absl::MutexLock lock(&exec_mu_);
  return RunsTasksLocked();
}

void CoreWorker::HandleExit(const rpc::ExitRequest& request, rpc::ExitReply* reply,
                            std::function<void(absl::Status)> send_reply) {
  bool busy;
  {
    absl::MutexLock lock(&exec_mu_);
    // A worker that owns or borrows objects stays: its borrowers and owners need it.
    busy = RunsTasksLocked() || (reference_counter_ && reference_counter_->NumObjects() > 0);
    if (!busy || request.force()) exit_requested_ = true;
  }
  if (channel_server_ && (!busy || request.force())) channel_server_->Wake();
  reply->set_success(!busy || request.force());
  send_reply(absl::OkStatus());
}

void CoreWorker::HandleListObjects(const rpc::ListObjectsRequest& request, rpc::ListObjectsReply* reply,
                                   std::function<void(absl::Status)> send_reply) {
  ObjectOwner owner{self_, static_cast<int32_t>(getpid()), is_driver()};
  send_reply(ListOwnedObjects(reference_counter_->OwnedObjects(), owner, request, reply));
}

}  // namespace manta::core
