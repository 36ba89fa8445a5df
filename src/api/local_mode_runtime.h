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
// Threading: every method is thread-safe (one absl::Mutex). The destructor (called
// by ray::Shutdown) drops queued tasks, wakes threads blocked in Get/Wait with a
// RayException and waits until they have left, then joins the pool after the
// running tasks finish.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ray/api/ray_config.h"
#include "ray/api/ray_runtime.h"
#include "src/api/exception_util.h"

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
  std::vector<bool> Wait(const std::vector<std::string>& ids, int num_objects, int64_t timeout_ms) override;
  std::string SubmitTask(const std::string& function_name, std::vector<TaskArgument> args,
                         const TaskOptions& options) override;
  void AddLocalReference(const std::string& id) override;
  void RemoveLocalReference(const std::string& id) override;
  std::string GetOwnerAddress(const std::string& id) override;
  void RegisterBorrowedRef(const std::string& id, const std::string& owner_address,
                           const std::string& outer_id) override;
  bool IsLocalMode() const override { return true; }

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
  struct Task {
    std::string function_name;
    std::vector<TaskArgument> args;
    std::string return_id;
    size_t unresolved = 0;                // by-ref arguments still pending
    std::vector<std::string> held_ids;  // references held until the task is done
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

  struct TaskError {
    ErrorKind kind;
    std::string message;
  };

  void ThreadMain();
  void Execute(Task& task);
  // Fills the by-ref entries of `args`; the error of a failed argument, if any.
  std::optional<TaskError> ResolveArguments(const Task& task, std::vector<ObjectData>* args);
  // Materializes the by-value arguments and runs the function (no lock held).
  std::optional<TaskError> Run(const Task& task, std::vector<ObjectData>& args, SerializedValue* result,
                               std::shared_ptr<const std::string>* bytes);

  const size_t base_threads_;
  const std::string id_prefix_;  // random, distinguishes runtimes' ids

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // an object completed, or shutdown
  absl::CondVar work_;     // a task was queued, or shutdown
  uint64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
  // Tasks waiting for an argument, by the argument's id.
  std::unordered_map<std::string, std::vector<std::shared_ptr<Task>>> waiting_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Task>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  size_t idle_threads_ ABSL_GUARDED_BY(mu_) = 0;
  size_t blocked_threads_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Callers inside Get/Wait; the destructor wakes them and waits until they left.
  int active_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace ray
