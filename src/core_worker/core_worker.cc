#include "src/core_worker/core_worker.h"

#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "protos/core_worker.grpc.pb.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/logging.h"
#include "src/common/status_util.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/gcs/gcs_client.h"
#include "src/object_store/store_client.h"

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
    pool_.Get(HostPort(borrower))
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

namespace {

// The CoreWorkerService front. PushTask goes straight to the execution queue (no
// hop through the loop: the task path is latency-bound); the rest run on the loop.
class CoreWorkerGrpcService final : public rpc::CoreWorkerService::CallbackService {
 public:
  CoreWorkerGrpcService(EventLoop& loop, CoreWorker& core) : loop_(loop), core_(core) {}

  grpc::ServerUnaryReactor* PushTask(grpc::CallbackServerContext* c, const rpc::PushTaskRequest* q,
                                     rpc::PushTaskReply* r) override {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    // The request lives until Finish, which comes after the batch has run.
    std::shared_ptr<const rpc::PushTaskRequest> request(q, [](const rpc::PushTaskRequest*) {});
    core_.HandlePushTask(request, r, [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpcStatus(s)); });
    return reactor;
  }
  grpc::ServerUnaryReactor* ReportTaskResults(grpc::CallbackServerContext* c, const rpc::ReportTaskResultsRequest* q,
                                              rpc::ReportTaskResultsReply* r) override {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    core_.HandleReportTaskResults(*q);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* GetObjectStatus(grpc::CallbackServerContext* c, const rpc::GetObjectStatusRequest* q,
                                            rpc::GetObjectStatusReply* r) override {
    return Serve("CoreWorker.GetObjectStatus", c, q, r, &CoreWorker::HandleGetObjectStatus);
  }
  grpc::ServerUnaryReactor* WaitForRefRemoved(grpc::CallbackServerContext* c,
                                              const rpc::WaitForRefRemovedRequest* q,
                                              rpc::WaitForRefRemovedReply* r) override {
    return Serve("CoreWorker.WaitForRefRemoved", c, q, r, &CoreWorker::HandleWaitForRefRemoved);
  }
  grpc::ServerUnaryReactor* AddObjectLocation(grpc::CallbackServerContext* c,
                                              const rpc::AddObjectLocationRequest* q,
                                              rpc::AddObjectLocationReply* r) override {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Exit(grpc::CallbackServerContext* c, const rpc::ExitRequest* q,
                                 rpc::ExitReply* r) override {
    return Serve("CoreWorker.Exit", c, q, r, &CoreWorker::HandleExit);
  }

 private:
  template <typename Request, typename Reply>
  grpc::ServerUnaryReactor* Serve(const char* name, grpc::CallbackServerContext* c, const Request* q, Reply* r,
                                  void (CoreWorker::*method)(const Request&, Reply*,
                                                             std::function<void(absl::Status)>)) {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    CoreWorker& core = core_;
    loop_.Post(name, [&core, method, q, r, reactor] {
      (core.*method)(*q, r, [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpcStatus(s)); });
    });
    return reactor;
  }

  EventLoop& loop_;
  CoreWorker& core_;
};

rpc::ClientOptions MakeClientOptions(const Config& config) {
  rpc::ClientOptions options;
  options.deadline_ms = config.grpc_client_deadline_ms;
  options.max_attempts = config.grpc_client_max_attempts;
  options.initial_backoff_ms = config.grpc_client_initial_backoff_ms;
  options.max_backoff_ms = config.grpc_client_max_backoff_ms;
  options.max_message_bytes = config.grpc_max_message_bytes;
  if (!config.testing_rpc_failure.empty()) {
    auto faults = rpc::FaultInjector::Parse(config.testing_rpc_failure);
    if (faults.ok()) {
      options.faults = std::make_shared<rpc::FaultInjector>(*faults);
    } else {
      LOG(WARNING) << "ignoring testing_rpc_failure: " << faults.status();
    }
  }
  return options;
}

}  // namespace

CoreWorker::CoreWorker(CoreWorkerOptions options)
    : options_(std::move(options)), loop_(options_.config.slow_handler_warn_ms) {
  if (options_.worker_id.IsNil()) options_.worker_id = WorkerID::FromRandom();
  DisableMutexDeadlockDetection();
}

