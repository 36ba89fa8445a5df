#include "src/api/local_mode_runtime.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "ray/api/function_manager.h"
#include "ray/api/ray_exception.h"
#include "ray/api/serializer.h"
#include "src/api/runtime_factory.h"

namespace ray {
namespace internal {
namespace {

// The runtime whose pool runs the current thread, if any.
thread_local const LocalModeRuntime* tls_pool_owner = nullptr;

size_t PoolSize(const ray::RayConfig& config) {
  if (config.num_cpus > 0) return static_cast<size_t>(config.num_cpus);
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
}

std::string RandomPrefix() {
  std::random_device device;
  std::string prefix(16, '\0');
  for (char& c : prefix) c = static_cast<char>(device() & 0xff);
  return prefix;
}

void AppendBigEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::shared_ptr<const std::string> Materialize(const SerializedValue& value) {
  auto bytes = std::make_shared<std::string>(value.size, '\0');
  if (value.size > 0) value.write(bytes->data());
  return bytes;
}

}  // namespace

std::unique_ptr<RayRuntime> CreateLocalModeRuntime(const ray::RayConfig& config) {
  return std::make_unique<LocalModeRuntime>(config);
}

LocalModeRuntime::LocalModeRuntime(const ray::RayConfig& config)
    : base_threads_(PoolSize(config)), id_prefix_(RandomPrefix()) {}

LocalModeRuntime::~LocalModeRuntime() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    queue_.clear();
    waiting_.clear();
    changed_.SignalAll();
    work_.SignalAll();
    // Callers woken from Get/Wait leave with a RayException; they still hold mu_.
    auto no_callers = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_calls_ == 0; };
    mu_.Await(absl::Condition(&no_callers));
  }
  // No thread starts once shutting_down_ is set, so this drains.
  while (true) {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) break;
    for (std::thread& thread : threads) thread.join();
  }
}

std::string LocalModeRuntime::NewObjectId(bool is_put) {
  // 16 random bytes, a 4-byte kind (1 = task return, 2 = Put), an 8-byte counter.
  std::string id = id_prefix_;
  AppendBigEndian(&id, is_put ? 2 : 1, 4);
  AppendBigEndian(&id, ++next_index_, 8);
  return id;
}

LocalModeRuntime::Object* LocalModeRuntime::FindLocked(const std::string& id) {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : &it->second;
}

LocalModeRuntime::Object& LocalModeRuntime::FindOrThrowLocked(const std::string& id, const char* caller) {
  Object* object = FindLocked(id);
  if (object == nullptr) {
    throw RayException(std::string(caller) + ": object " + HexId(id) +
                       " is unknown in this local-mode runtime (freed, from another runtime, or not an id)");
  }
  return *object;
}

std::vector<std::string> LocalModeRuntime::AddKnownReferencesLocked(const std::vector<std::string>& ids) {
  std::vector<std::string> known;
  for (const std::string& id : ids) {
    if (Object* object = FindLocked(id)) {
      ++object->references;
      known.push_back(id);
    } else {
      LOG(WARNING) << "local mode: nested ref to unknown object " << HexId(id) << " ignored";
    }
  }
  return known;
}

void LocalModeRuntime::RemoveReferencesLocked(std::vector<std::string> ids) {
  // A worklist, not recursion: freeing an object releases the refs it contains.
  while (!ids.empty()) {
    std::string id = std::move(ids.back());
    ids.pop_back();
    auto it = objects_.find(id);
    if (it == objects_.end() || --it->second.references > 0) continue;
    for (std::string& contained : it->second.contained_ids) ids.push_back(std::move(contained));
    objects_.erase(it);
  }
}

void LocalModeRuntime::CompleteLocked(const std::string& id, std::shared_ptr<const std::string> bytes,
                                      std::vector<std::string> contained_ids, ErrorKind kind,
                                      const std::string& message) {
  Object* object = FindLocked(id);
  if (object == nullptr) {
    // Every ref went away while the task ran: drop the result.
    RemoveReferencesLocked(std::move(contained_ids));
  } else if (bytes != nullptr) {
    object->state = Object::State::kReady;
    object->bytes = std::move(bytes);
    object->contained_ids = std::move(contained_ids);
  } else {
    object->state = Object::State::kFailed;
    object->error_kind = kind;
    object->error_message = message;
  }
  changed_.SignalAll();
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  std::vector<std::shared_ptr<Task>> tasks = std::move(it->second);
  waiting_.erase(it);
  for (std::shared_ptr<Task>& task : tasks) {
    if (--task->unresolved == 0) EnqueueLocked(std::move(task));
  }
}

void LocalModeRuntime::StartThreadLocked() {
  if (shutting_down_) return;
  threads_.emplace_back([this] { ThreadMain(); });
}

