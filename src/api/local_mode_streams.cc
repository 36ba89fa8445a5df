// LocalModeRuntime: streaming tasks (ray::Generator) in one process
// (local_mode_runtime.h). A generator's items become objects as it yields them; the
// consumer takes them in order, then the end's error if the task failed.
#include <functional>
#include <string>
#include <utility>

#include "ray/api/ray_exception.h"
#include "src/api/local_mode_runtime.h"

namespace ray {
namespace internal {

std::shared_ptr<const std::string> LocalModeRuntime::Materialize(const SerializedValue& value) {
  auto bytes = std::make_shared<std::string>(value.size, '\0');
  if (value.size > 0) value.write(bytes->data());
  return bytes;
}

void LocalModeRuntime::AddStreamLocked(Task& task, const TaskOptions& options) {
  if (!options.streaming) return;
  task.streaming = true;
  streams_[task.return_ids.at(0)].backpressure = options.backpressure_num_objects;
}

bool LocalModeRuntime::StreamYield(SerializedValue item, std::function<void()> resume) {
  Task* task = tls_task_runtime_ == this ? tls_task_ : nullptr;
  if (task == nullptr || !task->streaming) {
    throw RayException(
        "co_yield of a ray::Generator outside a task or actor method that streams (one whose function returns "
        "ray::Generator, called with Remote())");
  }
  std::shared_ptr<const std::string> bytes = Materialize(item);  // outside the lock: may be large
  absl::MutexLock lock(&mu_);
  if (shutting_down_) throw RayException("co_yield: ray::Shutdown() was called while the generator ran");
  auto it = streams_.find(task->return_ids[0]);
  if (it == streams_.end()) return true;  // nobody consumes it any more: the item is dropped
  Stream& stream = it->second;
  const std::string id = NewObjectId(/*is_put=*/false);
  Object& object = objects_[id];
  object.references = 1;  // the stream's, until handed out
  object.state = Object::State::kReady;
  object.bytes = std::move(bytes);
  object.contained_ids = AddKnownReferencesLocked(item.contained_ids);
  stream.items.push_back(id);
  const int64_t produced = ++stream.produced;
  changed_.SignalAll();
  for (std::function<void()>& ready : std::exchange(stream.ready, {})) ready();
  if (stream.unpaused || stream.backpressure <= 0 || produced - stream.consumed < stream.backpressure) return true;
  stream.resume = std::move(resume);
  return false;
}

bool LocalModeRuntime::StreamHasNextLocked(const std::string& end_id, const Stream& stream) {
  if (!stream.items.empty()) return true;
  const Object* end = FindLocked(end_id);
  return end == nullptr || end->state != Object::State::kPending;
}

StreamNextResult LocalModeRuntime::StreamNext(const std::string& end_id, int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  ActiveCall active(this);
  auto find = [&]() -> Stream& {
    auto it = streams_.find(end_id);
    if (it == streams_.end()) throw RayException("ObjectRefGenerator::Next: no stream of " + HexId(end_id) + " here");
    return it->second;
  };
  auto has_next = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = streams_.find(end_id);
    return it == streams_.end() || StreamHasNextLocked(end_id, it->second);  // (find() says why)
  };
  if (!AwaitLocked(has_next, timeout_ms, "ObjectRefGenerator::Next")) {
    throw RayTimeoutException("ObjectRefGenerator::Next: no item within " + std::to_string(timeout_ms) + " ms");
  }
  Stream& stream = find();
  StreamNextResult out;
  if (!stream.items.empty()) {
    out.kind = StreamNextResult::Kind::kItem;
    out.id = std::move(stream.items.front());  // its reference passes to the caller
    stream.items.pop_front();
    ++stream.consumed;
    if (stream.resume && stream.produced - stream.consumed < stream.backpressure) std::exchange(stream.resume, {})();
    return out;
  }
  const Object* end = FindLocked(end_id);
  if (end != nullptr && end->state == Object::State::kFailed && !stream.error_given) {
    stream.error_given = true;
    out.kind = StreamNextResult::Kind::kItem;
    out.id = end_id;
    AddKnownReferencesLocked({end_id});
  }
  return out;
}

void LocalModeRuntime::NotifyStreamNext(const std::string& end_id, std::function<void()> ready) {
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(end_id);
    if (it != streams_.end() && !StreamHasNextLocked(end_id, it->second) && !shutting_down_) {
      it->second.ready.push_back(std::move(ready));
      return;
    }
  }
  ready();  // StreamNext will not wait (or says why)
}

void LocalModeRuntime::StreamEndedLocked(const std::string& end_id) {
  auto it = streams_.find(end_id);
  if (it == streams_.end()) return;
  for (std::function<void()>& ready : std::exchange(it->second.ready, {})) ready();
}

std::vector<std::string> LocalModeRuntime::ReleaseStreamLocked(const std::string& end_id) {
  auto it = streams_.find(end_id);
  if (it == streams_.end()) return {};
  Stream stream = std::move(it->second);
  streams_.erase(it);
  // A generator paused for this consumer goes on; its next items are dropped.
  if (stream.resume) stream.resume();
  for (std::function<void()>& ready : stream.ready) ready();
  return {std::make_move_iterator(stream.items.begin()), std::make_move_iterator(stream.items.end())};
}

void LocalModeRuntime::UnpauseStreamLocked(const Task& task) {
  if (!task.streaming) return;
  auto it = streams_.find(task.return_ids.at(0));
  if (it == streams_.end()) return;
  it->second.unpaused = true;
  if (it->second.resume) std::exchange(it->second.resume, {})();
}

}  // namespace internal
}  // namespace ray