absl::StatusOr<std::unique_ptr<CoreWorker>> CoreWorker::Create(CoreWorkerOptions options) {
  std::unique_ptr<CoreWorker> core(new CoreWorker(std::move(options)));
  absl::Status s = core->Connect();
  if (!s.ok()) {
    core->Shutdown();
    return s;
  }
  return core;
}

CoreWorker::~CoreWorker() { Shutdown(); }

absl::Status CoreWorker::RunOnLoopAndWait(const std::function<void(std::function<void(absl::Status)>)>& fn,
                                          int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::future<absl::Status> future = promise->get_future();
  loop_.Post("CoreWorker.RunAndWait", [fn, promise, done] {
    fn([promise, done](absl::Status s) {
      if (!done->exchange(true)) promise->set_value(std::move(s));
    });
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return absl::DeadlineExceededError("no answer within " + std::to_string(timeout_ms) + " ms");
  }
  return future.get();
}

absl::Status CoreWorker::Connect() {
  const Config& config = options_.config;
  rpc::ClientOptions client_options = MakeClientOptions(config);
  service_ = std::make_unique<CoreWorkerGrpcService>(loop_, *this);
  server_ = std::make_unique<rpc::GrpcServer>(options_.is_driver ? "driver" : "worker", options_.node_ip_address, 0,
                                              config.grpc_max_message_bytes);
  server_->RegisterService(service_.get());
  MANTA_RETURN_IF_ERROR(server_->Start());
  loop_thread_ = std::thread([this] { loop_.Run(); });

  gcs_ = std::make_unique<gcs::GrpcGcsClient>(loop_, options_.gcs_address, client_options);
  raylets_ = std::make_unique<RayletClientPool>([this, client_options](const std::string& address) {
    return MakeGrpcRayletClient(loop_, address, client_options);
  });
  workers_ = std::make_unique<CoreWorkerClientPool>([this, client_options](const std::string& address) {
    return MakeGrpcCoreWorkerClient(loop_, address, client_options);
  });
  if (options_.is_driver) {
    if (options_.raylet_address.empty()) MANTA_RETURN_IF_ERROR(FindLocalRaylet());
    MANTA_RETURN_IF_ERROR(CreateJob());
  }
  root_task_id_ = TaskID::ForDriver(options_.job_id);
  MANTA_RETURN_IF_ERROR(RegisterWithRaylet());

  auto store = object_store::ObjectStoreClient::Connect(store_socket_);
  if (!store.ok()) {
    return absl::UnavailableError("cannot connect to the object store at " + store_socket_ + ": " +
                                  std::string(store.status().message()));
  }
  store_ = std::move(*store);

  self_ = Address{node_id_, options_.node_ip_address, server_->port(), options_.worker_id};
  rpc_address_ = ToRpc(self_);
  borrower_client_ = std::make_unique<BorrowerClient>(*workers_);
  reference_counter_ = std::make_unique<ReferenceCounter>(self_, borrower_client_.get());
  reference_counter_->SetOnObjectFreed([this](const ObjectID& id) { OnObjectFreed(id); });
  task_manager_ = std::make_unique<TaskManager>(memory_store_, *reference_counter_, [this](const rpc::TaskSpec& spec) {
    loop_.Post("CoreWorker.Resubmit", [this, spec] { ResolveAndSubmit(spec); });
  });
  SubmitterOptions submitter_options;
  submitter_options.job_id = options_.job_id;
  submitter_options.self = rpc_address_;
  submitter_options.local_raylet_address = options_.raylet_address;
  submitter_options.job_config = options_.job_config;
  submitter_options.max_tasks_in_flight_per_worker = config.max_tasks_in_flight_per_worker;
  submitter_options.max_tasks_per_push = config.max_tasks_per_push;
  submitter_options.lease_idle_ms = config.worker_lease_idle_ms;
  submitter_options.max_pending_lease_requests_per_key = config.max_pending_lease_requests_per_key;
  submitter_ = std::make_unique<NormalTaskSubmitter>(loop_, submitter_options, *raylets_, *workers_, *task_manager_);

  if (options_.is_driver) {
    rpc::JobInfo job;
    job.set_job_id(options_.job_id.Binary());
    *job.mutable_driver_address() = rpc_address_;
    job.set_driver_pid(getpid());
    job.set_ray_namespace(options_.job_config.ray_namespace());
    job.set_start_time_ms(NowMs());
    job.set_entrypoint(options_.driver_entrypoint);
    job.set_driver_ip_address(options_.node_ip_address);
    MANTA_RETURN_IF_ERROR(RunOnLoopAndWait(
        [this, job](std::function<void(absl::Status)> done) {
          gcs_->AsyncAddJob(job, [done](const absl::Status& s, rpc::AddJobReply&&) { done(s); });
        },
        options_.config.grpc_client_deadline_ms));
  }
  VLOG(1) << (options_.is_driver ? "driver " : "worker ") << options_.worker_id.Hex() << " of job "
          << options_.job_id.Hex() << " serving at " << HostPort(self_);
  return absl::OkStatus();
}

absl::Status CoreWorker::FindLocalRaylet() {
  rpc::GetAllNodeInfoReply nodes;
  absl::Status s = RunOnLoopAndWait(
      [this, &nodes](std::function<void(absl::Status)> done) {
        gcs_->AsyncGetAllNodeInfo([done, &nodes](const absl::Status& s, rpc::GetAllNodeInfoReply&& reply) {
          if (s.ok()) nodes = std::move(reply);
          done(s);
        });
      },
      options_.config.grpc_client_deadline_ms);
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + options_.gcs_address + ": " +
                                  std::string(s.message()));
  }
  const rpc::NodeInfo* chosen = nullptr;
  for (const rpc::NodeInfo& node : nodes.node_info_list()) {
    if (node.state() != rpc::NodeInfo::ALIVE || node.draining()) continue;
    if (!chosen || (node.is_head_node() && !chosen->is_head_node())) chosen = &node;
  }
  if (!chosen) return absl::UnavailableError("the cluster at " + options_.gcs_address + " has no alive node");
  options_.raylet_address = chosen->node_manager_address() + ":" + std::to_string(chosen->node_manager_port());
  return absl::OkStatus();
}