void LocalModeRuntime::EnqueueLocked(std::shared_ptr<Task> task) {
  if (shutting_down_) return;
  queue_.push_back(std::move(task));
  work_.Signal();
  const size_t active = threads_.size() - blocked_threads_;
  if (queue_.size() > idle_threads_ && active < base_threads_) StartThreadLocked();
}

bool LocalModeRuntime::AwaitLocked(const std::function<bool()>& done, int64_t timeout_ms, const char* caller) {
  const absl::Time deadline =
      timeout_ms < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(timeout_ms);
  const bool on_pool = tls_pool_owner == this;
  bool counted = false;
  while (!done()) {
    if (shutting_down_) {
      if (counted) --blocked_threads_;
      throw RayException(std::string(caller) + ": ray::Shutdown() was called while waiting");
    }
    if (on_pool && !counted) {
      // This pool thread stops running tasks for a while: let another take its place.
      counted = true;
      ++blocked_threads_;
      if (queue_.size() > idle_threads_ && threads_.size() - blocked_threads_ < base_threads_) StartThreadLocked();
    }
    if (changed_.WaitWithDeadline(&mu_, deadline) && !done()) {
      if (counted) --blocked_threads_;
      return false;
    }
  }
  if (counted) --blocked_threads_;
  return true;
}

void LocalModeRuntime::ThreadMain() {
  tls_pool_owner = this;
  while (true) {
    std::shared_ptr<Task> task;
    {
      absl::MutexLock lock(&mu_);
      ++idle_threads_;
      while (queue_.empty() && !shutting_down_) work_.Wait(&mu_);
      --idle_threads_;
      if (shutting_down_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Execute(*task);
  }
}

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::ResolveArguments(const Task& task,
                                                                                std::vector<ObjectData>* args) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (!arg.by_ref) continue;
    Object* object = FindLocked(arg.object_id);  // held by the task: present and complete
    if (object == nullptr || object->state == Object::State::kPending) {
      return TaskError{ErrorKind::kOther, task.function_name + ": argument #" + std::to_string(i + 1) +
                                              " (object " + HexId(arg.object_id) + ") vanished before the task ran"};
    }
    if (object->state == Object::State::kFailed) {
      return TaskError{object->error_kind, object->error_message};  // fails the way its argument did
    }
    (*args)[i] = ObjectData{object->bytes->data(), object->bytes->size(), object->bytes, arg.object_id};
  }
  return std::nullopt;
}

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::Run(const Task& task, std::vector<ObjectData>& args,
                                                                 SerializedValue* result,
                                                                 std::shared_ptr<const std::string>* bytes) {
  const RemoteFunction* function = FunctionManager::Instance().GetFunction(task.function_name);
  if (function == nullptr) {
    return TaskError{ErrorKind::kFunctionNotFound,
                     "local mode: no function is registered as \"" + task.function_name + "\" (use RAY_REMOTE)"};
  }
  try {
    for (size_t i = 0; i < task.args.size(); ++i) {
      if (task.args[i].by_ref) continue;
      std::shared_ptr<const std::string> value = Materialize(task.args[i].value);
      args[i] = ObjectData{value->data(), value->size(), value, ""};
    }
    *result = (*function)(args);
    *bytes = Materialize(*result);
  } catch (...) {
    return TaskError{ErrorKind::kTask, TaskExceptionMessage(task.function_name)};
  }
  return std::nullopt;
}

void LocalModeRuntime::Execute(Task& task) {
  std::vector<ObjectData> args(task.args.size());
  std::optional<TaskError> error = ResolveArguments(task, &args);
  // Outlives the lock below: the ObjectRefs inside the result must stay alive until
  // the result object holds references on them, and their destructors take mu_.
  SerializedValue result;
  std::shared_ptr<const std::string> bytes;
  if (!error) error = Run(task, args, &result, &bytes);
  absl::MutexLock lock(&mu_);
  if (error) {
    CompleteLocked(task.return_id, nullptr, {}, error->kind, error->message);
  } else {
    CompleteLocked(task.return_id, bytes, AddKnownReferencesLocked(result.contained_ids), ErrorKind::kOther, "");
  }
  RemoveReferencesLocked(std::move(task.held_ids));
}

std::string LocalModeRuntime::Put(SerializedValue value) {
  std::shared_ptr<const std::string> bytes = Materialize(value);  // outside the lock: may be large
  absl::MutexLock lock(&mu_);
  std::string id = NewObjectId(/*is_put=*/true);
  Object& object = objects_[id];
  object.state = Object::State::kReady;
  object.bytes = std::move(bytes);
  object.references = 1;
  object.contained_ids = AddKnownReferencesLocked(value.contained_ids);
  return id;
}

