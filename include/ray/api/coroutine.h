// Coroutines over futures (a Manta addition: Ray's C++ API blocks a thread per Get).
//
//   ray::Coroutine<int> Sum(ray::ObjectRef<int> a, ray::ObjectRef<int> b) {
//     std::shared_ptr<int> x = co_await a;  // no thread waits meanwhile
//     std::shared_ptr<int> y = co_await b;
//     co_return *x + *y;
//   }
//   int total = ray::RunAsync(Sum(ray::Task(F).Remote(1), ray::Task(F).Remote(2)));
//
// - ray::Coroutine<T>: a coroutine returning T (void by default). It starts when
//   awaited (`co_await Sub()` from another coroutine) or run (RunAsync, Spawn), and
//   passes its exception, if any, to whoever awaits it.
// - `co_await ref` (an ObjectRef<T>): suspends until the object is ready here (its
//   value or error readable without waiting; an object stored on another node is
//   pulled first), then gives what ref.Get() gives: a shared_ptr<T>, or throws the
//   object's error (RayTaskException, RayTaskCancelledException, ...).
// - Combinators: co_await ray::WhenAll(refs) (every value, in order; the first error
//   in order throws), ray::WhenAny(refs) (the index of a ready one), and
//   ray::WaitAsync(refs, n) (the coroutine form of ray::Wait: a WaitResult once n are
//   ready).
// - Where coroutines run: ray::RunAsync(c) runs c, and everything it awaits, on the
//   calling thread until it finishes, and returns its result. ray::Spawn(executor, c)
//   starts c on an Executor of yours (a thread pool, an asio::io_context:
//   ray::Executor([&io](auto fn) { asio::post(io, std::move(fn)); })) and returns a
//   std::future. A coroutine resumes on the executor it was started on.
// - A remote function may itself be a coroutine: RAY_REMOTE'd `ray::Coroutine<T> F()`
//   is called as any task (ray::Task(F).Remote() gives an ObjectRef<T>), and its
//   worker runs it with RunAsync.
//
// Awaits cost no thread: 100,000 of them may be outstanding on one RunAsync thread.
// An await that is never satisfied (its task never finishes) keeps its coroutine
// until ray::Shutdown, when every await resumes with an error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/wait_result.h"

namespace ray {

// Runs functions later, on a thread of its own (never inline in Post): where
// coroutines resume. Copyable; the copies post to the same place.
class Executor {
 public:
  using PostFunction = std::function<void(std::function<void()>)>;
  explicit Executor(PostFunction post) : post_(std::move(post)) {}
  void Post(std::function<void()> fn) const { post_(std::move(fn)); }

 private:
  PostFunction post_;
};

template <typename T = void>
class Coroutine;

namespace internal {

// The executor whose coroutine the calling thread is running (null: none).
inline std::shared_ptr<const Executor>& CurrentExecutor() {
  static thread_local std::shared_ptr<const Executor> current;
  return current;
}

// Makes `executor` the calling thread's current one while alive.
class ScopedExecutor {
 public:
  explicit ScopedExecutor(std::shared_ptr<const Executor> executor)
      : previous_(std::exchange(CurrentExecutor(), std::move(executor))) {}
  ~ScopedExecutor() { CurrentExecutor() = std::move(previous_); }
  ScopedExecutor(const ScopedExecutor&) = delete;
  ScopedExecutor& operator=(const ScopedExecutor&) = delete;

 private:
  std::shared_ptr<const Executor> previous_;
};

// Resumes `handle` on `executor` (as its current executor there).
inline void ResumeOn(const std::shared_ptr<const Executor>& executor, std::coroutine_handle<> handle) {
  executor->Post([executor, handle] {
    ScopedExecutor scope(executor);
    handle.resume();
  });
}

// What an await needs before it suspends: the executor to resume on and the runtime.
struct AwaitContext {
  std::shared_ptr<const Executor> executor;
  RayRuntime* runtime = nullptr;
};
inline AwaitContext ContextForAwait(const char* what) {
  AwaitContext context{CurrentExecutor(), GetRayRuntime()};
  if (context.executor == nullptr) {
    throw RayException(std::string(what) +
                       ": co_await outside ray::RunAsync and ray::Spawn (no executor to resume the coroutine on)");
  }
  if (context.runtime == nullptr) {
    throw RayException(std::string(what) + ": ray::Init() has not been called (or ray::Shutdown() has)");
  }
  return context;
}

// The result of a finished coroutine: its value or its exception.
template <typename T>
class Outcome {
 public:
  template <typename U>
  void Set(U&& value) {
    value_.emplace(std::forward<U>(value));
  }
  void Fail(std::exception_ptr error) { error_ = std::move(error); }
  T Take() {
    if (error_) std::rethrow_exception(error_);
    return std::move(*value_);
  }
  void Fulfil(std::promise<T>& promise) {
    if (error_) {
      promise.set_exception(error_);
    } else {
      promise.set_value(std::move(*value_));
    }
  }

