// CoreWorker: streaming tasks (ray::Generator; ARCHITECTURE.md §5, "Streaming").
// The worker sends each yielded item as a reply of the task's push (StreamYield);
// the owner's StreamTable hands the items out in order and, with back-pressure,
// tells the worker what was consumed (StreamConsumed).
#include <glog/logging.h>

#include "src/core_worker/common.h"
#include "src/core_worker/core_worker.h"

namespace manta::core {

void CoreWorker::MakeStreams() {
  StreamTable::Hooks hooks;
  hooks.store = [this](const ObjectID& id, const rpc::ReturnObject& item) { task_manager_->StoreStreamItem(id, item); };
  hooks.discard = [this](const ObjectID& id, const rpc::ReturnObject& item) {
    task_manager_->DiscardStoredCopy(id, item);
  };
  hooks.release = [this](const ObjectID& id) { reference_counter_->RemoveLocalReference(id); };
  hooks.consumed = [this](const rpc::Address& worker, const TaskID& task, int attempt, int64_t consumed) {
    rpc::StreamConsumedRequest request;
    request.set_intended_worker_id(worker.worker_id());
    request.set_task_id(task.Binary());
    request.set_attempt_number(attempt);
    request.set_consumed(consumed);
    loop_.Post("CoreWorker.StreamConsumed", [this, worker, request] {
      workers_.Get(HostPort(worker), worker.node_id())
          ->StreamConsumed(request, [task = request.task_id()](const absl::Status& s, rpc::StreamConsumedReply&&) {
            // A worker gone meanwhile: its task's failure (or retry) follows.
            if (!s.ok()) VLOG(1) << "telling the worker of stream " << BinaryHex(task) << " what was consumed: " << s;
          });
    });
  };
  streams_ = std::make_unique<StreamTable>(std::move(hooks));
  task_manager_->SetStreamItemsHandler(
      [this](const TaskManager::StreamItems& items) { streams_->OnItems(items); });
}

void CoreWorker::AddStream(const rpc::TaskSpec& spec) {
  const TaskID task_id = TaskID::FromBinary(spec.task_id());
  any_stream_.store(true, std::memory_order_relaxed);
  streams_->Add(task_id, spec.backpressure_num_objects());
  // Its end (index 1) comes after every item: then the consumer can be told.
  memory_store_.GetAsync(ObjectID::FromIndex(task_id, 1), [this, task_id](StoredObjectPtr value) {
    streams_->OnEnd(task_id, value == nullptr || !value->error.ok());
  });
}

absl::StatusOr<bool> CoreWorker::StreamYield(ReturnValue item, std::function<void()> resume) {
  TaskContext* context = ScopedTaskContext::Current(this);
  if (context == nullptr || context->spec == nullptr || !context->spec->streaming()) {
    return absl::FailedPreconditionError(
        "co_yield of a ray::Generator outside a task or actor method that streams (one whose function returns "
        "ray::Generator, called with Remote())");
  }
  const rpc::TaskSpec& spec = *context->spec;
  const int64_t index = producers_.NextIndex(context->task_id, spec.attempt_number());
  rpc::StreamItem out;
  out.set_task_id(spec.task_id());
  out.set_attempt_number(spec.attempt_number());
  out.set_index(index);
  const ObjectID id = ObjectID::FromIndex(context->task_id, static_cast<uint32_t>(index + 2));
  StoreReturn(spec, id, std::move(item), out.mutable_object());
  if (spec.backpressure_num_objects() > 0) *out.mutable_worker() = rpc_address_;
  replies_->Add(context->connection, context->push_id,
                [&](rpc::PushTaskReply& reply) { *reply.add_stream_items() = std::move(out); });
  replies_->Flush();  // the caller gets each item as soon as it is made
  return producers_.MayGoOn(context->task_id, index, spec.backpressure_num_objects(), std::move(resume));
}

absl::StatusOr<StreamTable::Next> CoreWorker::StreamNext(const ObjectID& end_id, int64_t timeout_ms) {
  auto next = streams_->WaitNext(end_id.Task(), timeout_ms);
  // The end's error goes to the caller as a ref of its own.
  if (next.ok() && next->kind == StreamTable::Next::Kind::kError) reference_counter_->AddLocalReference(end_id);
  return next;
}

void CoreWorker::NotifyStreamNext(const ObjectID& end_id, std::function<void()> ready) {
  streams_->NotifyNext(end_id.Task(), std::move(ready));
}

void CoreWorker::HandleStreamConsumed(const rpc::StreamConsumedRequest& request, rpc::StreamConsumedReply* reply,
                                      SendReplyFn send_reply) {
  if (request.intended_worker_id() != options_.worker_id.Binary()) {
    return send_reply(absl::InvalidArgumentError("the consumed count was meant for another worker"));
  }
  auto task_id = TaskID::FromBinaryChecked(request.task_id());
  if (!task_id.ok()) return send_reply(absl::InvalidArgumentError("malformed task id"));
  producers_.Consumed(*task_id, request.attempt_number(), request.consumed());
  send_reply(absl::OkStatus());
}

}  // namespace manta::core