std::vector<ObjectData> LocalModeRuntime::Get(const std::vector<std::string>& ids, int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  ActiveCall active(this);
  for (const std::string& id : ids) FindOrThrowLocked(id, "ray::Get");
  std::string pending_id;
  auto all_complete = [&] {
    for (const std::string& id : ids) {
      Object* object = FindLocked(id);
      if (object != nullptr && object->state == Object::State::kPending) {
        pending_id = id;
        return false;
      }
    }
    return true;
  };
  if (!AwaitLocked(all_complete, timeout_ms, "ray::Get")) {
    throw RayTimeoutException("ray::Get: timed out after " + std::to_string(timeout_ms) +
                              " ms; object " + HexId(pending_id) + " is still pending");
  }
  std::vector<ObjectData> data;
  data.reserve(ids.size());
  for (const std::string& id : ids) {
    Object& object = FindOrThrowLocked(id, "ray::Get");
    if (object.state == Object::State::kFailed) ThrowError(object.error_kind, object.error_message);
    data.push_back(ObjectData{object.bytes->data(), object.bytes->size(), object.bytes, ""});
  }
  return data;
}

std::vector<bool> LocalModeRuntime::Wait(const std::vector<std::string>& ids, int num_objects,
                                         int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  ActiveCall active(this);
  for (const std::string& id : ids) FindOrThrowLocked(id, "ray::Wait");
  const size_t wanted = std::min(static_cast<size_t>(std::max(num_objects, 0)), ids.size());
  auto is_complete = [&](const std::string& id) {
    Object* object = FindLocked(id);
    return object == nullptr || object->state != Object::State::kPending;
  };
  auto enough = [&] {
    return static_cast<size_t>(std::count_if(ids.begin(), ids.end(), is_complete)) >= wanted;
  };
  AwaitLocked(enough, timeout_ms, "ray::Wait");
  std::vector<bool> ready(ids.size(), false);
  size_t reported = 0;
  for (size_t i = 0; i < ids.size() && reported < wanted; ++i) {
    if (is_complete(ids[i])) {
      ready[i] = true;
      ++reported;
    }
  }
  return ready;
}

std::string LocalModeRuntime::SubmitTask(const std::string& function_name, std::vector<TaskArgument> args,
                                         const TaskOptions& /*options*/) {
  auto task = std::make_shared<Task>();
  task->function_name = function_name;
  task->args = std::move(args);
  absl::MutexLock lock(&mu_);
  task->return_id = NewObjectId(/*is_put=*/false);
  objects_[task->return_id].references = 1;
  std::string return_id = task->return_id;

  for (const TaskArgument& arg : task->args) {
    if (arg.by_ref && FindLocked(arg.object_id) == nullptr) {
      CompleteLocked(return_id, nullptr, {}, ErrorKind::kOther,
                     function_name + ": argument object " + HexId(arg.object_id) + " is unknown (already freed?)");
      return return_id;
    }
  }
  std::vector<std::string> held;
  for (const TaskArgument& arg : task->args) {
    if (arg.by_ref) {
      held.push_back(arg.object_id);
    } else {
      held.insert(held.end(), arg.value.contained_ids.begin(), arg.value.contained_ids.end());
    }
  }
  task->held_ids = AddKnownReferencesLocked(held);
  for (const TaskArgument& arg : task->args) {
    if (arg.by_ref && FindLocked(arg.object_id)->state == Object::State::kPending) {
      ++task->unresolved;
      waiting_[arg.object_id].push_back(task);
    }
  }
  if (task->unresolved == 0) EnqueueLocked(std::move(task));
  return return_id;
}

void LocalModeRuntime::AddLocalReference(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (Object* object = FindLocked(id)) ++object->references;
}

void LocalModeRuntime::RemoveLocalReference(const std::string& id) {
  absl::MutexLock lock(&mu_);
  RemoveReferencesLocked({id});
}

std::string LocalModeRuntime::GetOwnerAddress(const std::string& /*id*/) { return kOwnerAddress; }

void LocalModeRuntime::RegisterBorrowedRef(const std::string& /*id*/, const std::string& /*owner_address*/,
                                           const std::string& /*outer_id*/) {
  // Every object is owned by this process: nothing to borrow.
}

size_t LocalModeRuntime::NumObjects() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

int64_t LocalModeRuntime::ReferenceCount(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  return it == objects_.end() ? -1 : it->second.references;
}

int LocalModeRuntime::NumActiveCalls() const {
  absl::MutexLock lock(&mu_);
  return active_calls_;
}

size_t LocalModeRuntime::NumThreads() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

}  // namespace internal
}  // namespace ray
