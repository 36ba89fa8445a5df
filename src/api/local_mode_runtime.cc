#include "src/api/local_mode_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
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
#include "src/api/task_runtime_env.h"
#include "src/common/runtime_env.h"

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

}  // namespace

std::unique_ptr<RayRuntime> CreateLocalModeRuntime(const ray::RayConfig& config) {
  return std::make_unique<LocalModeRuntime>(config);
}

LocalModeRuntime::LocalModeRuntime(const ray::RayConfig& config)
    : base_threads_(PoolSize(config)),
      id_prefix_(RandomPrefix()),
      namespace_(config.ray_namespace.empty() ? "anonymous_namespace_" + HexId(id_prefix_) : config.ray_namespace),
      runtime_env_(JobRuntimeEnv(config)),
      placement_groups_(id_prefix_) {
  ApplyRuntimeEnvToProcess();
}

void LocalModeRuntime::ApplyRuntimeEnvToProcess() {
  if (runtime_env_.empty()) return;
  const std::string what = "RayConfig::runtime_env (local_mode applies it to this process)";
  auto env = manta::ParseWorkerRuntimeEnv(runtime_env_);
  if (!env.ok()) throw RayRuntimeEnvException(what + ": " + std::string(env.status().message()));
  if (!env->working_dir.empty()) {
    absl::Status usable = manta::CheckWorkingDir(env->working_dir);
    if (!usable.ok()) throw RayRuntimeEnvException(what + ": " + std::string(usable.message()));
    std::error_code ec;
    replaced_cwd_ = std::filesystem::current_path(ec).string();
    if (ec || chdir(env->working_dir.c_str()) != 0) {
      replaced_cwd_.clear();
      throw RayRuntimeEnvException(what + ": cannot change to working_dir " + env->working_dir);
    }
  }
  for (const auto& [name, value] : env->env_vars) {
    const char* old = std::getenv(name.c_str());
    replaced_env_vars_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
  }
}

void LocalModeRuntime::RestoreProcessEnv() {
  for (auto it = replaced_env_vars_.rbegin(); it != replaced_env_vars_.rend(); ++it) {
    if (it->second) {
      setenv(it->first.c_str(), it->second->c_str(), 1);
    } else {
      unsetenv(it->first.c_str());
    }
  }
  replaced_env_vars_.clear();
  if (!replaced_cwd_.empty() && chdir(replaced_cwd_.c_str()) != 0) {
    LOG(WARNING) << "ray::Shutdown (local_mode): cannot change back to " << replaced_cwd_;
  }
  replaced_cwd_.clear();
}

void LocalModeRuntime::CheckSameRuntimeEnv(const std::string& own, const std::string& what) const {
  if (own.empty()) return;
  if (TaskRuntimeEnv(runtime_env_, own, what) == runtime_env_) return;
  throw RayRuntimeEnvException(what + ": local_mode runs every task and actor in this one process, in the job's "
                               "runtime_env (RayConfig::runtime_env); a runtime_env of their own (" + own +
                               ") cannot be applied here");
}

std::string LocalModeRuntime::Actor::Describe() const {
  std::string out = "actor " + HexId(id);
  if (!class_name.empty()) out += " (" + class_name + ")";
  if (!name.empty()) out += " named '" + name + "'";
  return out;
}