 private:
  std::optional<T> value_;
  std::exception_ptr error_;
};

template <>
class Outcome<void> {
 public:
  void Set() {}
  void Fail(std::exception_ptr error) { error_ = std::move(error); }
  void Take() {
    if (error_) std::rethrow_exception(error_);
  }
  void Fulfil(std::promise<void>& promise) {
    if (error_) {
      promise.set_exception(error_);
    } else {
      promise.set_value();
    }
  }

 private:
  std::exception_ptr error_;
};

template <typename T>
struct PromiseCommon {
  std::coroutine_handle<> continuation;  // the awaiting coroutine, resumed at the end
  Outcome<T> outcome;

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      std::coroutine_handle<> next = self.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() { outcome.Fail(std::current_exception()); }
};

template <typename T>
struct PromiseReturn : PromiseCommon<T> {
  template <typename U = T>
  void return_value(U&& value) {
    this->outcome.Set(std::forward<U>(value));
  }
};
template <>
struct PromiseReturn<void> : PromiseCommon<void> {
  void return_void() { outcome.Set(); }
};

// A coroutine nobody awaits: starts at once, frees itself at its end.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

// Runs `coroutine` from the calling thread, then `done(outcome)` where it finished.
template <typename T, typename Done>
Detached StartDetached(Coroutine<T> coroutine, Done done) {
  Outcome<T> outcome;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(coroutine);
      outcome.Set();
    } else {
      outcome.Set(co_await std::move(coroutine));
    }
  } catch (...) {
    outcome.Fail(std::current_exception());
  }
  done(std::move(outcome));
}

// RunAsync's executor: a queue the calling thread drains until stopped.
class ThreadLoop {
 public:
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  // Runs what is posted until Stop() was called and nothing is queued.
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
};