absl::Status CoreWorker::CreateJob() {
  std::string job_id;
  absl::Status s = RunOnLoopAndWait(
      [this, &job_id](std::function<void(absl::Status)> done) {
        gcs_->AsyncGetNextJobID([done, &job_id](const absl::Status& s, rpc::GetNextJobIDReply&& reply) {
          if (s.ok()) job_id = reply.job_id();
          done(s);
        });
      },
      options_.config.grpc_client_deadline_ms);
  if (!s.ok()) return absl::UnavailableError("cannot create a job at the GCS: " + std::string(s.message()));
  auto id = JobID::FromBinaryChecked(job_id);
  if (!id.ok()) return absl::InternalError("the GCS returned a malformed job id");
  options_.job_id = *id;
  return absl::OkStatus();
}

absl::Status CoreWorker::RegisterWithRaylet() {
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(options_.is_driver ? rpc::DRIVER : rpc::WORKER);
  request.set_worker_id(options_.worker_id.Binary());
  request.set_job_id(options_.job_id.Binary());
  request.set_pid(getpid());
  request.mutable_address()->set_ip_address(options_.node_ip_address);
  request.mutable_address()->set_port(server_->port());
  request.mutable_address()->set_worker_id(options_.worker_id.Binary());
  request.set_startup_token(options_.startup_token);
  *request.mutable_job_config() = options_.job_config;
  rpc::RegisterWorkerReply reply;
  auto raylet = raylets_->Get(options_.raylet_address);
  absl::Status s = RunOnLoopAndWait(
      [raylet, request, &reply](std::function<void(absl::Status)> done) {
        raylet->RegisterWorker(request, [done, &reply](const absl::Status& s, rpc::RegisterWorkerReply&& r) {
          if (s.ok()) reply = std::move(r);
          done(s);
        });
      },
      options_.config.grpc_client_deadline_ms);
  if (!s.ok()) {
    return absl::UnavailableError("cannot register with the raylet at " + options_.raylet_address + ": " +
                                  std::string(s.message()));
  }
  auto node = NodeID::FromBinaryChecked(reply.node_id());
  if (!node.ok()) return absl::InternalError("the raylet returned a malformed node id");
  node_id_ = *node;
  store_socket_ = reply.object_store_socket();
  return absl::OkStatus();
}