LocalModeRuntime::~LocalModeRuntime() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    queue_.clear();
    waiting_.clear();
    // Awaits resume; their Gets throw (the runtime is going).
    for (auto& [id, callbacks] : ready_callbacks_) {
      for (std::function<void()>& callback : callbacks) callback();
    }
    ready_callbacks_.clear();
    // Paused generators go on (their next co_yield throws), consumers' awaits resume.
    for (auto& [id, stream] : streams_) {
      stream.unpaused = true;
      if (stream.resume) std::exchange(stream.resume, {})();
      for (std::function<void()>& callback : std::exchange(stream.ready, {})) callback();
    }
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
  // Async actors' loops run what was posted to them (awaits resumed above, whose Gets
  // throw now), then end. Each is freed once all have ended: what runs on one may
  // still stop another (an actor's last handle dropped there).
  std::vector<std::unique_ptr<ActorLoop>> loops;
  {
    absl::MutexLock lock(&mu_);
    loops.swap(actor_loops_);
  }
  for (const std::unique_ptr<ActorLoop>& loop : loops) loop->Stop();
  for (const std::unique_ptr<ActorLoop>& loop : loops) loop->Join();
  loops.clear();
  RestoreProcessEnv();
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
    if (!streams_.empty()) {
      for (std::string& item : ReleaseStreamLocked(id)) ids.push_back(std::move(item));
    }
    auto handle = handle_objects_.find(id);
    if (handle != handle_objects_.end()) {
      // The last handle of an unnamed actor is gone.
      auto actor = actors_.find(handle->second);
      handle_objects_.erase(handle);
      if (actor != actors_.end() && actor->second->name.empty()) {
        KillActorLocked(*actor->second, "every handle to it went out of scope");
      }
    }
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
  if (!streams_.empty()) StreamEndedLocked(id);
  if (auto ready = ready_callbacks_.find(id); ready != ready_callbacks_.end()) {
    std::vector<std::function<void()>> callbacks = std::move(ready->second);
    ready_callbacks_.erase(ready);
    for (std::function<void()>& callback : callbacks) callback();
  }
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  std::vector<std::shared_ptr<Task>> tasks = std::move(it->second);
  waiting_.erase(it);
  for (std::shared_ptr<Task>& task : tasks) {
    if (--task->unresolved == 0) ReadyLocked(std::move(task));
  }
}

void LocalModeRuntime::ReadyLocked(std::shared_ptr<Task> task) {
  if (task->actor) {
    PumpActorLocked(*task->actor);  // it waits in its actor's queue, in order
  } else {
    EnqueueLocked(std::move(task));
  }
}

void LocalModeRuntime::PumpActorLocked(Actor& actor) {
  while (!actor.calls.empty()) {
    std::shared_ptr<Task> front = actor.calls.front();
    if (front->unresolved > 0) return;
    if (actor.state == Actor::State::kDead) {
      actor.calls.pop_front();
      FailReturnsLocked(*front, ErrorKind::kActor, actor.death_message);
      UntrackLocked(*front);
      RemoveReferencesLocked(std::move(front->held_ids));
      continue;
    }
    const bool creation = front->kind == Task::Kind::kActorCreation;
    if (creation ? actor.running > 0 : actor.state != Actor::State::kAlive) return;
    if (actor.running >= (creation ? 1 : std::max(1, actor.max_concurrency))) return;
    actor.calls.pop_front();
    ++actor.running;
    if (actor.loop != nullptr && !creation) {
      // An async actor's call starts on its loop, in order.
      if (!shutting_down_) actor.loop->Post([this, task = std::move(front)] { RunOnActorLoop(task); });
      continue;
    }
    EnqueueLocked(std::move(front));
    if (creation) return;  // calls wait until the factory returned
    // A threaded actor's calls may wait for each other: each gets a thread.
    if (actor.max_concurrency > 1 && queue_.size() > idle_threads_) StartThreadLocked();
  }
  // A dead async actor's loop ends with its last call (and is freed at the next
  // CreateActor: nothing of the actor refers to it any more).
  if (actor.loop != nullptr && actor.state == Actor::State::kDead && actor.running == 0) {
    std::exchange(actor.loop, nullptr)->Stop();
  }
}

void LocalModeRuntime::KillActorLocked(Actor& actor, const std::string& why) {
  if (actor.state == Actor::State::kDead) return;
  actor.state = Actor::State::kDead;
  actor.death_message = actor.Describe() + " is dead: " + why;
  actor.instance.reset();  // running calls keep theirs
  auto named = named_actors_.find(NamedKey(actor.ray_namespace, actor.name));
  if (named != named_actors_.end() && named->second == actor.id) named_actors_.erase(named);
  RemoveReferencesLocked(std::move(actor.factory_held));
  actor.factory_held.clear();
  PumpActorLocked(actor);
}

std::shared_ptr<LocalModeRuntime::Task> LocalModeRuntime::CreationTaskLocked(const std::shared_ptr<Actor>& actor) {
  auto task = std::make_shared<Task>();
  task->kind = Task::Kind::kActorCreation;
  task->function_name = actor->factory_name;
  task->args = actor->factory_args;  // the actor holds their references
  task->actor = actor;
  return task;
}