template <typename T>
struct IsCoroutine : std::false_type {};
template <typename T>
struct IsCoroutine<Coroutine<T>> : std::true_type {
  using ValueType = T;
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Coroutine {
 public:
  struct promise_type : internal::PromiseReturn<T> {
    Coroutine get_return_object() { return Coroutine(std::coroutine_handle<promise_type>::from_promise(*this)); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Coroutine(Coroutine&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Coroutine& operator=(Coroutine&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Coroutine(const Coroutine&) = delete;
  Coroutine& operator=(const Coroutine&) = delete;
  ~Coroutine() {
    if (handle_) handle_.destroy();
  }

  // Awaiting a coroutine runs it; the awaiter resumes when it finishes, with its
  // value or its exception. A coroutine runs once: await it (or run it) once.
  class Awaiter {
   public:
    explicit Awaiter(Handle handle) : handle_(handle) {}
    bool await_ready() const {
      if (!handle_) throw internal::RayException("co_await on an empty ray::Coroutine (moved from)");
      return handle_.done();
    }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
      handle_.promise().continuation = awaiting;
      return handle_;
    }
    T await_resume() { return handle_.promise().outcome.Take(); }

   private:
    Handle handle_;
  };
  Awaiter operator co_await() && { return Awaiter(handle_); }

 private:
  explicit Coroutine(Handle handle) : handle_(handle) {}
  Handle handle_;
};

// Runs `coroutine` on the calling thread until it finishes; returns its value or
// throws its exception. Everything it awaits resumes on this thread. May be nested
// (a coroutine calling RunAsync blocks its own executor meanwhile).
template <typename T>
T RunAsync(Coroutine<T> coroutine) {
  auto loop = std::make_shared<internal::ThreadLoop>();
  auto executor = std::make_shared<const Executor>([loop](std::function<void()> fn) { loop->Post(std::move(fn)); });
  internal::Outcome<T> result;
  {
    internal::ScopedExecutor scope(executor);
    internal::StartDetached(std::move(coroutine), [&result, loop](internal::Outcome<T> outcome) {
      result = std::move(outcome);
      loop->Stop();
    });
  }
  loop->Run();
  return result.Take();
}

// Starts `coroutine` on `executor` and returns at once; the future gets its value
// or exception.
template <typename T>
std::future<T> Spawn(Executor executor, Coroutine<T> coroutine) {
  auto shared = std::make_shared<const Executor>(std::move(executor));
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  auto start = std::make_shared<Coroutine<T>>(std::move(coroutine));
  shared->Post([shared, promise, start] {
    internal::ScopedExecutor scope(shared);
    internal::StartDetached(std::move(*start),
                            [promise](internal::Outcome<T> outcome) { outcome.Fulfil(*promise); });
  });
  return future;
}

namespace internal {

// co_await on an ObjectRef<T>: see the top of this file.
template <typename T>
class ObjectRefAwaiter {
 public:
  explicit ObjectRefAwaiter(const ObjectRef<T>& ref) : ref_(ref) {}
  bool await_ready() const noexcept { return ref_.IsNil(); }  // Get throws for a nil ref
  void await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait("co_await ObjectRef");
    // Nothing of this awaiter is touched once registered: the coroutine may already
    // be running again on another thread of its executor.
    context.runtime->NotifyWhenReady(ref_.ID(), [executor = std::move(context.executor), handle] {
      ResumeOn(executor, handle);
    });
  }
  auto await_resume() const { return ref_.Get(); }

 private:
  const ObjectRef<T>& ref_;  // the co_await's operand: alive until it resumes
};

// Counts the objects of a combinator found ready; remembers the first.
struct ReadyCount {
  explicit ReadyCount(size_t needed) : left(needed) {}
  // Records that position `i` is ready; true for the one call that completes the count.
  bool Arrive(size_t i) {
    int64_t none = -1;
    first.compare_exchange_strong(none, static_cast<int64_t>(i));
    size_t n = left.load();
    while (n > 0 && !left.compare_exchange_weak(n, n - 1)) {
    }
    return n == 1;
  }
  std::atomic<size_t> left;
  std::atomic<int64_t> first{-1};
};

// The combinators' common part: suspends until `needed` of `refs` are ready.
template <typename T>
class RefsAwaiter {
 public:
  static constexpr size_t kAll = static_cast<size_t>(-1);
  // `needed`: how many must be ready (kAll: every one).
  RefsAwaiter(std::vector<ObjectRef<T>> refs, size_t needed, const char* what)
      : refs_(std::move(refs)), needed_(needed == kAll ? refs_.size() : needed), what_(what) {
    for (const ObjectRef<T>& ref : refs_) {
      if (ref.IsNil()) throw RayException(std::string(what) + ": a nil ObjectRef in the list");
    }
    if (needed_ > refs_.size()) {
      throw RayException(std::string(what) + ": waiting for " + std::to_string(needed_) + " of " +
                         std::to_string(refs_.size()) + " objects");
    }
  }
  bool await_ready() const noexcept { return needed_ == 0; }
  void await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait(what_);
    count_ = std::make_shared<ReadyCount>(needed_);
    std::vector<std::string> ids = Ids();
    // Nothing of this awaiter is touched once the last is registered (see above).
    for (size_t i = 0; i < ids.size(); ++i) {
      context.runtime->NotifyWhenReady(ids[i], [count = count_, executor = context.executor, handle, i] {
        if (count->Arrive(i)) ResumeOn(executor, handle);
      });
    }
  }

 protected:
  std::vector<std::string> Ids() const {
    std::vector<std::string> ids;
    ids.reserve(refs_.size());
    for (const ObjectRef<T>& ref : refs_) ids.push_back(ref.ID());
    return ids;
  }

  std::vector<ObjectRef<T>> refs_;
  size_t needed_;
  const char* what_;
  std::shared_ptr<ReadyCount> count_;
};

template <typename T>
class AllAwaiter : public RefsAwaiter<T> {
 public:
  explicit AllAwaiter(std::vector<ObjectRef<T>> refs)
      : RefsAwaiter<T>(std::move(refs), RefsAwaiter<T>::kAll, "ray::WhenAll") {}
  auto await_resume() const {
    if constexpr (std::is_void_v<T>) {
      for (const ObjectRef<T>& ref : this->refs_) ref.Get();
    } else {
      std::vector<std::shared_ptr<T>> values;
      values.reserve(this->refs_.size());
      for (const ObjectRef<T>& ref : this->refs_) values.push_back(ref.Get());
      return values;
    }
  }
};

template <typename T>
class AnyAwaiter : public RefsAwaiter<T> {
 public:
  explicit AnyAwaiter(std::vector<ObjectRef<T>> refs) : RefsAwaiter<T>(std::move(refs), 1, "ray::WhenAny") {}
  size_t await_resume() const { return static_cast<size_t>(this->count_->first.load()); }
};

template <typename T>
class WaitAwaiter : public RefsAwaiter<T> {
 public:
  WaitAwaiter(std::vector<ObjectRef<T>> refs, size_t num_objects)
      : RefsAwaiter<T>(std::move(refs), num_objects, "ray::WaitAsync") {}
  WaitResult<T> await_resume() const {
    RayRuntime* runtime = GetRayRuntime();
    if (runtime == nullptr) throw RayException("ray::WaitAsync: ray::Shutdown() was called while waiting");
    std::vector<bool> ready = runtime->Wait(this->Ids(), static_cast<int>(this->needed_), 0, false);
    std::list<ObjectRef<T>> ready_refs, unready_refs;
    for (size_t i = 0; i < this->refs_.size(); ++i) (ready[i] ? ready_refs : unready_refs).push_back(this->refs_[i]);
    return WaitResult<T>(std::move(ready_refs), std::move(unready_refs));
  }
};

// co_await ray::WhenAll(coroutines): runs them all at once on the awaiting
// coroutine's executor; resumes when every one finished.
template <typename T>
class CoroutinesAwaiter {
 public:
  explicit CoroutinesAwaiter(std::vector<Coroutine<T>> coroutines) : coroutines_(std::move(coroutines)) {}
  bool await_ready() const noexcept { return coroutines_.empty(); }
  bool await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait("ray::WhenAll");
    shared_ = std::make_shared<Shared>(coroutines_.size());
    // One count more than there are coroutines, given back below: none of them can
    // resume the awaiting coroutine before all were started.
    for (size_t i = 0; i < coroutines_.size(); ++i) {
      StartDetached(std::move(coroutines_[i]),
                    [shared = shared_, executor = context.executor, handle, i](Outcome<T> outcome) {
                      shared->outcomes[i] = std::move(outcome);
                      if (shared->left.fetch_sub(1) == 1) ResumeOn(executor, handle);
                    });
    }
    return shared_->left.fetch_sub(1) != 1;  // all finished already: go on at once
  }
  auto await_resume() {
    if constexpr (std::is_void_v<T>) {
      if (shared_ != nullptr) {
        for (Outcome<T>& outcome : shared_->outcomes) outcome.Take();
      }
    } else {
      std::vector<T> values;
      if (shared_ == nullptr) return values;
      values.reserve(shared_->outcomes.size());
      for (Outcome<T>& outcome : shared_->outcomes) values.push_back(outcome.Take());
      return values;
    }
  }

 private:
  struct Shared {
    explicit Shared(size_t n) : left(n + 1), outcomes(n) {}
    std::atomic<size_t> left;
    std::vector<Outcome<T>> outcomes;
  };
  std::vector<Coroutine<T>> coroutines_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace internal

template <typename T>
internal::ObjectRefAwaiter<T> operator co_await(const ObjectRef<T>& ref) {
  return internal::ObjectRefAwaiter<T>(ref);
}

// co_await ray::WhenAll(refs): the values of all (shared_ptr<T> each, in order; for
// ObjectRef<void>, nothing), once every one is ready; the first error in order throws.
template <typename T>
internal::AllAwaiter<T> WhenAll(std::vector<ObjectRef<T>> refs) {
  return internal::AllAwaiter<T>(std::move(refs));
}

// co_await ray::WhenAll(coroutines): runs the coroutines concurrently on the
// awaiting one's executor (each until its first await, then as its awaits complete)
// and gives their values in order (nothing for Coroutine<void>) once all finished;
// the first exception in order is thrown, after all finished.
template <typename T>
internal::CoroutinesAwaiter<T> WhenAll(std::vector<Coroutine<T>> coroutines) {
  return internal::CoroutinesAwaiter<T>(std::move(coroutines));
}

// co_await ray::WhenAny(refs): the position of an object that is ready (the first
// found ready). Read it with co_await refs[i] or refs[i].Get().
template <typename T>
internal::AnyAwaiter<T> WhenAny(std::vector<ObjectRef<T>> refs) {
  if (refs.empty()) throw internal::RayException("ray::WhenAny: no objects to wait for");
  return internal::AnyAwaiter<T>(std::move(refs));
}

// co_await ray::WaitAsync(refs, num_objects): ray::Wait without a thread waiting:
// once num_objects of refs are ready, a WaitResult as ray::Wait gives (at least
// num_objects ready; both lists in the order of refs).
template <typename T>
internal::WaitAwaiter<T> WaitAsync(std::vector<ObjectRef<T>> refs, size_t num_objects) {
  return internal::WaitAwaiter<T>(std::move(refs), num_objects);
}

}  // namespace ray