void CoreWorker::Shutdown() {
  if (shut_down_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(exec_mu_);
    exit_requested_ = true;
  }
  exec_cv_.notify_all();
  if (loop_thread_.joinable()) {
    if (submitter_) {
      RunOnLoopAndWait(
          [this](std::function<void(absl::Status)> done) {
            submitter_->Shutdown();
            if (options_.is_driver && gcs_ && !options_.job_id.IsNil()) {
              gcs_->AsyncMarkJobFinished(options_.job_id.Binary(),
                                         [done](const absl::Status& s, rpc::MarkJobFinishedReply&&) { done(s); });
            } else {
              done(absl::OkStatus());
            }
          },
          2000)
          .IgnoreError();
    }
  }
  if (loop_thread_.joinable()) CancelRpcsAndDrain(2000);
  if (server_) server_->Shutdown(100);
  loop_.Stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  // Callbacks still queued on the stopped loop refer to these; keep them alive
  // until the loop itself goes (members are destroyed in reverse order).
}

void CoreWorker::CancelRpcsAndDrain(int64_t timeout_ms) {
  // Callbacks of calls in flight post to the loop: they must run before it goes.
  auto in_flight = [this] {
    int64_t n = gcs_ ? gcs_->InFlight() : 0;
    if (raylets_) raylets_->ForEach([&n](RayletClientInterface& c) { n += c.InFlight(); });
    if (workers_) workers_->ForEach([&n](CoreWorkerClientInterface& c) { n += c.InFlight(); });
    return n;
  };
  if (gcs_) gcs_->CancelAll();
  if (raylets_) raylets_->ForEach([](RayletClientInterface& c) { c.CancelAll(); });
  if (workers_) workers_->ForEach([](CoreWorkerClientInterface& c) { c.CancelAll(); });
  int64_t deadline = MonotonicMs() + timeout_ms;
  while (in_flight() > 0 && MonotonicMs() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Let the loop run what the last callbacks posted.
  RunOnLoopAndWait([](std::function<void(absl::Status)> done) { done(absl::OkStatus()); }, 1000).IgnoreError();
  if (int64_t left = in_flight(); left > 0) LOG(WARNING) << left << " RPCs still in flight at shutdown";
}

TaskID CoreWorker::CurrentTaskId() const {
  if (executing_.load(std::memory_order_acquire)) return executing_task_id_;
  return root_task_id_;
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
// Objects

absl::StatusOr<ObjectID> CoreWorker::Put(size_t size, const std::function<void(char*)>& write,
                                         const std::vector<ObjectID>& contained_ids) {
  ObjectID id = ObjectID::ForPut(CurrentTaskId(), static_cast<uint32_t>(put_counter_.fetch_add(1)));
  auto obj = std::make_shared<StoredObject>();
  obj->size_bytes = static_cast<int64_t>(size);
  if (static_cast<int64_t>(size) <= options_.config.max_direct_put_bytes) {
    obj->data.resize(size);
    if (size > 0) write(obj->data.data());
  } else {
    auto dst = store_->Create(id, static_cast<int64_t>(size), 0, /*pin_on_seal=*/true);
    if (!dst.ok()) return dst.status();
    write(reinterpret_cast<char*>(*dst));
    MANTA_RETURN_IF_ERROR(store_->Seal(id));
    obj->in_plasma = true;
    obj->owner_copy = true;
    obj->plasma_node = node_id_;
    obj->plasma_raylet_address = options_.raylet_address;
  }
  reference_counter_->AddOwnedObject(id, self_, contained_ids, static_cast<int64_t>(size), /*pending=*/false);
  reference_counter_->AddLocalReference(id);
  if (obj->in_plasma) {
    reference_counter_->AddObjectLocation(id, node_id_);
    reference_counter_->UpdatePinnedAt(id, node_id_);
  }
  memory_store_.Put(id, std::move(obj));
  return id;
}

void CoreWorker::NotifyBlocked(bool blocked) {
  if (options_.is_driver || !executing_.load()) return;
  rpc::NotifyWorkerBlockedRequest request;
  request.set_worker_id(options_.worker_id.Binary());
  request.set_blocked(blocked);
  raylets_->Get(options_.raylet_address)
      ->NotifyWorkerBlocked(request, [](const absl::Status& s, rpc::NotifyWorkerBlockedReply&&) {
        if (!s.ok()) LOG(WARNING) << "NotifyWorkerBlocked: " << s;
      });
}

void CoreWorker::RequestFromOwners(const std::vector<ObjectID>& ids) {
  for (const ObjectID& id : ids) {
    if (memory_store_.Contains(id) || !owner_requests_.insert(id).second) continue;
    auto owner = reference_counter_->GetOwner(id);
    if (!owner.ok()) {
      owner_requests_.erase(id);
      memory_store_.Put(id, MakeErrorObject(rpc::OBJECT_LOST, "object " + id.Hex() + " is unknown to this process"));
      continue;
    }
    rpc::GetObjectStatusRequest request;
    request.set_object_id(id.Binary());
    request.set_owner_worker_id(owner->worker_id.Binary());
    Address owner_address = *owner;
    workers_->Get(HostPort(owner_address))
        ->GetObjectStatus(request, [this, id, owner_address](const absl::Status& s, rpc::GetObjectStatusReply&& r) {
          owner_requests_.erase(id);
          StoredObjectPtr value;
          if (!s.ok()) {
            reference_counter_->HandleOwnerDied(owner_address);
            value = MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " (" +
                                                         owner_address.ToString() +
                                                         ") died or is unreachable: " + std::string(s.message()));
          } else if (r.status() == rpc::GetObjectStatusReply::FAILED) {
            value = MakeErrorObject(r.error());
          } else if (r.status() == rpc::GetObjectStatusReply::OUT_OF_SCOPE) {
            value = MakeErrorObject(rpc::OBJECT_LOST,
                                    "object " + id.Hex() + " was already freed by its owner " + owner_address.ToString());
          } else {
            auto obj = std::make_shared<StoredObject>();
            obj->size_bytes = r.size_bytes();
            if (r.node_ids_size() > 0 && r.raylet_addresses_size() > 0) {
              obj->in_plasma = true;
              if (auto n = NodeID::FromBinaryChecked(r.node_ids(0)); n.ok()) obj->plasma_node = *n;
              obj->plasma_raylet_address = r.raylet_addresses(0);
            } else {
              obj->data = std::move(*r.mutable_data());
              obj->metadata = std::move(*r.mutable_metadata());
            }
            value = std::move(obj);
          }
          memory_store_.Put(id, std::move(value));
          // The last ref may have gone while we asked: nothing will free it later.
          if (!reference_counter_->HasReference(id)) memory_store_.Delete({id});
        });
  }
}

absl::StatusOr<std::vector<ObjectValue>> CoreWorker::Get(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
  int64_t deadline = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  std::vector<ObjectID> borrowed_absent;
  bool all_present = true;
  for (const ObjectID& id : ids) {
    if (memory_store_.Contains(id)) continue;
    if (!reference_counter_->HasReference(id)) {
      return absl::NotFoundError("object " + id.Hex() +
                                 " is unknown to this process (no live ObjectRef to it was created here)");
    }
    all_present = false;
    if (!reference_counter_->IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  if (!all_present) NotifyBlocked(true);
  std::vector<StoredObjectPtr> values = memory_store_.Get(ids, ids.size(), timeout_ms);
  std::vector<ObjectValue> out(ids.size());
  std::vector<ObjectID> plasma_ids;
  std::vector<StoredObjectPtr> markers;
  std::vector<size_t> positions;
  absl::Status status;
  for (size_t i = 0; i < ids.size(); ++i) {
    const StoredObjectPtr& v = values[i];
    if (!v) {
      status = absl::DeadlineExceededError("Get timed out after " + std::to_string(timeout_ms) +
                                           " ms waiting for object " + ids[i].Hex());
      break;
    }
    if (!v->error.ok()) {
      out[i].error = v;
    } else if (v->in_plasma) {
      plasma_ids.push_back(ids[i]);
      markers.push_back(v);
      positions.push_back(i);
    } else {
      out[i].data = v->data.data();
      out[i].size = v->data.size();
      out[i].holder = v;
    }
  }
  if (status.ok() && !plasma_ids.empty()) status = ReadPlasmaValues(plasma_ids, markers, deadline, &out, positions);
  if (!all_present) NotifyBlocked(false);
  if (!status.ok()) return status;
  return out;
}

absl::Status CoreWorker::ReadPlasmaValues(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& markers,
                                          int64_t deadline_ms, std::vector<ObjectValue>* out,
                                          const std::vector<size_t>& positions) {
  object_store::ObjectStoreClient* store = store_.get();
  auto hold = [store](const ObjectID& id) {
    return std::shared_ptr<const void>(nullptr, [store, id](const void*) { store->Release(id).IgnoreError(); });
  };
  auto got = store_->Get(ids, 0);
  if (!got.ok()) return got.status();
  std::vector<ObjectID> missing;
  std::vector<size_t> missing_pos;
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*got)[i]) {
      ObjectValue& v = (*out)[positions[i]];
      v.data = reinterpret_cast<const char*>((*got)[i]->data);
      v.size = static_cast<size_t>((*got)[i]->data_size);
      v.holder = hold(ids[i]);
    } else {
      missing.push_back(ids[i]);
      missing_pos.push_back(i);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  // Pull the missing objects to this node, from the node holding each primary copy.
  absl::flat_hash_map<std::string, std::vector<ObjectID>> by_location;
  for (size_t k = 0; k < missing.size(); ++k) {
    by_location[markers[missing_pos[k]]->plasma_raylet_address].push_back(missing[k]);
  }
  auto remaining = [deadline_ms] { return deadline_ms < 0 ? int64_t{-1} : std::max<int64_t>(0, deadline_ms - MonotonicMs()); };
  for (const auto& [location, location_ids] : by_location) {
    rpc::FetchObjectsRequest request;
    for (const ObjectID& id : location_ids) request.add_object_ids(id.Binary());
    if (!location.empty()) request.add_locations(location);
    int64_t wait_ms = remaining();
    int64_t rpc_deadline = wait_ms < 0 ? options_.config.object_manager_pull_timeout_ms * 4 : std::max<int64_t>(wait_ms, 1);
    auto raylet = raylets_->Get(options_.raylet_address);
    absl::Status s = RunOnLoopAndWait(
        [raylet, request, rpc_deadline](std::function<void(absl::Status)> done) {
          raylet->FetchObjects(request, rpc_deadline,
                               [done](const absl::Status& s, rpc::FetchObjectsReply&&) { done(s); });
        },
        rpc_deadline + 1000);
    if (!s.ok()) {
      if (s.code() == absl::StatusCode::kDeadlineExceeded && wait_ms >= 0) {
        return absl::DeadlineExceededError("Get timed out fetching object " + location_ids[0].Hex() + " from " +
                                           location);
      }
      for (size_t k = 0; k < missing.size(); ++k) {
        if (markers[missing_pos[k]]->plasma_raylet_address != location) continue;
        (*out)[positions[missing_pos[k]]].error =
            MakeErrorObject(rpc::OBJECT_LOST, "object " + missing[k].Hex() + " could not be fetched from " +
                                                  location + ": " + std::string(s.message()));
      }
    }
  }
  std::vector<ObjectID> fetch_ids;
  std::vector<size_t> fetch_pos;
  for (size_t k = 0; k < missing.size(); ++k) {
    if ((*out)[positions[missing_pos[k]]].error) continue;
    fetch_ids.push_back(missing[k]);
    fetch_pos.push_back(missing_pos[k]);
  }
  if (fetch_ids.empty()) return absl::OkStatus();
  int64_t wait_ms = remaining();
  auto again = store_->Get(fetch_ids, wait_ms < 0 ? options_.config.object_manager_pull_timeout_ms : wait_ms);
  if (!again.ok()) return again.status();
  for (size_t k = 0; k < fetch_ids.size(); ++k) {
    ObjectValue& v = (*out)[positions[fetch_pos[k]]];
    if (!(*again)[k]) {
      v.error = MakeErrorObject(rpc::OBJECT_LOST, "object " + fetch_ids[k].Hex() + " was fetched but is not readable");
      continue;
    }
    v.data = reinterpret_cast<const char*>((*again)[k]->data);
    v.size = static_cast<size_t>((*again)[k]->data_size);
    v.holder = hold(fetch_ids[k]);
  }
  return absl::OkStatus();
}

std::vector<bool> CoreWorker::Wait(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms) {
  std::vector<ObjectID> borrowed_absent;
  for (const ObjectID& id : ids) {
    if (!memory_store_.Contains(id) && !reference_counter_->IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  NotifyBlocked(true);
  auto values = memory_store_.Get(ids, static_cast<size_t>(std::max(num_objects, 0)), timeout_ms);
  NotifyBlocked(false);
  std::vector<bool> ready(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ready[i] = values[i] != nullptr;
  return ready;
}

void CoreWorker::OnObjectFreed(const ObjectID& id) {
  StoredObjectPtr obj = memory_store_.GetIfExists(id);
  memory_store_.Delete({id});
  if (!obj || !obj->in_plasma || !obj->owner_copy || obj->plasma_raylet_address.empty()) return;
  // Frees are batched: one FreeObjects per raylet per loop turn.
  bool post;
  {
    absl::MutexLock lock(&free_mu_);
    pending_frees_[obj->plasma_raylet_address].push_back(id);
    post = !free_flush_posted_;
    free_flush_posted_ = true;
  }
  if (post) loop_.Post("CoreWorker.FreePlasma", [this] { FlushFrees(); });
}

void CoreWorker::FlushFrees() {
  absl::flat_hash_map<std::string, std::vector<ObjectID>> frees;
  {
    absl::MutexLock lock(&free_mu_);
    frees.swap(pending_frees_);
    free_flush_posted_ = false;
  }
  for (const auto& [raylet, ids] : frees) {
    if (raylet == options_.raylet_address) {
      // Our own node: straight to the store over its socket, no RPC to the raylet.
      absl::Status s = store_->Delete(ids, /*wait=*/false);
      if (s.ok()) continue;
      VLOG(1) << "deleting " << ids.size() << " objects from the local store: " << s;
    }
    rpc::FreeObjectsRequest request;
    for (const ObjectID& id : ids) request.add_object_ids(id.Binary());
    raylets_->Get(raylet)->FreeObjects(request, [raylet](const absl::Status& s, rpc::FreeObjectsReply&&) {
      if (!s.ok()) VLOG(1) << "freeing objects at " << raylet << ": " << s;
    });
  }
}

// ---------------------------------------------------------------------------
// Tasks (owner side)

absl::StatusOr<ObjectID> CoreWorker::SubmitTask(const std::string& function_name, std::vector<TaskArgInput> args,
                                                const std::string& name,
                                                const std::map<std::string, double>& resources, int max_retries) {
  TaskID parent = CurrentTaskId();
  TaskID task_id = TaskID::ForNormalTask(options_.job_id, parent, task_counter_.fetch_add(1));
  rpc::TaskSpec spec;
  spec.set_task_id(task_id.Binary());
  spec.set_job_id(options_.job_id.Binary());
  spec.set_parent_task_id(parent.Binary());
  *spec.mutable_caller_address() = rpc_address_;
  spec.set_function_name(function_name);
  spec.set_num_returns(1);
  spec.set_max_retries(max_retries < 0 ? static_cast<int>(options_.config.task_max_retries) : max_retries);
  spec.set_name(name);
  for (const auto& [resource, quantity] : resources) (*spec.mutable_required_resources())[resource] = quantity;
  std::vector<ObjectID> arg_ids;
  for (TaskArgInput& in : args) {
    rpc::TaskArg* arg = spec.add_args();
    if (in.by_ref) {
      auto owner = reference_counter_->GetOwner(in.ref);
      if (!owner.ok()) {
        return absl::InvalidArgumentError("argument ObjectRef " + in.ref.Hex() +
                                          " is unknown to this process (was it created by another driver?)");
      }
      arg->set_is_ref(true);
      arg->mutable_ref()->set_object_id(in.ref.Binary());
      *arg->mutable_ref()->mutable_owner_address() = ToRpc(*owner);
      arg_ids.push_back(in.ref);
    } else {
      arg->set_data(std::move(in.data));
      for (const ObjectID& nested : in.nested_ids) {
        auto owner = reference_counter_->GetOwner(nested);
        if (!owner.ok()) continue;
        rpc::ObjectReference* ref = arg->add_nested_refs();
        ref->set_object_id(nested.Binary());
        *ref->mutable_owner_address() = ToRpc(*owner);
        arg_ids.push_back(nested);
      }
    }
  }
  ObjectID return_id = ObjectID::FromIndex(task_id, 1);
  reference_counter_->AddOwnedObject(return_id, self_, {}, std::nullopt, /*pending=*/true);
  reference_counter_->AddLocalReference(return_id);
  reference_counter_->UpdateSubmittedTaskReferences(arg_ids);
  task_manager_->AddPendingTask(spec, std::move(arg_ids));
  // Submissions are handed to the loop in batches: one wake-up for many tasks.
  bool post;
  {
    absl::MutexLock lock(&submit_mu_);
    submit_queue_.push_back(std::move(spec));
    post = !submit_drain_posted_;
    submit_drain_posted_ = true;
  }
  if (post) loop_.Post("CoreWorker.SubmitTasks", [this] { DrainSubmissions(); });
  return return_id;
}

void CoreWorker::DrainSubmissions() {
  std::vector<rpc::TaskSpec> specs;
  {
    absl::MutexLock lock(&submit_mu_);
    specs.swap(submit_queue_);
    submit_drain_posted_ = false;
  }
  for (rpc::TaskSpec& spec : specs) ResolveAndSubmit(std::move(spec));
}

void CoreWorker::ResolveAndSubmit(rpc::TaskSpec spec) {
  for (rpc::TaskArg& arg : *spec.mutable_args()) {
    if (!arg.is_ref() || !arg.data().empty() || arg.ref().object_id().empty()) continue;
    ObjectID id = ObjectID::FromBinary(arg.ref().object_id());
    if (!reference_counter_->IsOwnedByUs(id)) continue;  // the worker asks the owner
    StoredObjectPtr value = memory_store_.GetIfExists(id);
    if (!value) {
      // Wait for this dependency, then look at the spec again.
      auto shared = std::make_shared<rpc::TaskSpec>(std::move(spec));
      memory_store_.GetAsync(id, [this, shared](StoredObjectPtr) {
        loop_.Post("CoreWorker.DependencyReady", [this, shared] { ResolveAndSubmit(std::move(*shared)); });
      });
      return;
    }
    if (!value->error.ok()) {
      // A failed dependency fails the task with the same error.
      task_manager_->FailTask(TaskID::FromBinary(spec.task_id()), ToErrorInfo(*value));
      return;
    }
    if (!value->in_plasma) {
      arg.set_data(value->data);
      arg.set_metadata(value->metadata);
    }
  }
  submitter_->Submit(std::move(spec));
}

// ---------------------------------------------------------------------------
// RPC handlers

void CoreWorker::HandleReportTaskResults(const rpc::ReportTaskResultsRequest& request) {
  if (!task_manager_) return;
  for (const rpc::TaskResult& result : request.results()) task_manager_->CompletePendingTask(result);
}

void CoreWorker::HandleGetObjectStatus(const rpc::GetObjectStatusRequest& request, rpc::GetObjectStatusReply* reply,
                                       std::function<void(absl::Status)> send_reply) {
  auto id = ObjectID::FromBinaryChecked(request.object_id());
  if (!id.ok()) return send_reply(id.status());
  if (!reference_counter_->IsOwnedByUs(*id)) {
    reply->set_status(rpc::GetObjectStatusReply::OUT_OF_SCOPE);
    return send_reply(absl::OkStatus());
  }
  memory_store_.GetAsync(*id, [reply, send_reply](StoredObjectPtr value) {
    if (!value->error.ok()) {
      reply->set_status(rpc::GetObjectStatusReply::FAILED);
      *reply->mutable_error() = ToErrorInfo(*value);
    } else {
      reply->set_status(rpc::GetObjectStatusReply::CREATED);
      reply->set_size_bytes(value->size_bytes);
      if (value->in_plasma) {
        reply->add_node_ids(value->plasma_node.Binary());
        reply->add_raylet_addresses(value->plasma_raylet_address);
      } else {
        reply->set_data(value->data);
        reply->set_metadata(value->metadata);
      }
    }
    send_reply(absl::OkStatus());
  });
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

void CoreWorker::HandleExit(const rpc::ExitRequest& request, rpc::ExitReply* reply,
                            std::function<void(absl::Status)> send_reply) {
  bool busy;
  {
    std::lock_guard<std::mutex> lock(exec_mu_);
    // A worker that owns or borrows objects stays: its borrowers and owners need it.
    busy = executing_.load() || !exec_queue_.empty() ||
           (reference_counter_ && reference_counter_->NumObjects() > 0);
    if (!busy || request.force()) exit_requested_ = true;
  }
  exec_cv_.notify_all();
  reply->set_success(!busy || request.force());
  send_reply(absl::OkStatus());
}

}  // namespace manta::core