void LocalModeRuntime::FinishActorTaskLocked(Task& task, const std::optional<TaskError>& error, bool exit_actor,
                                             std::shared_ptr<void> instance) {
  Actor& actor = *task.actor;
  --actor.running;
  if (task.kind == Task::Kind::kActorCreation && actor.state == Actor::State::kCreating) {
    if (error) {
      KillActorLocked(actor, "its factory " + task.function_name + " failed: " + error->message);
    } else {
      actor.instance = std::move(instance);
      actor.state = Actor::State::kAlive;
    }
  }
  if (exit_actor) KillActorLocked(actor, "the actor called ray::ExitActor() in " + task.function_name);
  PumpActorLocked(actor);
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

void LocalModeRuntime::FailReturnsLocked(Task& task, ErrorKind kind, const std::string& message) {
  if (std::exchange(task.ended, true)) return;  // a cancel failed them first
  for (const std::string& id : task.return_ids) CompleteLocked(id, nullptr, {}, kind, message);
}

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::PlacementErrorLocked(
    const std::string& function_name, const PlacementOptions& placement) {
  std::optional<std::string> why = placement_groups_.Unusable(placement);
  if (!why) return std::nullopt;
  return TaskError{ErrorKind::kOther, "task " + function_name + " cannot run: " + *why};
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
                                         int64_t timeout_ms, bool /*fetch_local*/) {
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

bool LocalModeRuntime::PrepareArgumentsLocked(const std::shared_ptr<Task>& task) {
  for (const TaskArgument& arg : task->args) {
    if (arg.by_ref && FindLocked(arg.object_id) == nullptr) {
      FailReturnsLocked(*task, ErrorKind::kOther,
                        task->function_name + ": argument object " + HexId(arg.object_id) +
                            " is unknown (already freed?)");
      return false;
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
  return true;
}

std::vector<std::string> LocalModeRuntime::SubmitTask(const std::string& function_name,
                                                      std::vector<TaskArgument> args, const TaskOptions& options) {
  if (options.num_returns < 1) {
    throw RayException("local mode: " + function_name + " needs at least one return, not " +
                       std::to_string(options.num_returns));
  }
  CheckSameRuntimeEnv(options.serialized_runtime_env, "ray::Task(" + function_name + ").SetRuntimeEnv");
  auto task = std::make_shared<Task>();
  task->function_name = function_name;
  task->args = std::move(args);
  task->placement = options.placement;
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < options.num_returns; ++i) {
    task->return_ids.push_back(NewObjectId(/*is_put=*/false));
    objects_[task->return_ids.back()].references = 1;
  }
  AddStreamLocked(*task, options);
  std::vector<std::string> return_ids = task->return_ids;
  if (std::optional<TaskError> error = PlacementErrorLocked(function_name, options.placement)) {
    FailReturnsLocked(*task, error->kind, error->message);
    return return_ids;
  }
  if (!PrepareArgumentsLocked(task)) return return_ids;
  TrackLocked(task);
  if (task->unresolved == 0) ReadyLocked(std::move(task));
  return return_ids;
}

CreatedActor LocalModeRuntime::CreateActor(const std::string& factory_name, std::vector<TaskArgument> args,
                                           const ActorCreationOptions& options) {
  CheckSameRuntimeEnv(options.serialized_runtime_env, "ray::Actor(" + factory_name + ").SetRuntimeEnv");
  auto actor = std::make_shared<Actor>();
  actor->name = options.name;
  actor->ray_namespace = options.ray_namespace.empty() ? namespace_ : options.ray_namespace;
  actor->class_name = options.class_name;
  actor->factory_name = factory_name;
  actor->max_restarts = options.max_restarts;
  actor->max_concurrency = std::max(1, options.max_concurrency);
  actor->placement_group_id = options.placement.group_id;
  absl::MutexLock lock(&mu_);
  if (FunctionManager::Instance().IsAsyncActorFactory(factory_name)) {
    // (Dead actors' loops that have ended go now.)
    std::erase_if(actor_loops_, [](const std::unique_ptr<ActorLoop>& loop) { return loop->Finished(); });
    actor_loops_.push_back(std::make_unique<ActorLoop>());
    actor->loop = actor_loops_.back().get();
  }
  actor->id = id_prefix_.substr(0, 8) + std::string(8, '\0');
  for (int i = 0; i < 8; ++i) actor->id[8 + i] = static_cast<char>((next_actor_ >> (8 * (7 - i))) & 0xff);
  ++next_actor_;
  if (!actor->name.empty()) {
    std::string key = NamedKey(actor->ray_namespace, actor->name);
    if (named_actors_.count(key) > 0) {
      throw RayException("ray::Actor(" + factory_name + ").Remote(): an actor named '" + actor->name +
                         "' already exists in namespace '" + actor->ray_namespace + "'");
    }
    named_actors_[key] = actor->id;
  }
  auto creation = std::make_shared<Task>();
  creation->kind = Task::Kind::kActorCreation;
  creation->function_name = factory_name;
  creation->args = std::move(args);
  creation->actor = actor;
  if (!PrepareArgumentsLocked(creation)) {
    KillActorLocked(*actor, "an argument of its factory is unknown (already freed?)");
  }
  // The actor keeps its factory's arguments for restarts; each run of the factory
  // uses them without holding references of its own.
  actor->factory_args = creation->args;
  actor->factory_held = std::move(creation->held_ids);
  creation->held_ids.clear();
  if (std::optional<std::string> why = placement_groups_.Unusable(options.placement)) KillActorLocked(*actor, *why);
  actors_[actor->id] = actor;
  if (actor->state != Actor::State::kDead) {
    actor->calls.push_back(creation);
    PumpActorLocked(*actor);
  }
  std::string handle = NewObjectId(/*is_put=*/true);
  Object& object = objects_[handle];
  object.state = Object::State::kReady;
  object.bytes = std::make_shared<const std::string>(actor->id);
  object.references = 1;
  handle_objects_[handle] = actor->id;
  return CreatedActor{actor->id, handle};
}

std::string LocalModeRuntime::SubmitActorTask(const std::string& actor_id, const std::string& handle_object_id,
                                              const std::string& method_name, std::vector<TaskArgument> args,
                                              const TaskOptions& options) {
  auto task = std::make_shared<Task>();
  task->kind = Task::Kind::kActorCall;
  task->function_name = method_name;
  task->args = std::move(args);
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) throw RayException("local mode: actor " + HexId(actor_id) + " is unknown to this runtime");
  task->actor = it->second;
  task->return_ids.push_back(NewObjectId(/*is_put=*/false));
  objects_[task->return_ids[0]].references = 1;
  AddStreamLocked(*task, options);
  std::string return_id = task->return_ids[0];
  if (!PrepareArgumentsLocked(task)) return return_id;
  // The caller's handle stays counted while the call is pending.
  if (!handle_object_id.empty()) {
    std::vector<std::string> handle = AddKnownReferencesLocked({handle_object_id});
    task->held_ids.insert(task->held_ids.end(), handle.begin(), handle.end());
  }
  TrackLocked(task);
  task->actor->calls.push_back(task);
  PumpActorLocked(*task->actor);
  return return_id;
}

void LocalModeRuntime::KillActor(const std::string& actor_id, bool no_restart) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) throw RayException("ActorHandle::Kill: actor " + HexId(actor_id) + " is unknown");
  Actor& actor = *it->second;
  const bool restarts_left = actor.max_restarts < 0 || actor.restarts < actor.max_restarts;
  if (no_restart || !restarts_left || actor.state == Actor::State::kDead) {
    KillActorLocked(actor, no_restart ? "killed by ray::ActorHandle::Kill()"
                                      : "killed by ray::ActorHandle::Kill(false); no restarts left");
    return;
  }
  // Restart: the factory runs again before the calls still queued.
  ++actor.restarts;
  actor.restarted = true;
  actor.instance.reset();
  actor.state = Actor::State::kCreating;
  actor.calls.push_front(CreationTaskLocked(it->second));
  PumpActorLocked(actor);
}

std::string LocalModeRuntime::GetNamedActor(const std::string& name, const std::string& ray_namespace) {
  absl::MutexLock lock(&mu_);
  auto it = named_actors_.find(NamedKey(ray_namespace.empty() ? namespace_ : ray_namespace, name));
  return it == named_actors_.end() ? std::string() : it->second;
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
